"""What watching a training loop costs, side by side in one process (not a test: it prints a table).

    python bench/watch_bench.py [--steps 300] [--rounds 7] [--device cpu] [--models mlp,transformer]

One intra-op thread; every variant trains the same model (fresh, same seed), on the same batches,
with the same optimizer. Each round runs every variant once, in turn (interleaved, so a slower
minute of the machine hits them all), after one untimed warm-up round. The table gives a variant's
median ms per step over rounds, and its ratio to the bare loop as the median over rounds of its
time ÷ the bare loop's time in the same round (paired: on a host whose speed drifts between rounds
this spreads less than a ratio of the two medians), in wall time and in the process's CPU time
(which counts the store writer's thread too); `spread` is the middle half of the paired wall ratios.

Variants:
- bare: forward, backward, step, zero_grad;
- watch every=1, every=10: `from explorer import watch` on the loop, `run.log(loss=loss)` each step,
  written to a temporary run store (the writer thread included);
- scenario probes, every step and every 3rd: engines/loop/training.py's `train` with a LayerProbe
  (the MLP only: it probes Linear layers and their activation modules);
- wandb.watch by hand: wandb.watch(log="gradients", log_freq=1) registers a hook per parameter that
  histograms its gradient (64 bins) and sends it to the host every step; the same work by hand
  (`torch.histc`, min, max, `.tolist()` per parameter), since wandb is not installed here;
- TensorBoard per-layer scalars: each module's gradient norm through `SummaryWriter.add_scalar`
  every step (needs the `tensorboard` package; the row says when it is missing).

Models: the 12×Linear width-128 ReLU MLP at batch 128 (cross-entropy over its 128 outputs), and a
small Transformer: 2 pre-LN encoder layers, width 128, 4 heads, 64 tokens, batch 16.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("EXPLORER_STORE", str(Path(tempfile.mkdtemp()) / "watch-bench.sqlite3"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from engines.loop.probes import LayerProbe  # noqa: E402
from engines.loop.training import supervised, train  # noqa: E402
from explorer import watch  # noqa: E402


def mlp() -> nn.Sequential:
    layers = []
    for i in range(12):
        layers += [nn.Linear(128, 128)] + ([nn.ReLU()] if i < 11 else [])
    return nn.Sequential(*layers)


class Transformer(nn.Module):
    def __init__(self, vocab: int = 64, width: int = 128, length: int = 64) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(2))
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(x).flatten(0, 1)  # (batch · length, vocab)


def batches(model_name: str, steps: int, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    if model_name == "mlp":
        return [(torch.randn(128, 128, generator=generator).to(device),
                 torch.randint(0, 128, (128,), generator=generator).to(device)) for _ in range(steps)]
    tokens = [torch.randint(0, 64, (16, 64), generator=generator).to(device) for _ in range(steps)]
    return [(t, t.roll(1, dims=1).flatten()) for t in tokens]


def build(model_name: str, device: str):
    torch.manual_seed(0)
    model = (mlp() if model_name == "mlp" else Transformer()).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)


def loop(model, optimizer, data, after_step: Callable[[int, torch.Tensor], None] | None = None) -> None:
    for step, (x, y) in enumerate(data):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if after_step is not None:
            after_step(step, loss)


def bare(model, optimizer, data) -> Callable[[], None]:
    return lambda: loop(model, optimizer, data)


def watched(every: int):
    def variant(model, optimizer, data) -> Callable[[], None]:
        def go() -> None:
            run = watch(model, optimizer, name=f"bench every={every}", every=every)
            loop(model, optimizer, data, lambda step, loss: run.log(loss=loss))
            variant.finish = run.finish  # the one-off end (a last flush) is not timed
        return go
    return variant


def probes(every: int):
    def variant(model, optimizer, data) -> Callable[[], None]:
        linears = [m for m in model if isinstance(m, nn.Linear)]
        probe = LayerProbe(linears[:-1], [m for m in model if isinstance(m, nn.ReLU)])
        objective = supervised(model, nn.functional.cross_entropy, metric_fn=None)
        return lambda: [None for _ in train(model, optimizer, iter(data), objective, len(data), probe=probe,
                                            log_every=every)]
    return variant


def wandb_by_hand(model, optimizer, data) -> Callable[[], None]:
    def go() -> None:
        pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        handles = [p.register_hook(lambda g: pending.append((torch.histc(g.float(), bins=64), g.min(), g.max())))
                   for p in model.parameters()]

        def send(step: int, loss: torch.Tensor) -> None:
            for hist, low, high in pending:  # wandb turns each into a numpy histogram: one transfer each
                hist.tolist(), float(low), float(high)
            pending.clear()
        loop(model, optimizer, data, send)
        for handle in handles:
            handle.remove()
    return go


def tensorboard_scalars(model, optimizer, data) -> Callable[[], None]:
    from torch.utils.tensorboard import SummaryWriter
    named = [(name, module) for name, module in model.named_modules() if list(module.parameters(recurse=False))]

    def go() -> None:
        writer = SummaryWriter(tempfile.mkdtemp())
        original = optimizer.step

        def step_and_log(*args, **kwargs):  # norms before the step, as a loop that logs them would
            for name, module in named:
                norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in module.parameters(recurse=False)
                                                             if p.grad is not None]))
                writer.add_scalar(f"grad_norm/{name}", norm.item(), counter[0])
            counter[0] += 1
            return original(*args, **kwargs)
        counter = [0]
        optimizer.step = step_and_log
        loop(model, optimizer, data)
        optimizer.step = original
        writer.close()
    return go


def tensorboard_available() -> bool:
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        return True
    except ImportError:
        return False


VARIANTS = {"bare loop": bare, "watch every=1": watched(1), "watch every=10": watched(10),
            "scenario probes, every step": probes(1), "scenario probes, every 3rd": probes(3),
            "wandb.watch by hand (gradients, every step)": wandb_by_hand,
            "TensorBoard per-layer scalars": tensorboard_scalars}


def measure(model_name: str, steps: int, rounds: int, device: str) -> dict[str, list[tuple[float, float]]]:
    """variant -> (wall s/step, CPU s/step) of every timed round, in round order."""
    data = batches(model_name, steps, device)
    names = [n for n in VARIANTS if (model_name == "mlp" or "scenario" not in n)
             and ("TensorBoard" not in n or tensorboard_available())]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for round_ in range(rounds + 1):
        for name in names:
            model, optimizer = build(model_name, device)
            go = VARIANTS[name](model, optimizer, data)
            if device == "cuda":
                torch.cuda.synchronize()
            wall, cpu = time.perf_counter(), time.process_time()
            go()
            if device == "cuda":
                torch.cuda.synchronize()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            getattr(VARIANTS[name], "finish", lambda: None)()
            if round_:  # round 0 warms up (imports, the store, allocator)
                times[name].append((wall / steps, cpu / steps))
    return times


def paired(times: list[tuple[float, float]], bare: list[tuple[float, float]], which: int) -> list[float]:
    """Each round's ratio to the bare loop's time in the same round (which: 0 wall, 1 CPU)."""
    return [t[which] / b[which] for t, b in zip(times, bare)]


def quartiles(values: list[float]) -> tuple[float, float]:
    low, _, high = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0], None, values[0])
    return low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="mlp,transformer")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, device {args.device}, 1 thread, {args.steps} steps × {args.rounds} rounds "
          f"(+1 warm-up), {time.strftime('%Y-%m-%d')}")
    if not tensorboard_available():
        print("TensorBoard row left out: the tensorboard package is not installed")
    for model_name in args.models.split(","):
        results = measure(model_name, args.steps, args.rounds, args.device)
        bare = results["bare loop"]
        print(f"\n{model_name}\n| variant | ms/step | × bare (wall) | spread | × bare (CPU) |\n|---|---|---|---|---|")
        for name, times in results.items():
            walls = paired(times, bare, 0)
            low, high = quartiles(walls)
            print(f"| {name} | {1e3 * statistics.median(w for w, _ in times):.3f} | {statistics.median(walls):.2f} | "
                  f"{low:.2f}–{high:.2f} | {statistics.median(paired(times, bare, 1)):.2f} |")


if __name__ == "__main__":
    main()
