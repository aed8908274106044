"""Canaries for what we lean on beyond a library's documented API, so that an upgrade fails here, by
name, rather than quietly elsewhere: plotly's path parser (scenarios/plotly_paths.py), torch's
`torch.ao.quantization` observers (engines/numerics/quantization.py) and `torch._foreach_norm`
(engines/loop/probes.py); and the hand-written code the library swaps replaced stays gone."""
import asyncio
import concurrent.futures
import re
from pathlib import Path

import plotly
import plotly.basedatatypes as basedatatypes
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def test_plotlys_path_parser_is_there_and_answers_as_we_cache_it() -> None:
    """`basedatatypes._str_to_dict_path_full(str) -> (tuple of parts, list of positions)`, a pure function."""
    parse = getattr(basedatatypes._str_to_dict_path_full, "original", basedatatypes._str_to_dict_path_full)
    path, positions = parse("xaxis2.title.text")
    assert path == ("xaxis2", "title", "text") and isinstance(positions, list), (plotly.__version__, path, positions)
    assert parse("title_text")[0] == ("title", "text"), f"plotly {plotly.__version__}"
    assert parse("xaxis2.title.text") == parse("xaxis2.title.text") and parse("a")[1] is not parse("a")[1]


@pytest.mark.parametrize("name", ["MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
                                  "MovingAveragePerChannelMinMaxObserver"])
def test_torch_ao_observers_are_there_and_pick_the_textbook_scale(name: str) -> None:
    """Affine: Δ = (max − min)/(q_max − q_min); symmetric: Δ = max|x|/((q_max − q_min)/2), as the page teaches."""
    import torch.ao.quantization as ao
    observer_class = getattr(ao, name)
    per_channel = "PerChannel" in name
    x = torch.tensor([[-1.5, 0.25, 2.5], [-0.5, 0.0, 1.0]])
    for symmetric, q_min, q_max in ((False, 0, 15), (True, -8, 7)):
        qscheme = {(False, False): torch.per_tensor_affine, (False, True): torch.per_tensor_symmetric,
                   (True, False): torch.per_channel_affine, (True, True): torch.per_channel_symmetric}[per_channel, symmetric]
        kwargs = {"ch_axis": 0} if per_channel else {}
        observer = observer_class(qscheme=qscheme, dtype=torch.qint8 if symmetric else torch.quint8,
                                  quant_min=q_min, quant_max=q_max, **kwargs)
        observer(x)
        scale, _ = observer.calculate_qparams()
        rows = x if per_channel else x.reshape(1, -1)
        low, high = rows.min(1).values.clamp(max=0), rows.max(1).values.clamp(min=0)
        textbook = torch.maximum(-low, high) / ((q_max - q_min) / 2) if symmetric else (high - low) / (q_max - q_min)
        assert torch.allclose(scale, textbook, rtol=1e-6), f"{name} symmetric={symmetric}: {scale} vs {textbook}"


def test_foreach_norm_gives_each_tensors_norm_in_the_dtype_asked() -> None:
    """engines/loop/probes.py: every probed layer's norm in one fused call, summed in float64."""
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.randn(shape, generator=generator) for shape in ((4, 3), (7,), (2, 2, 2))]
    norms = torch._foreach_norm(tensors, 2, dtype=torch.float64)
    for tensor, norm in zip(tensors, norms):
        assert norm.dtype == torch.float64 and torch.equal(norm, torch.linalg.vector_norm(tensor, dtype=torch.float64))


def test_the_swapped_hand_written_code_stays_gone() -> None:
    """No deprecated `use_container_width`, no component declared only to serve plotly.js, no global
    gradient norm on `_foreach_norm` where torch.nn.utils.get_total_norm does it, no Host parsing by hand."""
    sources = {p: p.read_text() for folder in ("explorer", "engines") for p in (ROOT / folder).rglob("*.py")}
    found = {str(p.relative_to(ROOT)): word for p, text in sources.items()
             for word in ("use_container_width", "declare_component") if re.search(rf"\b{word}\b", text)}
    if "TrustedHostMiddleware" not in (ROOT / "explorer/page/hosts.py").read_text():
        found["explorer/page/hosts.py"] = "a Host check by hand"
    for name in ("engines/sequence/transformer.py", "engines/supervised/distill.py"):
        if "vector_norm(torch.stack(torch._foreach_norm" in (ROOT / name).read_text():
            found[name] = "a global norm by hand"
    assert not found, found


def test_plotly_js_is_served_from_the_package_with_a_long_cache() -> None:
    """The static route answers the plotly package's own plotly.min.js, cached for good (its URL names the version)."""
    from starlette.applications import Starlette

    from explorer.view import plotly_js
    sent: list[dict] = []

    async def call() -> None:
        requested, done = [], asyncio.Event()

        async def receive():  # the request once; then, as a browser would, nothing until it has the answer
            if not requested:
                requested.append(True)
                return {"type": "http.request", "body": b"", "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()
        scope = {"type": "http", "method": "GET", "path": plotly_js.PATH, "headers": [], "query_string": b"",
                 "root_path": "", "scheme": "http", "server": ("localhost", 80), "http_version": "1.1"}
        await Starlette(routes=plotly_js.routes())(scope, receive, send)

    with concurrent.futures.ThreadPoolExecutor(1) as thread:  # an event loop of its own
        thread.submit(asyncio.run, call()).result()
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    headers = dict(start["headers"])
    assert start["status"] == 200 and plotly.__version__ in plotly_js.PATH, start
    assert headers[b"cache-control"] == plotly_js.CACHED_FOR_GOOD.encode() and body == Path(plotly_js.PLOTLY_JS).read_bytes()
