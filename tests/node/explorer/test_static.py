"""The explorer's static route serves the shipped files, and only them, with their content
types, a strict Content-Security-Policy and revalidation headers; a path that climbs out of
the directory or names a file of another kind is a 404."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from node.explorer import StaticFiles, mount
from node.explorer.static import CSP, STATIC

Check = Callable[[TestClient[web.Request, web.Application]], Awaitable[None]]


def _serve(check: Check, files: StaticFiles | None = None) -> None:
    async def main() -> None:
        app = web.Application()
        mount(app, files)
        async with TestClient(TestServer(app)) as client:
            await check(client)

    asyncio.run(main())


def test_the_page_and_its_modules_come_with_their_types_and_a_strict_policy() -> None:
    """/explorer/ is index.html, each module a text/javascript file, each with the CSP,
    nosniff and an ETag to revalidate; a matching If-None-Match is a 304 without a body."""

    async def check(client: TestClient[web.Request, web.Application]) -> None:
        page = await client.get("/explorer/")
        assert page.status == 200
        assert page.headers["Content-Type"] == "text/html; charset=utf-8"
        assert page.headers["Content-Security-Policy"] == CSP
        assert page.headers["X-Content-Type-Options"] == "nosniff"
        assert page.headers["Cache-Control"] == "no-cache"
        assert (await page.read()) == (STATIC / "index.html").read_bytes()
        script = await client.get("/explorer/js/main.js")
        assert script.headers["Content-Type"] == "text/javascript; charset=utf-8"
        style = await client.get("/explorer/explorer.css")
        assert style.headers["Content-Type"] == "text/css; charset=utf-8"
        again = await client.get("/explorer/", headers={"If-None-Match": page.headers["ETag"]})
        assert again.status == 304 and (await again.read()) == b""
        bare = await client.get("/explorer", allow_redirects=False)
        assert (bare.status, bare.headers["Location"]) == (308, "/explorer/")

    _serve(check)


def test_the_policy_allows_only_the_pages_own_files_and_connections() -> None:
    """No inline script, no other origin for script, style or frames: what the page runs
    is what the node shipped."""
    rules = dict(rule.split(" ", 1) for rule in CSP.split("; "))
    assert rules["default-src"] == "'none'"
    assert rules["script-src"] == rules["style-src"] == "'self'"
    assert rules["frame-ancestors"] == "'none'"
    assert "unsafe" not in CSP


def test_paths_out_of_the_directory_and_other_kinds_of_file_are_refused(tmp_path: Path) -> None:
    """Dot-dot segments, encoded or not, absolute paths and files of a kind not served
    (a .py beside the page, a secret one level up) answer 404, never the file."""
    root = tmp_path / "static"
    (root / "js").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>x</title>")
    (root / "js" / "a.js").write_text("export const a = 1;")
    (root / "server.py").write_text("SECRET = 1")
    (tmp_path / "secret.css").write_text("secret")
    files = StaticFiles(root)
    assert sorted(files.files) == ["", "index.html", "js/a.js"]

    async def check(client: TestClient[web.Request, web.Application]) -> None:
        for path in (
            "/explorer/server.py",
            "/explorer/../secret.css",
            "/explorer/%2e%2e/secret.css",
            "/explorer/js/..%2f..%2fsecret.css",
            "/explorer/js/../../secret.css",
            "/explorer//etc/passwd",
            "/explorer/" + str(tmp_path / "secret.css"),
            "/explorer/nothing.js",
        ):
            answer = await client.get(path)
            assert answer.status == 404, path
            assert b"secret" not in await answer.read(), path
        assert (await client.get("/explorer/js/a.js")).status == 200

    _serve(check, files)


def test_every_shipped_file_is_package_data() -> None:
    """The files served are the ones pyproject ships: a new kind of file under static/
    would be served from a checkout but missing from an installed node."""
    import tomllib

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["node"]
    node_dir = STATIC.parents[1]
    shipped = {p for pattern in patterns for p in node_dir.glob(pattern)}
    served = {STATIC / name for name in StaticFiles().files if name}
    assert served and served <= shipped
