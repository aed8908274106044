"""plotly.js for the app's charts: the file the Python plotly package ships (the exports' HTML
uses the same), served as it is by a static-file route of the server, under a URL that names
plotly's version, so a browser fetches it once and caches it for good."""
import os

import plotly
from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import Route

PLOTLY_JS = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
PATH = f"/_explorer/plotly-{plotly.__version__}.min.js"  # a new plotly is a new URL
CACHED_FOR_GOOD = "public, max-age=31536000, immutable"


def url() -> str:
    """Where the browser fetches plotly.js: the route below, under the server's base path."""
    import streamlit as st
    base = st.get_option("server.baseUrlPath").strip("/")
    return "/" + (base + "/" if base else "") + PATH.lstrip("/")


def _plotly_js(request: Request) -> FileResponse:
    return FileResponse(PLOTLY_JS, media_type="text/javascript", headers={"cache-control": CACHED_FOR_GOOD})


def routes() -> list[Route]:
    """The server's route for plotly.js."""
    return [Route(PATH, _plotly_js, methods=["GET", "HEAD"])]
