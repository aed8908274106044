"""DDP vs FSDP memory, drawn: what the charts' titles say and how lines that coincide stay visible (no ranks
launched: the figures are built from small hand-made summaries or the registry's tiny run)."""
import pandas as pd

from scenarios import get_scenario
from scenarios.ddp_fsdp_memory.figures import phases_figure, vs_world_figure, what_if_figure
from scenarios.ddp_fsdp_memory.sharding_figures import precision_figure
from scenarios.ddp_fsdp_memory.summary import summary
from scenarios.records import Records
from tests.tiny_runs import tiny_frame

SCENARIO = get_scenario("ddp-fsdp-memory")


def test_the_what_if_title_names_the_precision_and_coinciding_lines_each_show() -> None:
    """"What if: 70B parameters, mixed" read as mixed what: the title spells out the precision and its bytes. DDP
    holds the same on every N and its N=1 line hid under N=2's: the largest N solid and wide beneath, smaller N
    dashed on top; FSDP's measured model state equals ZeRO's, so the model is grey rings, not a same-colour dash."""
    title = str(what_if_figure(SCENARIO.validate({}), {}).layout.title.text)
    assert "mixed precision: bf16 weights and grads, fp32 Adam (2 + 2 + 12 bytes per parameter)" in title, title
    arms = {f"{s} · N={n}": {"strategy": s, "world_size": n, "measured_state_bytes": 1e6 / (n if s != "ddp" else 1),
                             "estimated_state_bytes": 1e6 / (n if s != "ddp" else 1)}
            for n in (1, 2) for s in ("ddp", "fsdp-zero3", "fsdp-zero2")}
    empty = Records(pd.DataFrame(columns=["arm", "step", "metric", "value"]))
    lines = {trace.name: trace.line for trace in phases_figure(empty, {"arms": arms}, {}).data}
    assert lines["ddp · N=2"].width > lines["ddp · N=1"].width and lines["ddp · N=1"].dash != "solid", lines
    traces = vs_world_figure({"arms": arms}, {}).data
    widths = [trace.line.width for trace in traces if trace.name.endswith("measured")]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3, widths
    assert all(trace.mode == "markers" for trace in traces if "model" in trace.name), [t.mode for t in traces]


def test_the_bytes_per_value_title_says_when_every_bar_is_alike() -> None:
    """At the default strategies every bar is 4 (fp32 throughout): the title says so and where a 2 would come from."""
    records = Records(tiny_frame("ddp-fsdp-memory"))
    title = str(precision_figure(records, summary(records)).layout.title.text)
    assert "(all 4 here: strategies with fsdp-zero3-bf16 add an arm computing in bf16)" in title, title
