"""Serving the explorer's files: read once at start from the package's ``static`` directory
into a table of name -> (body, type, ETag), so a request can only ever get one of those
files (a name not in the table is a 404: no path is joined, so none can climb out), each
with its content type, a strict Content-Security-Policy and revalidation headers."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

PREFIX = "/explorer"
STATIC = Path(__file__).resolve().parent / "static"
# Only these kinds of file are served; anything else in the directory is not.
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The page runs only its own files: no inline script or style, no other origin, no frames.
# connect-src names ws:/wss: besides 'self' because browsers before CSP 3 do not count a
# websocket to the page's own host as 'self', and the page follows /v1/chain/stream.
CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self' ws: wss:",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# No build step fingerprints the file names, so a browser must ask again each time (a 304
# when nothing changed) or it would keep an old page after the node is upgraded.
CACHE_CONTROL = "no-cache"


@dataclass(frozen=True, slots=True)
class File:
    body: bytes
    content_type: str
    etag: str


class StaticFiles:
    """The files under ``root`` whose suffix is in TYPES, by their path relative to it
    ('' is ``index.html``)."""

    def __init__(self, root: Path = STATIC) -> None:
        self.files: dict[str, File] = {}
        for path in sorted(root.rglob("*")):
            kind = TYPES.get(path.suffix)
            if kind is None or not path.is_file() or path.is_symlink():
                continue
            body = path.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            self.files[path.relative_to(root).as_posix()] = File(body, kind, etag)
        self.files[""] = self.files["index.html"]

    async def get(self, request: web.Request) -> web.StreamResponse:
        found = self.files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        headers = SECURITY_HEADERS | {"Cache-Control": CACHE_CONTROL, "ETag": found.etag}
        if found.etag in request.headers.get("If-None-Match", ""):
            return web.Response(status=304, headers=headers)
        return web.Response(body=found.body, headers=headers | {"Content-Type": found.content_type})


async def _to_directory(request: web.Request) -> web.StreamResponse:
    """/explorer goes to /explorer/, so that the page's relative links resolve under it."""
    raise web.HTTPPermanentRedirect(PREFIX + "/")


def mount(app: web.Application, files: StaticFiles | None = None) -> None:
    """Serve the explorer under PREFIX on ``app``."""
    files = files or StaticFiles()
    app.router.add_get(PREFIX, _to_directory)
    app.router.add_get(PREFIX + "/{name:.*}", files.get)
