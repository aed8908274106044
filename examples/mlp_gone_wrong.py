"""An MLP that goes wrong on purpose, and what the explorer says about it.

    python examples/mlp_gone_wrong.py                 # a deep sigmoid MLP: the gradient vanishes
    python examples/mlp_gone_wrong.py --fault dead    # ReLU at a learning rate of 0.5: dead units, big updates
    python examples/mlp_gone_wrong.py --fault init    # one layer initialised ×1000
    python examples/mlp_gone_wrong.py --fault spike   # the learning rate raised ×4 halfway
    python examples/mlp_gone_wrong.py --fault nan     # a learning rate of 50: the loss goes infinite

Each trains for a few seconds on a two-class task made in code, with `watch` on, then prints the
run's diagnosis — the same sentences as the app's "Your runs" page and `python -m explorer show RUN_ID`.
"""
import argparse
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
from explorer import watch  # noqa: E402

FAULTS = {  # fault -> (activation, depth, learning rate, what goes wrong)
    "vanishing": (nn.Sigmoid, 12, 0.1, "sigmoid at depth 12 with PyTorch's default init"),
    "dead": (nn.ReLU, 4, 0.5, "ReLU at SGD lr 0.5"),
    "init": (nn.Tanh, 6, 0.05, "module 3's weights ×1000"),
    "spike": (nn.ReLU, 3, 0.5, "lr 0.5, then 2.0 from the middle of the run"),
    "nan": (nn.ReLU, 3, 50.0, "SGD at lr 50"),
}


def mlp(activation: type[nn.Module], depth: int, width: int = 32) -> nn.Sequential:
    layers, inputs = [], 16
    for _ in range(depth):
        layers += [nn.Linear(inputs, width), activation()]
        inputs = width
    return nn.Sequential(*layers, nn.Linear(inputs, 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=FAULTS, default="vanishing")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--every", type=int, default=5, help="measure every k-th optimizer step")
    args = parser.parse_args()
    activation, depth, lr, what = FAULTS[args.fault]
    torch.manual_seed(0)
    model = mlp(activation, depth)
    if args.fault == "init":
        with torch.no_grad():
            model[4].weight.mul_(1e3)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    run = watch(model, optimizer, name=f"mlp gone wrong: {args.fault}", every=args.every,
                config={"fault": args.fault, "activation": activation.__name__, "depth": depth, "lr": lr})
    generator = torch.Generator().manual_seed(0)
    for step in range(args.steps):
        if args.fault == "spike" and step == args.steps // 2:
            optimizer.param_groups[0]["lr"] = 2.0
        x = torch.randn(64, 16, generator=generator)
        loss = nn.functional.cross_entropy(model(x), (x[:, 0] + x[:, 1] > 0).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        run.log(loss=loss)  # a NaN here is recorded, never raised
    run.finish()
    print(f"{what}: run {run.run_id} ({run.status}) — what to look for:")
    for sentence in run.diagnosis():
        print(" -", sentence)
    print("\nSee it drawn: streamlit run app.py, then the \"Your runs\" page.")


if __name__ == "__main__":
    main()
