"""A small character-level GPT, trained for a minute on CPU with the explorer watching it.

    python examples/char_gpt.py            # then open the app's "Your runs" page (streamlit run app.py)

The model is the usual decoder-only Transformer (token and position embeddings, pre-LN blocks of
causal self-attention and an MLP, a head tied to the token embedding), written out here the way
a person's own script would have it: `watch` knows nothing about it beyond `nn.Module`. Every
module with parameters of its own is watched, named by its path (`blocks.0.attn.qkv`, ...).

The text is made in code: sentences drawn from a small seeded grammar, so the example needs
nothing downloaded. (The language scenarios' real text source, engines/sequence/text.py with the
standard library's docstrings, can replace `grammar_text` once it is in; its `text()` returns a str.)
"""
import argparse
import math
import random
import sys
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
from explorer import watch  # noqa: E402

SUBJECTS = ["the cat", "a small dog", "my neighbour", "the old sailor", "every child", "the teacher", "a robot"]
VERBS = ["sees", "follows", "paints", "forgets", "carries", "greets", "measures", "finds"]
OBJECTS = ["the moon", "a red kite", "the river", "an umbrella", "the last train", "seven apples", "the garden"]
ENDINGS = ["at dawn", "in the rain", "with care", "before supper", "every morning", "without a word", ""]


def grammar_text(sentences: int, seed: int = 0) -> str:
    """`sentences` sentences of a tiny grammar: subject, verb, object, sometimes a phrase, a full stop."""
    pick = random.Random(seed)
    lines = []
    for _ in range(sentences):
        words = [pick.choice(SUBJECTS), pick.choice(VERBS), pick.choice(OBJECTS), pick.choice(ENDINGS)]
        lines.append(" ".join(w for w in words if w) + ".")
    return " ".join(lines)


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, heads, length, head width)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class CharGPT(nn.Module):
    def __init__(self, vocab: int, width: int = 64, depth: int = 2, heads: int = 4, context: int = 64) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.token.weight  # tied: counted once, with the token embedding
        for embedding in (self.token, self.position):
            nn.init.normal_(embedding.weight, std=0.02)  # GPT-2's: N(0, 1) would make the tied logits ~8 wide

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # (batch, length, vocab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=10, help="measure every k-th optimizer step")
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    torch.manual_seed(0)
    text = grammar_text(4000)
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    context, batch = 64, 32
    model = CharGPT(len(chars), context=context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 30))  # 30 warmup steps
    run = watch(model, optimizer, name="char-gpt", every=args.every,
                config={"lr": args.lr, "width": 64, "depth": 2, "context": context, "batch": batch})
    generator = torch.Generator().manual_seed(0)
    for step in range(args.steps):
        starts = torch.randint(0, len(data) - context - 1, (batch,), generator=generator)
        window = torch.stack([data[s:s + context + 1] for s in starts])  # (batch, context + 1)
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        schedule.step()
        run.log(loss=loss)
        if step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.3f}  (uniform: ln {len(chars)} = {math.log(len(chars)):.2f})")
    run.finish()
    print(f"\nrun {run.run_id} — what to look for:")
    for sentence in run.diagnosis():
        print(" -", sentence)


if __name__ == "__main__":
    main()
