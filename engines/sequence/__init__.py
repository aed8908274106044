"""Sequence models: the small Transformer (`transformer`), attention written out and from torch
(`attention`), positional encodings (`positions`) and what heads learn (`retrieval`); and the
language-model platform: text that ships with the machine (`text`: stdlib-docstring prose and a
Markov source; `topics`: topic lines), byte-level BPE (`bpe`, `vocabulary`), a tiny causal or
bidirectional LM with its objectives and sampling (`lm`), and the measurements of the LM pages
(`next_token`, `tokenization`). Each module's docstring states its API."""
