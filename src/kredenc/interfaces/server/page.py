"""The web page: ``/`` (index.html) and its assets under ``/static/``, for people.

The page is plain files in ``web/`` (HTML, CSS, ES modules; no build step, no CDN):
they are read once at mount and served from memory, so a request can never name a
path outside that set (no file-system lookup happens per request). They are open
paths (the app's ``OPEN_PATHS``): the page holds no data; every call it makes goes to
the REST routes with the API key the person typed in.

Every response carries a Content-Security-Policy that allows scripts, styles, images
and connections from the page's own origin only and no inline script or style, so
text filed by anyone (memories and documents are hostile input) cannot run even if a
bug rendered it as markup; the page itself only ever writes data with ``textContent``.
The assets have no hashed names, so they are revalidated on each load (``no-cache``
with an ``ETag``: a 304 costs one round trip, and an upgraded server is never shown
with a stale script).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from kredenc.interfaces.guard import error_response
from kredenc.interfaces.server.state import ServerState

#: What the page may load and call: its own origin only; no inline script or style,
#: no plugins, no framing, no <base> rewrite, forms post nowhere else.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; manifest-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

#: The headers of every page response besides its type and ETag.
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str

    def response(self, request: Request) -> Response:
        headers = {**HEADERS, "ETag": self.etag}
        if self.etag in _etags(request.headers.get("if-none-match", "")):
            return Response(status_code=304, headers=headers)
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(self.body))
            return Response(status_code=200, headers=headers, media_type=self.media_type)
        return Response(self.body, headers=headers, media_type=self.media_type)


def _etags(header: str) -> set[str]:
    return {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}


def load_assets() -> dict[str, Asset]:
    """Every file of ``web/`` by name (flat: the page has no sub-folders)."""
    folder = resources.files(__package__ or "kredenc.interfaces.server").joinpath("web")
    assets: dict[str, Asset] = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rpartition(".")[2]
        if not item.is_file() or suffix not in TYPES:
            continue
        body = item.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        assets[item.name] = Asset(body, TYPES[suffix], etag)
    return assets


def mount(app: FastAPI, state: ServerState) -> Any:
    """Serve index.html at ``/`` and the assets under ``/static/`` (not in the
    OpenAPI document: they are not API). Nothing to run for the server's life."""
    del state  # the page holds no data: every call it makes goes through the API
    assets = load_assets()
    index = assets["index.html"]

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page(request: Request) -> Response:
        return index.response(request)

    @app.api_route("/favicon.ico", methods=["GET", "HEAD"], include_in_schema=False)
    async def favicon(request: Request) -> Response:
        return assets["favicon.svg"].response(request)

    @app.api_route("/static/{name}", methods=["GET", "HEAD"], include_in_schema=False)
    async def static(name: str, request: Request) -> Response:
        found = assets.get(name)
        if found is None or name == "index.html":
            return error_response(
                404,
                "not_found",
                f"the page has no file {name[:100]!r}",
                "open the page at / ; its files are linked from there",
            )
        return found.response(request)

    return None
