"""Sequence models: the small Transformer (`transformer`), attention written out and from torch
(`attention`), positional encodings (`positions`) and what heads learn (`retrieval`)."""
