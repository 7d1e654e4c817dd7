"""What the tray adds to the server: `POST /desktop/clipboard`, so the dashboard window's Copy buttons reach the
system clipboard through the tray process (which keeps serving the copy after the window closes); and
`/desktop/sync/folder`, the dashboard's way to move the log into a synced folder (the tray stops its server,
moves the shards, starts it again: a server cannot move the log under its own writer); and `/desktop/connect`, which
agents are installed on this machine and connected to this Hivenote, and connecting one (server/install.py: the
change shown first, then made when the page posts it back unchanged).

Behind the same guard as every route (Host/Origin checks, the token), and only for requests from this machine:
a browser elsewhere on the LAN has a clipboard of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from hivenote.server.core.errors import HivenoteError
from hivenote.server.install import Machine, Plan, agents, apply, plan
from hivenote.server.responses import error_response
from hivenote.server.settings import is_loopback

if TYPE_CHECKING:
    from .supervisor import Supervisor


class TrayControls(Protocol):
    """What the window may ask of the tray app (desktop/app.py's DesktopApp is the one implementation)."""

    def desktop_state(self) -> dict[str, Any]: ...

    def on_action(self, action: str) -> None: ...

    def connect_target(self) -> tuple[str, str | None, list[str]]:
        """Where agents reach this notebook: the MCP URL, the owner's token (None: auth off), the stdio bridge."""
        ...


CONNECT_PATH = "/desktop/connect"
CLIPBOARD_PATH = "/desktop/clipboard"
FOLDER_PATH = "/desktop/sync/folder"
APP_PATH = "/desktop/app"
# The tray menu's items, for a window that stands in for it (no panel shows the icon): what POST /desktop/app runs.
APP_ACTIONS = frozenset({"toggle-server", "toggle-lan", "toggle-autostart", "open-data-folder", "quit"})
MAX_CHARS = 256 << 10  # a connect snippet or a token is a few hundred characters


def desktop_routes(
    copy: Callable[[str], None], supervisor: Supervisor | None = None, app: TrayControls | None = None
) -> list[BaseRoute]:
    async def clipboard(request: Request) -> Response:
        if request.client is None or not is_loopback(request.client.host):
            return error_response("forbidden", "only a window on this machine can use its clipboard")
        try:
            body = await request.json()
        except ValueError:
            return error_response("invalid_json", 'send JSON like {"text": "..."}')
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text or len(text) > MAX_CHARS:
            return error_response("invalid", f'"text" must be a string of 1 to {MAX_CHARS} characters')
        try:
            await anyio.to_thread.run_sync(copy, text)
        except HivenoteError as exc:
            return error_response("clipboard", str(exc))  # the copy could not be made (desktop/clipboard.py)
        return JSONResponse({"copied": len(text)})

    async def folder(request: Request) -> Response:
        if supervisor is None:
            return error_response("not_found", "moving the log is done by the tray app")
        if request.client is None or not is_loopback(request.client.host):
            return error_response("forbidden", "only this machine's own dashboard may move its log")
        settings = supervisor.settings
        current = {
            "log_dir": str(settings.log_path) if settings else "",
            "synced": bool(settings and settings.log_dir),
            "last_move": supervisor.last_move,
        }
        if request.method == "GET":
            return JSONResponse(current)
        try:
            body = await request.json()
        except ValueError:
            return error_response("invalid_json", 'send JSON like {"path": "/home/me/Sync/hivenote"}')
        path = body.get("path") if isinstance(body, dict) else None
        if path is not None and (not isinstance(path, str) or not path.strip()):
            return error_response("invalid", '"path" must be a folder path, or null to move the log back')
        supervisor.use_folder(path)  # the server answering this stops in a moment: reply first
        return JSONResponse({"moving": path, **current}, status_code=202)

    async def tray_app(request: Request) -> Response:
        if app is None:  # a supervisor without the tray (tests, embedding): nothing to show, nothing to drive
            if request.method == "GET":
                return JSONResponse({"tray": None})
            return error_response("not_found", "this server is not the tray app's")
        if request.client is None or not is_loopback(request.client.host):
            return error_response("forbidden", "only this machine's own dashboard may drive its tray app")
        if getattr(request.state, "person", "") or "":
            return error_response("owner_only", "only the owner's dashboard may drive the tray app")
        if request.method == "GET":
            return JSONResponse(await anyio.to_thread.run_sync(app.desktop_state))
        try:
            body = await request.json()
        except ValueError:
            return error_response("invalid_json", 'send JSON like {"action": "quit"}')
        action = body.get("action") if isinstance(body, dict) else None
        if action not in APP_ACTIONS:
            return error_response("invalid", f'"action" must be one of: {", ".join(sorted(APP_ACTIONS))}')
        await anyio.to_thread.run_sync(app.on_action, str(action))  # a stop or quit ends this server in a moment
        return JSONResponse({"done": action}, status_code=202)

    def owner_here(request: Request) -> Response | None:
        """Connecting writes this account's files: only the owner's own dashboard on this machine may ask."""
        if app is None:
            return error_response("not_found", "connecting an agent for you is done by the tray app")
        if request.client is None or not is_loopback(request.client.host):
            return error_response("forbidden", "only this machine's own dashboard may change its agents' configs")
        if getattr(request.state, "person", "") or "":
            return error_response("owner_only", "only the owner's dashboard may change this machine's configs")
        return None

    def planned(client: str) -> tuple[Plan, Machine]:
        url, token, bridge = app.connect_target()  # type: ignore[union-attr]
        machine = Machine.here()
        return plan(client, machine, url=url, token=token, stdio_command=bridge), machine

    async def connect_agents(request: Request) -> Response:
        if (refused := owner_here(request)) is not None:
            return refused

        def look() -> list[dict[str, Any]]:
            url, _, bridge = app.connect_target()  # type: ignore[union-attr]
            return [a.to_json() for a in agents(Machine.here(), url=url, stdio_command=bridge)]

        return JSONResponse({"agents": await anyio.to_thread.run_sync(look)})

    async def connect_agent(request: Request) -> Response:
        if (refused := owner_here(request)) is not None:
            return refused
        client = request.path_params["client"]
        try:
            found, machine = await anyio.to_thread.run_sync(planned, client)
        except HivenoteError as exc:
            return error_response("not_found", str(exc))
        if request.method == "GET":
            return JSONResponse(found.to_json())
        try:
            body = await request.json()
        except ValueError:
            return error_response("invalid_json", 'send back the plan you were shown: {"diff": ..., "commands": ...}')
        shown = body if isinstance(body, dict) else {}
        if shown.get("diff") != found.diff or shown.get("commands") != list(found.shown):
            return error_response(
                "changed", f"{found.path or found.title} changed since the change was shown: look at it again"
            )
        done = await anyio.to_thread.run_sync(apply, found, machine)
        return JSONResponse(done.to_json())  # ok or not: the outcome and the client's own output, to show

    return [
        Route(CONNECT_PATH, connect_agents, methods=["GET"]),
        Route(CONNECT_PATH + "/{client}", connect_agent, methods=["GET", "POST"]),
        Route(CLIPBOARD_PATH, clipboard, methods=["POST"]),
        Route(FOLDER_PATH, folder, methods=["GET", "POST"]),
        Route(APP_PATH, tray_app, methods=["GET", "POST"]),
    ]
