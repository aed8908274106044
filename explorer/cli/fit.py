"""`tdx fit`: will my model fit? Per-rank memory of one training step, measured under FakeTensorMode.

    tdx fit my_pkg.models:build --strategy fsdp-zero3 --world 64 --batch 64 --seq 2048 --dtype bf16 --optimizer adamw
    tdx fit --arch llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --vocab 128256 --world 8 --batch 8 --json

MODEL is MODULE:FACTORY (the module is imported: its code runs), a factory returning an
nn.Module; or `--arch` builds a GPT-style or Llama-style model. `--batch` is the global batch,
split over the ranks. Without `--json` a table: rank 0's bytes by category at the step's peak
beside the analytic model (ZeRO's model states, Korthikanti's activations), each difference
named, and a "fits on" line. Bad input exits 2 with one line; an error raised by the model's
own code (a factory that downloads weights, offline) exits 1 with that error.
"""
import argparse
import os
import sys

from explorer.cli.run import RUN_FAILED, UsageError
from explorer.plaintext import one_line

# engines/distributed/fit.py's choices, written out: importing it would load torch before the arguments are read
STRATEGIES = ("single", "ddp", "fsdp-zero2", "fsdp-zero3")
DTYPES = ("fp32", "bf16", "bf16-mixed")
OPTIMIZERS = ("adamw", "adam", "sgd")
SHAPE = ("layers", "hidden", "heads", "kv_heads", "vocab", "ffn")


def add_fit_command(commands) -> argparse.ArgumentParser:
    """Register `fit` on the CLI's subcommands."""
    fit = commands.add_parser("fit", help="per-rank memory of your model's training step (no GPU needed)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fit.add_argument("model", nargs="?", help="MODULE:FACTORY returning an nn.Module (its module's code runs)")
    fit.add_argument("--arch", choices=("gpt", "llama"), help="a built-in architecture instead of MODEL")
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12), ("kv-heads", None), ("vocab", 50304),
                          ("ffn", None)):
        fit.add_argument(f"--{name}", type=_positive, default=default, help=f"--arch: {name} (default {default})")
    fit.add_argument("--strategy", choices=STRATEGIES, default="fsdp-zero3",
                     help="single (one device), ddp, or FSDP2 with reshard_after_forward False (ZeRO-2-like) "
                          "or True (ZeRO-3-like)")
    fit.add_argument("--world", type=_positive, default=8, help="ranks, 1..1024 (default 8)")
    fit.add_argument("--batch", type=_positive, default=8, help="global batch, split over the ranks (default 8)")
    fit.add_argument("--seq", type=_positive, default=1024, help="tokens per sequence (default 1024)")
    fit.add_argument("--dtype", choices=DTYPES, default="bf16",
                     help="bf16: parameters and optimizer state in bf16; bf16-mixed: fp32 kept, bf16 compute")
    fit.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="sgd has momentum (default adamw)")
    fit.add_argument("--checkpointing", action="store_true", help="activation checkpointing per block")
    fit.add_argument("--inputs", metavar="MODULE:FUNCTION", help="a function (batch, seq) -> example inputs")
    fit.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="the device the fake tensors claim (cuda needs one: allocator rounding, its kernels)")
    fit.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    fit.set_defaults(func=cmd_fit)
    return fit


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def job_arguments(args: argparse.Namespace) -> dict:
    """The keyword arguments of explorer.fit.fit from the command line (UsageError when MODEL is missing)."""
    if args.model and args.arch:
        raise UsageError("give either MODEL (MODULE:FACTORY) or --arch, not both")
    if not args.model and not args.arch:
        raise UsageError("name a model: MODULE:FACTORY (a function returning an nn.Module) or --arch gpt|llama")
    architecture = None
    if args.arch:
        architecture = {"architecture": args.arch, **{k: getattr(args, k) for k in SHAPE if getattr(args, k)}}
        if args.arch == "gpt":
            architecture["max_seq"] = args.seq  # learned positions, as many as the sequence measured
    return {"architecture": architecture, "inputs": args.inputs, "strategy": args.strategy, "world": args.world,
            "batch": args.batch, "seq": args.seq, "dtype": args.dtype, "optimizer": args.optimizer,
            "checkpointing": args.checkpointing, "device": args.device}


def cmd_fit(args: argparse.Namespace) -> int:
    arguments = job_arguments(args)
    if os.getcwd() not in sys.path:  # MODULE:FACTORY is found from where the command runs, as with python -m
        sys.path.insert(0, os.getcwd())
    from engines.distributed.fit_inputs import FitError, ModelError  # torch loads here, the arguments known
    from explorer.fit import fit, table
    try:
        report = fit(args.model, **arguments)
    except FitError as error:
        raise UsageError(str(error)) from None
    except ModelError as error:
        print(one_line(f"error: {error}"), file=sys.stderr)
        return RUN_FAILED
    if args.json:
        from explorer.cli.output import print_json
        print_json({key: report[key] for key in ("config", "n_params", "rank", "per_rank", "analytic", "difference",
                                                  "phases", "fits_on", "seconds")})
    else:
        print(table(report))
    return 0
