"""Serving the web app: ``/`` is the page, ``/ui/<build>/...`` its assets.

Every asset is read and gzipped once, on the first request, and kept in memory (about 60 KB
compressed). The build id is a hash of all the files, so an asset's URL changes whenever any file
changes: assets are cached for a year as immutable, and only the small page is revalidated. The
page carries a strict Content-Security-Policy: scripts, styles and connections from this origin
only, nothing inline, no framing.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Literal

from aiohttp import web

from protocol.http.page_security import content_security_policy, security_headers

__all__ = [
    "ASSET_PREFIX",
    "CONTENT_SECURITY_POLICY",
    "PAGE_PATHS",
    "Asset",
    "WebUi",
    "install_webui",
]

ASSET_PREFIX = "/ui/"
PAGE_PATHS = frozenset({"/"})
"""With ASSET_PREFIX, what the services leave out of rate limiting: static, cheap, immutable."""
CONTENT_SECURITY_POLICY = content_security_policy()
_SECURITY_HEADERS = security_headers(CONTENT_SECURITY_POLICY)
_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
_IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Asset:
    """One file, as sent plain and gzipped."""

    body: bytes
    gzipped: bytes
    content_type: str
    etag: str


def _asset(name: str, body: bytes) -> Asset:
    suffix = name[name.rfind(".") :]
    content_type = _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    digest = hashlib.sha256(body).hexdigest()[:20]
    return Asset(body, gzip.compress(body, 9, mtime=0), content_type, f'"{digest}"')


def _walk(folder: Traversable, prefix: str = "") -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            files.update(_walk(entry, name + "/"))
        elif not entry.name.startswith("."):
            files[name] = entry.read_bytes()
    return files


class WebUi:
    """The app's files in memory, loaded once."""

    def __init__(self, files: dict[str, bytes], service: str = "agent") -> None:
        page = files.pop("index.html")
        self.build = hashlib.sha256(
            b"".join(name.encode() + body for name, body in sorted(files.items()))
        ).hexdigest()[:12]
        self.assets = {name: _asset(name, body) for name, body in files.items()}
        rendered = page.replace(b"{{ASSETS}}", f"{ASSET_PREFIX}{self.build}/".encode()).replace(
            b"{{SERVICE}}", service.encode()
        )
        self.page = _asset("index.html", rendered)

    @classmethod
    def load(cls, service: str = "agent") -> WebUi:
        """Read the shipped files; ``service`` ("agent" or "cloud") tells the app where it runs."""
        return cls(_walk(resources.files("webui").joinpath("static")), service)

    def total_gzipped(self) -> int:
        """What a first visit transfers at most: every file, gzipped."""
        return len(self.page.gzipped) + sum(len(a.gzipped) for a in self.assets.values())


def _send(request: web.Request, asset: Asset, cache: str) -> web.StreamResponse:
    headers = {"Cache-Control": cache, "ETag": asset.etag, "Vary": "Accept-Encoding"}
    if request.headers.get("If-None-Match") == asset.etag:
        return web.Response(status=304, headers=headers)
    body = asset.body
    if "gzip" in request.headers.get("Accept-Encoding", "") and len(asset.gzipped) < len(body):
        body = asset.gzipped
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers, content_type=asset.content_type)


def install_webui(app: web.Application, service: Literal["agent", "cloud"]) -> None:
    """Serve the web app at ``/`` and its assets under ``/ui/``."""
    loaded: list[WebUi] = []

    def ui() -> WebUi:
        if not loaded:
            loaded.append(WebUi.load(service))
        return loaded[0]

    async def page(request: web.Request) -> web.StreamResponse:
        response = _send(request, ui().page, "no-cache")
        response.headers.update(_SECURITY_HEADERS)
        return response

    async def file(request: web.Request) -> web.StreamResponse:
        current = ui()
        asset = current.assets.get(request.match_info["path"])
        if asset is None:
            raise web.HTTPNotFound()
        fresh = request.match_info["build"] == current.build
        response = _send(request, asset, _IMMUTABLE if fresh else "no-cache")
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    app.router.add_get("/", page)
    app.router.add_get(ASSET_PREFIX + "{build}/{path:.+}", file)
