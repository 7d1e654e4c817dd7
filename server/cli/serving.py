"""CLI commands for the server side: `serve` (the headless server), `stop`, `open` (the dashboard in a browser),
`token` (who may connect), `connect` (snippets for agents' configs) and `stdio` (the bridge for stdio-only
clients)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .. import __version__
from ..core.errors import HivenoteError, InvalidInput
from ..core.hlc import wall_ms
from ..render import ago
from ..settings import load_settings
from ..storage.layout import Layout
from ..storage.serverfile import running_server
from ..storage.store import Store, lock_holder

if TYPE_CHECKING:
    from .context import Context


def cmd_serve(ctx: Context) -> int:
    from ..heap import tune_heap
    from ..logs import configure_logging, report_crashes
    from ..stop_signals import on_stop_signal
    from ..web.app import create_app  # the server's dependencies load only for the commands that need them
    from ..web.serve import ServerThread, bind, run_until_stopped

    tune_heap()  # before any thread starts (heap.py says why)
    configure_logging()  # before the MCP SDK's server sets it its way (logs.py says why)
    report_crashes()
    a = ctx.args
    settings = load_settings(
        {"host": a.host, "port": a.port, "auth": False if a.no_auth else None}, data_dir=ctx.data_dir
    )
    if not settings.auth:
        ctx.err.write(
            "WARNING: --no-auth: any program on this machine can read and change the notebook without a token.\n"
        )
    sock = bind(settings.host, settings.port)
    with Store(settings.data_dir, log_dir=settings.log_path) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        stop = threading.Event()
        undo = on_stop_signal(stop.set)  # SIGTERM and Ctrl-C (stop_signals.py says why not a handler of our own)
        try:
            server.start()
            while not server.started and server.thread.is_alive():
                server.thread.join(0.05)
            if not server.started:
                raise HivenoteError(f"the server did not start: {server.error}")
            url = f"http://{settings.base_url.removeprefix('http://')}"
            ctx.out.write(f"Hivenote {__version__} serving {settings.data_dir} on {url}\n")
            ctx.out.write(f"  MCP (notebook): {url}/mcp\n  MCP (memory graph): {url}/mcp/graph\n")
            ctx.out.write("  `hivenote connect <client>` prints a ready config. Ctrl-C stops.\n")
            ctx.out.flush()
            run_until_stopped(server, stop)  # raises when the server ends by itself: a non-zero exit
        finally:
            undo()
            server.stop()
    return 0


STOP_WAIT_S = 30.0


def cmd_stop(ctx: Context) -> int:
    """Stop whichever Hivenote server holds this data dir: the tray's, `hivenote serve`, or one `hivenote stdio`
    started in the background (nothing else stops that one)."""
    holder = lock_holder(ctx.data_dir)
    if not holder:
        ctx.emit({"running": False}, f"No Hivenote server is running for {ctx.data_dir}.")
        return 0
    url = running_server(ctx.data_dir)
    if url is None:  # the lock is held by a command (an import, a compaction), not a server
        raise InvalidInput(
            f"pid {holder} holds {ctx.data_dir} but is not a Hivenote server (a command still running?); wait for it "
            "to finish, then try again"
        )
    try:
        os.kill(holder, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it just ended by itself
    except PermissionError:
        raise InvalidInput(
            f"pid {holder} serves {ctx.data_dir} but belongs to another account; stop it there"
        ) from None
    deadline = time.monotonic() + STOP_WAIT_S
    while lock_holder(ctx.data_dir):
        if time.monotonic() > deadline:
            raise HivenoteError(
                f"pid {holder} did not stop within {STOP_WAIT_S:.0f} s; end it yourself (kill {holder})"
            )
        time.sleep(0.05)
    ctx.emit({"running": False, "stopped": holder, "url": url}, f"Stopped the Hivenote server at {url} (pid {holder}).")
    return 0


def cmd_open(ctx: Context) -> int:
    """This data dir's dashboard in the default browser, signed in: a one-time code the page trades for a cookie
    (never the token in an address, and never the code on a command line: opener.py)."""
    from .opener import open_in_browser, signed_in_url

    url = running_server(ctx.data_dir)
    if url is None:
        raise InvalidInput(
            f"No Hivenote server is running for {ctx.data_dir}: start one (`hivenote` or `hivenote serve`), then run "
            "`hivenote open` again"
        )
    open_in_browser(signed_in_url(url, ctx.data_dir))
    ctx.emit({"url": url}, f"Opened the dashboard at {url} in your browser, signed in.")
    return 0


def cmd_token(ctx: Context) -> int:
    from ..tokens import Tokens

    a = ctx.args
    tokens = Tokens(Layout(ctx.data_dir).tokens)
    if a.token_command == "show":
        token = tokens.default()
        ctx.emit({"token": token}, token)
    elif a.token_command == "add":
        token = tokens.add(a.name)
        ctx.emit(
            {"name": a.name, "token": token},
            f"{token}\nThe token for {a.name}; it is shown only this once. Notes they write carry their name.",
        )
    elif a.token_command == "revoke":
        tokens.revoke(a.name)
        ctx.emit({"revoked": a.name}, f"Revoked the token of {a.name}.")
    else:
        people = tokens.people()
        ctx.emit(
            [{"name": p.name, "created": p.created} for p in people],
            "\n".join(f"{p.name}  (since {ago(p.created, wall_ms())})" for p in people) or "No personal tokens yet.",
        )
    return 0


def cmd_connect(ctx: Context) -> int:
    from ..connect import CLIENTS, snippet, stdio_command
    from ..tokens import Tokens

    a = ctx.args
    if not a.client:
        ctx.emit(list(CLIENTS), "Clients: " + ", ".join(CLIENTS) + "\nRun `hivenote connect <client>` for its config.")
        return 0
    settings = load_settings(data_dir=ctx.data_dir)
    token = Tokens(Layout(ctx.data_dir).tokens).default() if settings.auth else None
    base = running_server(ctx.data_dir) or settings.base_url  # the server running for this data dir, if any
    url = f"{base}/mcp/graph" if a.graph else f"{base}/mcp"
    port = urlsplit(base).port or settings.port
    bridge = stdio_command(ctx.data_dir, port)
    if a.install:
        return _install(ctx, a.client, url, token, bridge)
    found = snippet(a.client, url=url, token=token, graph=a.graph, stdio_command=bridge)
    where = "\n".join(f"  {system}: {path}" for system, path in found.where.items())
    steps = "\n".join(f"  - {step}" for step in found.steps)
    ctx.emit(found.to_json(), f"{found.title} ({found.format}):\n\n{found.text}\n\nWhere:\n{where}\n\nSteps:\n{steps}")
    return 0


def _install(ctx: Context, client: str, url: str, token: str | None, bridge: list[str]) -> int:
    """`connect <client> --install`: the change shown, asked about (unless --yes), then made; its outcome said."""
    from ..install import Machine, apply, plan

    if ctx.args.graph:
        raise InvalidInput("--install connects the notebook tools (/mcp); for /mcp/graph copy the snippet (--graph)")
    machine = Machine.here()
    planned = plan(client, machine, url=url, token=token, stdio_command=bridge)
    shown = planned.diff or "\n".join(f"  $ {line}" for line in planned.shown)
    if planned.way == "none":
        ctx.emit({"plan": planned.to_json(), "ok": False}, f"{planned.summary}\n`hivenote connect {client}` prints it.")
        return 1
    if not ctx.args.yes:
        if ctx.json or not sys.stdin.isatty():
            raise InvalidInput(f"{planned.summary} Nobody can be asked here: run it again with --yes to go ahead.")
        ctx.out.write(f"{planned.summary}\n\n{shown}\n\nGo ahead? [y/N] ")
        ctx.out.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            ctx.out.write("Nothing was changed.\n")
            return 1
    elif not ctx.json:
        ctx.out.write(f"{planned.summary}\n\n{shown}\n\n")
    done = apply(planned, machine)
    output = f"\n{done.output}" if done.output else ""
    ctx.emit({"plan": planned.to_json(), **done.to_json()}, f"{done.message}{output}")
    return 0 if done.ok else 1


def cmd_stdio(ctx: Context) -> int:
    from ..mcp.handoff_stdio import hand_over
    from ..mcp.stdio import NotOurServer, ensure_server, refuse_all, run_bridge
    from ..storage.serverfile import server_record
    from ..tokens import Tokens

    a = ctx.args
    settings = load_settings({"port": a.port}, data_dir=ctx.data_dir)
    # The server for this data dir may run on another port (`serve --port`): it says where in server.json.
    base = (None if a.port else running_server(ctx.data_dir)) or settings.base_url
    token = Tokens(Layout(ctx.data_dir).tokens).default()
    try:
        ensure_server(base, ctx.data_dir, settings.port, token)  # the token goes only to this data dir's server
    except NotOurServer as exc:
        ctx.err.write(f"hivenote: {exc}\n")
        ctx.err.flush()
        refuse_all(str(exc), sys.stdin.buffer, sys.stdout.buffer)  # the client is told too, request by request
        return 1
    endpoint = "/mcp/graph" if a.graph else "/mcp"
    handed = None
    if not a.bridge:
        # The server runs the session on our stdin and stdout itself (POSIX); we wait until it ends or comes back.
        record = server_record(ctx.data_dir) or {}
        handoff = record.get("handoff")
        handed = hand_over(handoff if isinstance(handoff, str) else None, endpoint)
        if handed is not None and handed.ended:
            return 0
    run_bridge(f"{base}{endpoint}", token, ctx.data_dir, handed)
    return 0
