"""`tdx fit`, `explorer.fit.fit` and the "Will it fit?" page: output side by side, one line per bad input."""
import json

import pytest
from streamlit.testing.v1 import AppTest

from explorer.cli.main import main

TINY = ["--arch", "gpt", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "256"]
KEYS = ("parameters", "gradients", "optimizer_state", "activations", "unsharded", "temporaries", "peak")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["fit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_sets_each_ranks_bytes_beside_the_analytic_model(capsys) -> None:
    """--json: per rank and analytic, every category and the peak in bytes; n_params; the config."""
    code, out, _ = run(capsys, *TINY, "--world", "4", "--batch", "8", "--seq", "32", "--json")
    data = json.loads(out)
    assert code == 0 and all(k in data["per_rank"] and k in data["analytic"] for k in KEYS), sorted(data["per_rank"])
    positions = 32 * 64  # --arch gpt learns as many positions as --seq
    assert data["n_params"] == 132_864 + positions and data["config"]["world"] == 4
    assert data["config"]["strategy"] == "fsdp-zero3"
    assert data["per_rank"]["peak"] == pytest.approx(sum(v for k, v in data["per_rank"].items() if k != "peak"))
    assert [row["device_gb"] for row in data["fits_on"]] == [24, 40, 80, 141]


def test_the_table_names_differences_and_says_where_it_fits(capsys) -> None:
    """Without --json: a row per category with the formula beside it, and the fits-on line with headroom."""
    code, out, _ = run(capsys, *TINY, "--strategy", "ddp", "--world", "2", "--batch", "2", "--seq", "32",
                       "--dtype", "fp32", "--checkpointing")
    assert code == 0 and "measured" in out and "formula" in out, out
    for row in KEYS:
        assert f"\n  {row} " in out, row
    fits = out.splitlines()[-1]
    assert fits.startswith("The measured peak, ") and "fits on: 24 GB yes (" in fits and "GB headroom" in fits and "141 GB" in fits, fits


@pytest.mark.parametrize("argv, words", [
    (["no_such_pkg.models:build"], "no module named 'no_such_pkg.models'"),
    (["tests.fit_examples:nothing"], "has no attribute 'nothing'"),
    (["tests.fit_examples:not_a_model"], "not something to call"),
    (["tests.fit_examples:returns_a_dict"], "returned a dict, not a torch.nn.Module"),
    (["tests.fit_examples:conv_net"], "cannot guess the inputs of Sequential.forward (its first layer is Conv2d"),
    (["tests.fit_examples:Masked"], "cannot guess the inputs of Masked.forward"),
    ([*TINY, "--world", "3", "--batch", "8"], "world 3 does not divide batch 8"),
    ([*TINY, "--world", "2048", "--batch", "2048"], "world 2048 is more than 1024 ranks"),
    (["tests.fit_examples:Float32Only", "--dtype", "bf16", "--world", "1", "--batch", "2"], "cannot run in bf16"),
    ([*TINY, "--strategy", "single", "--world", "2", "--batch", "2"], "strategy single is one device"),
    ([], "name a model"),
])
def test_bad_input_is_one_clear_line(capsys, argv: list[str], words: str) -> None:
    """Exit code 2 and one line naming what is wrong (and, for inputs, how to pass them)."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and words in err, (code, err)
    if "guess" in words:
        assert "--inputs MODULE:FUNCTION" in err, err


def test_a_model_that_downloads_weights_fails_with_its_own_error(capsys) -> None:
    """The factory's own error (a hub download, offline) is shown in one line, exit code 1."""
    code, _, err = run(capsys, "tests.fit_examples:downloads_weights")
    assert code == 1 and "OSError: We couldn't connect to 'https://huggingface.co'" in err, err


def test_an_inputs_function_feeds_a_model_we_cannot_guess(capsys) -> None:
    """--inputs MODULE:FUNCTION (batch, seq) -> inputs: the conv net is measured, its input in the activations."""
    code, out, _ = run(capsys, "tests.fit_examples:conv_net", "--inputs", "tests.fit_examples:images",
                       "--world", "2", "--batch", "4", "--strategy", "ddp", "--dtype", "fp32", "--json")
    data = json.loads(out)
    assert code == 0 and data["config"]["inputs"] == "tests.fit_examples:images"
    assert data["phases"]["after forward"]["activations"] > 0 and data["per_rank"]["temporaries"] >= 2 * 3 * 16 * 16 * 4


def test_guessed_inputs_follow_the_first_layer() -> None:
    """Token ids (batch, seq) for an Embedding first, (batch, in_features) in its dtype for a Linear first."""
    import torch
    from engines.distributed.fit_inputs import guess_inputs
    from engines.distributed.fit_models import gpt
    from tests.fit_examples import mlp
    (tokens,) = guess_inputs(gpt(1, 32, 2, 50, 16), 3, 16, torch.device("cpu"))
    (x,) = guess_inputs(mlp().to(torch.bfloat16), 3, 16, torch.device("cpu"))
    assert tokens.shape == (3, 16) and tokens.dtype == torch.int64 and int(tokens.max()) < 50
    assert x.shape == (3, 32) and x.dtype == torch.bfloat16


def test_the_python_function_takes_a_factory_itself() -> None:
    """from explorer.fit import fit: a callable works as well as an import path; the table reads the same report."""
    from explorer.fit import fit, table
    from tests.fit_examples import mlp
    report = fit(mlp, strategy="fsdp-zero2", world=2, batch=8, seq=1, dtype="fp32")
    assert report["config"]["model"] == "mlp" and report["n_params"] == 32 * 64 + 64 + 64 * 8 + 8
    assert report["per_rank"]["parameters"] == 4 * (32 * 32 + 32 + 4 * 64 + 4), "rank 0's rows of each shard"
    assert "fits on:" in table(report)


def page() -> None:
    from explorer.page.fit_page import render_fit
    render_fit()


def small_page(at: AppTest) -> AppTest:
    for key, value in (("fit:layers", 2), ("fit:hidden", 64), ("fit:heads", 4), ("fit:vocab", 256),
                       ("fit:world", 2), ("fit:batch", 2), ("fit:seq", 16)):
        at.number_input(key=key).set_value(value)
    return at.button(key="fit:measure").click().run()


def test_the_page_shows_the_table_the_fits_line_and_one_line_for_bad_input(monkeypatch) -> None:
    """Measure hands the sidebar's job to the child process (here: measured in-process); the table beside the
    formula and the fits-on line come back; an empty import path gets one line, and the page says what a path runs."""
    from explorer import fit as api
    from explorer.page import fit_page
    asked = []
    monkeypatch.setattr(fit_page, "fit_in_subprocess", lambda job: asked.append(job) or api.fit(
        job["model"], architecture=job["architecture"], inputs=job["inputs"], **job["spec"]))
    at = AppTest.from_function(page, default_timeout=120).run()
    assert not at.exception and "Measure" in at.info[0].value
    assert [b.key for b in at.main.button] == ["fit:measure"] and not at.sidebar.button, \
        "Measure sits in the page under the words that ask for it (at the sidebar's foot it was below the fold)"
    at = small_page(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert asked[0]["architecture"]["layers"] == 2 and asked[0]["spec"]["world"] == 2
    assert "24 GB yes" in " ".join(m.value.replace("\\", "") for m in at.markdown)
    assert at.table[0].value.index.tolist()[-1] == "peak"
    at.radio(key="fit:model").set_value("Import path").run()
    assert "runs that module's code" in " ".join(c.value for c in at.caption)
    at.button(key="fit:measure").click().run()
    assert "import path" in at.error[0].value and len(asked) == 1, at.error[0].value


@pytest.mark.slow
def test_the_page_measures_in_a_child_process_that_imports_torch() -> None:
    """The real path: `python -m engines.distributed.fit_report` in a child, its JSON line read back."""
    at = small_page(AppTest.from_function(page, default_timeout=240).run())
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.table[0].value.index.tolist()[-1] == "peak"
