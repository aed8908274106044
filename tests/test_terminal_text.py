"""The terminal gets plain text: bold dropped, math unwrapped, powers as Unicode superscripts;
`--json` carries the plain text and the markdown; progress off a terminal is its final line only,
and `--quiet` has none."""
import json

import pytest

from explorer.cli.main import main
from explorer.plaintext import raised_powers, terminal_text

TINY = ["run", "vanishing-gradients", "--set", "depth=4", "--set", "width=16", "--set", "steps=12", "--no-store"]


@pytest.mark.parametrize("markdown, plain", [
    ("**sigmoid: it stalled**", "sigmoid: it stalled"),
    ("layer 1's gradient is $10^{-4.0}$ of layer 4's", "layer 1's gradient is 10⁻⁴·⁰ of layer 4's"),
    ("relative error 1.22×10^-16; under Adam", "relative error 1.22×10⁻¹⁶; under Adam"),
    ("below 10^-7. Then", "below 10⁻⁷. Then"),
    ("S = 2^17 after", "S = 2¹⁷ after"),
    ("(1 − lr·λ)^t = 0.914 in ℝ^64", "(1 − lr·λ)ᵗ = 0.914 in ℝ⁶⁴"),
    ("b^(−2i/d)", "b^(−2i/d)"),  # '/' has no superscript: left as written
    ("π* ∝ π_ref·exp(r/β), clip_grad_norm_", "π* ∝ π_ref·exp(r/β), clip_grad_norm_"),
    ("$\\sqrt{d_k}$", "$\\sqrt{d_k}$"),  # a LaTeX command is not guessed at
])
def test_markdown_becomes_plain_terminal_text(markdown: str, plain: str) -> None:
    assert terminal_text(markdown) == plain


@pytest.mark.parametrize("markdown, page", [
    ("**the variance falls as B^-0.974**", "**the variance falls as B⁻⁰·⁹⁷⁴**"),  # bold stays markdown
    ("(1 − lr·λ)^t = 0.914 in ℝ^64", "(1 − lr·λ)ᵗ = 0.914 in ℝ⁶⁴"),
    ("gradient $10^{-4.0}$ and `x^2`, then S = 2^17", "gradient $10^{-4.0}$ and `x^2`, then S = 2¹⁷"),  # math, code kept
])
def test_the_page_raises_the_powers_its_markdown_would_show_as_written(markdown: str, page: str) -> None:
    assert raised_powers(markdown) == page


def test_run_prints_plain_text_and_only_the_final_progress_line_off_a_terminal(capsys) -> None:
    """stdout: no `**` or `$`, the power written 10⁻…; stderr (not a terminal here): one bar line, at 100%."""
    assert main(TINY) == 0
    out, err = capsys.readouterr()
    assert "**" not in out and "$" not in out and "10⁻" in out, out
    bars = [line for line in err.splitlines() if "%" in line]
    assert len(bars) == 1 and bars[0].endswith("100%"), err


def test_json_gives_plain_and_markdown_and_quiet_prints_nothing_on_stderr(capsys) -> None:
    assert main([*TINY, "--json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "", err
    explanation = json.loads(out)["explanation"]
    assert "10⁻" in explanation["takeaway"] and "$" not in explanation["takeaway"], explanation["takeaway"]
    assert "$10^{" in explanation["takeaway_markdown"], explanation["takeaway_markdown"]
    assert explanation["markdown"].startswith("**") and len(explanation["details"]) == len(explanation["details_markdown"])


def test_settings_help_is_plain_in_the_terminal_and_both_ways_in_json(capsys) -> None:
    """`ρ^T` in a setting's help: `ρᵀ` in `list SCENARIO`; `--json` keeps the markdown beside the plain text."""
    assert main(["list", "batch-size-clipping"]) == 0
    assert "ρᵀ" in capsys.readouterr().out
    assert main(["list", "batch-size-clipping", "--json"]) == 0
    seq_len = json.loads(capsys.readouterr().out)["settings"]["seq_len"]
    assert "ρᵀ" in seq_len["description"] and "ρ^T" in seq_len["description_markdown"], seq_len
