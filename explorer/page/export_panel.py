"""The Export panel: downloads of what the page shows, prepared on demand.

PNG and SVG go through kaleido, which starts Chromium (seconds), so nothing is rendered
until the person presses "Prepare downloads"; the files are then kept in the session for
this view (run, overlays, band) and handed to each download button lazily.
"""
import streamlit as st

from explorer.exports.bundle import FIGURE_FORMATS, MIME, bundle_files, cli_command, figure_pieces, stem, zip_bytes
from explorer.exports.files import standalone_html
from explorer.plaintext import plain
from explorer.runs.handle import RunHandle
from explorer.view.compare import Overlay
from explorer.view.content import build_view, title_of
from explorer.view.seeds import SeedGroup
from scenarios.base import Scenario


def _signature(handle: RunHandle | SeedGroup, overlays: list[Overlay], band: str) -> tuple:
    runs = handle.snapshots() if isinstance(handle, SeedGroup) else [handle.snapshot()]
    return (id(handle), tuple(s.run_id for s in runs), tuple(o.run_id for o in overlays),
            band if isinstance(handle, SeedGroup) else None)


def commands(scenario: Scenario, handle: RunHandle | SeedGroup, overlays: list[Overlay]) -> list[tuple[str, str]]:
    config = handle.config.model_dump(mode="json")
    out = stem(scenario, config)
    if not scenario.listed:  # a watched run: trained by a person's own script, so only read again
        return [(f"run {handle.snapshot(with_frame=False).run_id}'s diagnosis",
                 f"python -m explorer show {handle.snapshot(with_frame=False).run_id}")] + [
            (f"overlaid run {o.run_id} ({o.label})", f"python -m explorer show {o.run_id}") for o in overlays]
    if isinstance(handle, SeedGroup):
        lines = [(f"seed {seed}", cli_command(scenario, {**config, "seed": seed}, out=f"{out}-seed{seed}"))
                 for seed in handle.seeds]
    else:
        lines = [("this run", cli_command(scenario, config, out=out))]
    return lines + [(f"overlaid run {o.run_id} ({o.label})", cli_command(scenario, o.config)) for o in overlays]


def prepare(scenario: Scenario, handle: RunHandle | SeedGroup, overlays: list[Overlay], band: str) -> dict:
    config = handle.config.model_dump(mode="json")
    view = build_view(scenario, handle, overlays, band)
    problem = None
    try:
        files = bundle_files(scenario, config, view, commands(scenario, handle, overlays))
    except Exception as error:  # no Chromium for kaleido: keep the rest downloadable
        problem = f"PNG and SVG could not be rendered ({type(error).__name__}: {error}); the rest is ready."
        files = bundle_files(scenario, config, view, commands(scenario, handle, overlays), formats=("html",))
    return {"files": files, "zip": zip_bytes(files, stem(scenario, config)), "stem": stem(scenario, config),
            "figures": list(view.figures), "titles": {name: title_of(view.figures[name], name) for name in view.figures},
            "problem": problem}


def export_panel(scenario: Scenario, handle: RunHandle | SeedGroup, overlays: list[Overlay], band: str) -> None:
    key = f"exports:{scenario.id}"
    signature = _signature(handle, overlays, band)
    prepared = st.session_state.get(key)
    if prepared is not None and prepared["signature"] != signature:
        prepared = None
    with st.expander("Export", expanded=prepared is not None):
        st.caption("Each figure as PNG, SVG and standalone HTML (plotly.js inside: opens offline), the metrics as "
                   "CSV, the config as JSON, and one zip with all of it plus a README with the command that "
                   "reproduces the run (its HTML figures share one plotly.js file beside them). What is exported "
                   "is what the page shows, overlays and bands included.")
        if prepared is None:
            if st.button("Prepare downloads", key=f"prepare:{scenario.id}"):
                with st.spinner("Rendering every figure as PNG and SVG (Chromium starts once; a few seconds)…"):
                    prepared = {**prepare(scenario, handle, overlays, band), "signature": signature}
                st.session_state[key] = prepared
                st.rerun()  # redraw without the button, with the downloads
        if prepared is not None:
            download_buttons(scenario, prepared)


def download_buttons(scenario: Scenario, prepared: dict) -> None:
    files, name = prepared["files"], prepared["stem"]
    if prepared["problem"]:
        st.warning(plain(prepared["problem"]))
    st.download_button("Download everything (.zip)", data=_lazy(prepared["zip"]), file_name=f"{name}.zip",
                       mime=MIME["zip"], type="primary", on_click="ignore", key=f"dl:{scenario.id}:zip",
                       icon=":material/folder_zip:")
    for figure, piece in figure_pieces(prepared["figures"]).items():
        row = st.container(horizontal=True, vertical_alignment="center")
        row.markdown(plain(prepared["titles"][figure]))  # the chart's title, as on the page
        for fmt in FIGURE_FORMATS:
            file = f"{name}-{piece}.{fmt}"
            if file in files:
                data = _standalone(files[file]) if fmt == "html" else _lazy(files[file])
                row.download_button(fmt.upper(), data=data, file_name=file, mime=MIME[fmt],
                                    on_click="ignore", key=f"dl:{scenario.id}:{file}")
    row = st.container(horizontal=True)
    for suffix, label in (("metrics.csv", "Metrics (CSV)"), ("config.json", "Config (JSON)")):
        file = f"{name}-{suffix}"
        row.download_button(label, data=_lazy(files[file]), file_name=file, mime=MIME[suffix.rsplit('.', 1)[1]],
                            on_click="ignore", key=f"dl:{scenario.id}:{file}")


def _lazy(data: bytes):
    return lambda: data  # sent only when the button is pressed, not on every rerun


def _standalone(html: bytes):
    return lambda: standalone_html(html)  # one figure alone: plotly.js back inside, made on the press
