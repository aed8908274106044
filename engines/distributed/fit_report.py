"""A fit measurement as plain data: what `tdx fit` prints, `--json` writes and the page draws.

A job names the model and the step:

    {"model": "my_pkg.models:build",        # an import path (its module's code runs), or
     "architecture": {"architecture": "llama", "layers": 32, ...},   # a built-in (fit_models)
     "inputs": "my_pkg.models:example",     # optional: (batch, seq) -> example inputs
     "spec": {"strategy": "fsdp-zero3", "world": 64, "batch": 64, "seq": 2048, ...}}

`report(job)` measures rank 0 under FakeTensorMode (engines.distributed.fit) and returns
its bytes by category at the peak ("per_rank", which sums to the peak) and at each phase,
the analytic model's bytes beside them ("analytic"), each difference named ("difference"),
and whether the peak fits on common accelerators. `python -m engines.distributed.fit_report
--job '{...}'` prints the same as one JSON line (the page runs it in a subprocess, so the UI
process never imports torch); bad input prints {"error": "..."} and exits 2.

`run_job` is the real-rank side for tests: launched by engines.distributed.launch with
`"kind": "fit"`, every rank of a real gloo group runs the same step for real.
"""
import json
import sys
from typing import Any

from engines.distributed.fit import FitSpec, measure
from engines.distributed.fit_analytic import analytic, differences, fits_line, fits_on
from engines.distributed.fit_inputs import FitError, load
from engines.distributed.fit_models import ArchitectureSpec, build, check
from engines.distributed.fit_step import CATEGORIES


def resolve(job: dict) -> tuple[Any, Any, str, dict | None]:
    """(factory, input function or None, the model's name, the built-in shape or None)."""
    inputs = load(job["inputs"], "inputs function") if job.get("inputs") else None
    if job.get("architecture"):
        try:
            arch = ArchitectureSpec(**job["architecture"])
            check(arch)
        except (TypeError, ValueError) as error:
            raise FitError(f"architecture: {error}") from None
        return (lambda: build(arch)), inputs, f"built-in {arch.architecture}-style model", arch.to_dict()
    if callable(job.get("model")):  # the Python API may hand the factory itself
        return job["model"], inputs, getattr(job["model"], "__qualname__", "the model factory"), None
    if not job.get("model"):
        raise FitError("name a model: an import path MODULE:FACTORY or a built-in architecture")
    return load(job["model"]), inputs, job["model"], None


def spec_of(job: dict) -> FitSpec:
    try:
        spec = FitSpec(**job.get("spec", {}))
    except TypeError as error:
        raise FitError(f"spec: {error}") from None
    spec.check()
    return spec


def report(job: dict) -> dict[str, Any]:
    """Measure the job's step (fake) and set it beside the analytic model."""
    spec = spec_of(job)
    factory, inputs, name, arch = resolve(job)
    if arch and arch["architecture"] == "gpt" and spec.seq > arch["max_seq"]:
        raise FitError(f"seq {spec.seq} is longer than the GPT-style model's {arch['max_seq']} learned positions")
    result = measure(factory, spec, inputs, name=name, device=job.get("device", "cpu"))
    phases, sizes = result["phases"], result["sizes"]
    per_rank = {c: phases["peak"][c] for c in CATEGORIES}
    per_rank["peak"] = phases["peak"]["total"]
    formula = analytic(result["spec"], sizes, arch)
    return {"config": {"model": name, "architecture": arch, "inputs": job.get("inputs"), **result["spec"],
                       "device": result["device"]},
            "n_params": int(sizes["n_params"]), "rank": result["rank"], "per_rank": per_rank, "analytic": formula,
            "difference": differences(per_rank, formula, phases, result["spec"], sizes, arch),
            "phases": phases, "fits_on": fits_on(per_rank["peak"]),
            "fits_line": fits_line(per_rank["peak"], formula["peak"]),
            "sizes": sizes, "seconds": result["seconds"]}


def run_job(job: dict, rank: int, world: int, emit) -> None:
    """On a real rank (engines.distributed.worker, `"kind": "fit"`): each spec of `job["specs"]`
    measured for real in this process group; one record per spec with `phase/category` bytes."""
    factory, inputs, name, _ = resolve(job)
    for index, fields in enumerate(job["specs"]):
        spec = spec_of({"spec": fields})
        result = measure(factory, spec, inputs, fake=False, name=name)
        metrics = {f"{phase}/{category}": value for phase, by in result["phases"].items()
                   for category, value in by.items()}
        emit({"arm": f"{index}:{spec.strategy}", "rank": rank, "step": 0, "metrics": metrics})


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings
    from engines.loop.runtime import configure
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", required=True, help="JSON: model or architecture, inputs, spec")
    job = json.loads(parser.parse_args(argv).job)
    configure(1)
    warnings.filterwarnings("ignore")
    try:
        print(json.dumps(report(job)))
    except FitError as error:
        print(json.dumps({"error": str(error)}))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
