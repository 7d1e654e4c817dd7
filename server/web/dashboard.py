"""The dashboard's routes: `/` (the page) and `/ui/...` (its static assets, shipped as package data in
server/dashboard/), each answered with a strict Content-Security-Policy and the other browser hardening headers.
The dashboard itself only talks to /api; nothing here reads the store.

The page names its files under `/ui/@{build}/`, where the build is a digest of every file: those addresses are
cached for good (a return visit asks the server for nothing but the page and its data), and a new version of any file
is a new build, so a browser never runs a stale mix of old and new modules. `/ui/{path}` serves the same files,
revalidated on every use."""

from __future__ import annotations

import hashlib
import json
import mimetypes
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from .. import __version__
from ..agents import AGENT_NAMES
from ..responses import error_response

ASSET_PREFIX = "/ui/"
BUILD_MARK = "@"  # /ui/@{build}/{path}: a path's first segment starting with it names the build
FOR_GOOD = "max-age=31536000, immutable"  # a year, and never revalidated: the build in the address changes instead
GENERATED = frozenset({"js/agent-names.js"})  # dashboard modules the server makes at start (not files)
# No inline script or style anywhere, nothing from another origin, and no framing (clickjacking).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".md": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _asset(body: bytes, media_type: str) -> Asset:
    return Asset(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')


def _media_type(name: str) -> str:
    suffix = name[name.rfind(".") :] if "." in name else ""
    return _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _walk(folder: Traversable, prefix: str = "") -> dict[str, Asset]:
    found: dict[str, Asset] = {}
    for item in folder.iterdir():
        name = prefix + item.name
        if item.is_dir():
            found |= _walk(item, name + "/")
        elif not item.name.endswith((".py", ".pyc")):
            found[name] = _asset(item.read_bytes(), _media_type(name))
    return found


def load_assets() -> dict[str, Asset]:
    """Every file of the dashboard, read once (a few hundred kB): served from memory, which also works from a
    zipped install where the package folder is not a real directory."""
    folder = files("hivenote.server") / "dashboard"
    return _walk(folder) if folder.is_dir() else {}


def agent_names_module() -> Asset:
    """`js/agent-names.js`, made from agents.py's table at start: the dashboard names agents exactly as the CLI,
    the MCP answers and the tray do, with no copy of the table to drift."""
    names = json.dumps(AGENT_NAMES, ensure_ascii=False, indent=2, sort_keys=True)
    body = f"// Made by the server from hivenote/server/agents.py (PRODUCTS).\nexport const AGENT_NAMES = {names};\n"
    return _asset(body.encode(), _TYPES[".js"])


def build_of(table: dict[str, Asset]) -> str:
    """A digest of every file's name and bytes: the `{build}` of the page's asset addresses."""
    digest = hashlib.sha256()
    for name in sorted(table):
        digest.update(f"{name}\0{table[name].etag}\0".encode())
    return digest.hexdigest()[:16]


def _answer(request: Request, asset: Asset, cache: str = "no-cache") -> Response:
    # `no-cache` is "revalidate first": an unchanged file costs a 304.
    headers = {**SECURITY_HEADERS, "Cache-Control": cache, "ETag": asset.etag}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def _missing(message: str) -> Response:
    response = error_response("not_found", message)
    response.headers.update(SECURITY_HEADERS)
    return response


def built(assets: dict[str, Asset]) -> tuple[dict[str, Asset], str]:
    """The files as served, and their build: the generated module added, and the page filled in with the version it
    sends in X-Hivenote-Client and its files' addresses by build (its ETag of those bytes, so a browser holding an
    older version's page is never told it is current)."""
    (generated,) = GENERATED
    table = {**assets, generated: agent_names_module()}
    build = build_of(table)
    if "index.html" in table:
        body = table["index.html"].body.replace(b"__HIVENOTE_VERSION__", __version__.encode())
        body = body.replace(f'"{ASSET_PREFIX}'.encode(), f'"{ASSET_PREFIX}{BUILD_MARK}{build}/'.encode())
        table["index.html"] = _asset(body, table["index.html"].media_type)
    return table, build


def web_routes(assets: dict[str, Asset] | None = None) -> list[BaseRoute]:
    """`/` and `/ui/{path}`; register them after every other route (they claim no path under /api, /mcp, /sync)."""
    table, build = built(load_assets() if assets is None else assets)

    async def page(request: Request) -> Response:
        if "index.html" not in table:  # a broken install: say so, and keep /api and /mcp working
            text = "The dashboard's files are missing from this install (hivenote/server/dashboard/): reinstall."
            return Response(text, status_code=503, media_type="text/plain", headers=SECURITY_HEADERS)
        return _answer(request, table["index.html"])

    async def asset(request: Request) -> Response:
        path: str = request.path_params["path"]
        cache = "no-cache"
        if path.startswith(BUILD_MARK):
            named, _, path = path.partition("/")
            if named[len(BUILD_MARK) :] != build:
                return _missing("This dashboard file is from another version of Hivenote: reload the page.")
            cache = FOR_GOOD
        found = table.get(path)
        if found is None:
            return _missing("No such dashboard file.")
        return _answer(request, found, cache)

    return [
        Route("/", page, methods=["GET"], name="dashboard"),
        Route(ASSET_PREFIX + "{path:path}", asset, methods=["GET"], name="dashboard_asset"),
    ]
