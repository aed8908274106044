"""What a worker makes ready before its first run."""
import os
import subprocess
import sys


def test_a_ready_worker_makes_the_prose_corpus_before_its_first_run() -> None:
    """qlora's and pretrain-finetune's first point waited ~0.35 s of CPU on the prose corpus in a fresh
    worker; the worker now builds it once ready."""
    code = ("import sys; from explorer.runs import worker; from engines.sequence import text\n"
            "worker.warm_data(); print(text.prose.cache_info().currsize, text.prose_paragraphs.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.stdout.split() == ["1", "1"], done.stdout + done.stderr
