"""`watch` under DistributedDataParallel: rank 0 records by default, every rank when asked, and the
gradients it records are those after the all-reduce (the same on every rank)."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from explorer.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent

RANKS = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn

    def rank_main(rank, world, port, ranks):
        from explorer import watch
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        torch.manual_seed(0)  # the same weights on every rank
        model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        run = watch(model, optimizer, name="ddp", every=1, ranks=ranks)
        generator = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
        for _ in range(4):
            x = torch.randn(16, 8, generator=generator)
            loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
            loss.backward(); optimizer.step(); optimizer.zero_grad(); run.log(loss=loss)
        run.finish()
        dist.destroy_process_group()

    if __name__ == "__main__":
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
        mp.spawn(rank_main, args=(2, port, sys.argv[1]), nprocs=2, join=True)
""")


@pytest.mark.slow  # two rank processes importing torch
@pytest.mark.parametrize("ranks", ["0", "all"])
def test_ddp_ranks_record_the_all_reduced_gradients(ranks: str, tmp_path) -> None:
    """ranks="0": one run, rank 0's; "all": one per rank, named by rank, with equal gradient norms (after the
    all-reduce) and their own losses (their own batches)."""
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EXPLORER_TORCH_THREADS": "1"}
    result = subprocess.run([sys.executable, str(script), ranks], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    store = RunStore()
    runs = {r.name: r for r in store.list_runs("watched")}
    if ranks == "0":
        assert list(runs) == ["ddp"] and runs["ddp"].status == "finished", runs
        return
    assert sorted(runs) == ["ddp · rank 0", "ddp · rank 1"], sorted(runs)
    frames = [store.frame(runs[f"ddp · rank {r}"].run_id) for r in (0, 1)]
    grads = [f[f.metric == "grad_norm/layer_01"].value.tolist() for f in frames]
    losses = [f[f.metric == "loss"].value.tolist() for f in frames]
    assert grads[0] == pytest.approx(grads[1], rel=1e-6) and len(grads[0]) == 4, grads
    assert losses[0] != losses[1], losses
    assert "after DDP's all-reduce" in " ".join(runs["ddp · rank 1"].config["watch_notes"])
