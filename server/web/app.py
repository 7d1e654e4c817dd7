"""The one Starlette app (`create_app(settings, store)`): MCP at /mcp (notebook) and /mcp/graph (official memory
tools), REST under /api, all behind the auth guard; long-lived work (MCP session managers, following other
machines' shards, warming the search index) lives in the lifespan."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .. import __version__
from ..agents import AgentTracker
from ..core.errors import HivenoteError
from ..core.search import COLD_INDEX, refresh_note_index
from ..graph import Graph
from ..heap import malloc_trim
from ..mcp import common as mcp_common
from ..mcp import sdk
from ..mcp.common import identify, limit_sessions, tracking_middleware
from ..mcp.graph import GraphMCP
from ..mcp.handoff import Endpoint, Handoff
from ..mcp.handoff_stdio import available as handoff_available
from ..mcp.handoff_stdio import socket_path
from ..mcp.notebook import build_notebook_server
from ..meaning import model_settings, open_index
from ..notebook import Notebook
from ..responses import error_response, hivenote_error, http_error
from ..settings import Settings
from ..storage.gcpause import collector_paused
from ..storage.layout import Layout
from ..storage.searchcache import SearchCache
from ..storage.serverfile import announce, withdraw
from ..storage.store import Store, StoreWriteFailed
from ..sync.routes import sync_routes
from ..sync.run import run_transports
from ..tokens import IDENTITY_CHALLENGE, Tokens, identity_proof
from .auth import Guard, request_limit, too_large_text
from .dashboard import web_routes
from .rest import rest_routes
from .services import Services

log = logging.getLogger(__name__)

FOLLOW_INTERVAL_S = 0.5  # how often other machines' shards are looked at (sync transports add file watching)
COLLECTOR_HOLD_S = 120.0  # the longest the collector is held off after start while the index warms (100k: ~30 s)
WARM_BATCH = 250  # notes indexed per step while warming the search index: writers and searches wait ~10 ms, not 0.1 s
# The guard checks Host/Origin on every route; the SDK's own check would refuse LAN names when sharing.
NO_SDK_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def health(request: Request) -> Response:
    """Up or not; with `?challenge=<hex>`, also the proof that this is the Hivenote of the asker's data dir."""
    body: dict[str, Any] = {"ok": True, "version": __version__}
    challenge = request.query_params.get("challenge")
    if challenge is not None and not IDENTITY_CHALLENGE.fullmatch(challenge):
        return error_response("invalid", "challenge must be 32 to 128 lowercase hex digits (e.g. 16 random bytes)")
    if challenge is not None:
        port = int((request.scope.get("server") or ("", 0))[1] or 0)  # the socket's own port: no header changes it
        with contextlib.suppress(HivenoteError):  # tokens.json damaged: no proof, so no bridge sends a token here
            body["proof"] = identity_proof(request.app.state.services.tokens.default(), port, challenge)
    return JSONResponse(body)


async def _follow_and_warm(services: Services, graph_mcp: GraphMCP, saved: SearchCache, collector: _Collector) -> None:
    """Fold shards other machines' transports bring, build the search index in steps after start unless the last
    run's was taken (then save it for the next start), and tell graph subscribers about changes from any source
    (REST, the dashboard, another machine)."""
    store = services.store
    frozen = False
    hold_until = time.monotonic() + COLLECTOR_HOLD_S
    while True:
        pause = FOLLOW_INTERVAL_S
        if collector.paused and time.monotonic() > hold_until:
            # A warm-up that never ends (a step failing at every tick, a notebook far bigger than usual) must not
            # leave the process without its cyclic collector: cycles would pile up for as long as the server runs.
            log.warning("the search index is not warm after %.0f s: the garbage collector runs again", COLLECTOR_HOLD_S)
            _resume(collector)
        try:
            await anyio.to_thread.run_sync(_watch_and_follow, store)

            def warm() -> bool:
                with store.reading() as state, collector_paused():
                    return refresh_note_index(state, budget=WARM_BATCH)

            # Batch after batch (the lock is free between them) for up to a tick, then the next tick at once:
            # until the index is warm, a search scans every note.
            until = time.monotonic() + FOLLOW_INTERVAL_S
            warmed = await anyio.to_thread.run_sync(warm)
            while not warmed and time.monotonic() < until:
                warmed = await anyio.to_thread.run_sync(warm)
            if not frozen and warmed:
                await anyio.to_thread.run_sync(_save_index, saved)  # once: a start with these ops finds it
                # The folded notebook lives as long as the server: keep the collector from walking it again
                # and again (a full pass over a big notebook is a latency spike on whichever request meets it).
                await anyio.to_thread.run_sync(_settle_memory, collector)
                frozen = True
            await graph_mcp.publish_if_changed()
            if not warmed:
                pause = 0  # still warming
        except Exception:  # keep following; the error shows in the log and in status
            log.exception("following the log folder failed")
        await anyio.sleep(pause)


async def _warm_meaning(services: Services) -> None:
    """Keep the static meaning index (when meaning search is on) up to date: a batch at a time in a worker thread,
    the store's lock held only to look at the notes; until the first pass is done, search answers lexically. Once it
    is warm, the sentence index starts building in its own thread (meaning/both.py)."""
    index = services.notebook.meaning
    if index is None:
        return
    refresh = getattr(index, "refresh", None)
    if refresh is None:
        return
    start = getattr(index, "start", None)
    while True:
        try:
            done = await anyio.to_thread.run_sync(refresh, services.store)
        except Exception:  # derived data: search stays lexical; the error shows in the log
            log.exception("building the meaning index failed")
            return
        if done and start is not None:
            start(services.store)
            start = None
        await anyio.sleep(FOLLOW_INTERVAL_S if done else 0)


@dataclass
class _Collector:
    paused: bool = False  # the cyclic collector held off by this server until its start-up work is done


def _start_up(saved: SearchCache, collector: _Collector) -> None:
    """Before the first request: the search index the last run saved, when it was saved for the ops the store holds
    (warm from the first request; else it warms in steps after start); then the folded notebook frozen (its garbage
    collected first) and the collector held off until the index is warm (`_settle_memory` collects then). Its passes
    while the index warmed walked the objects the warm-up builds, ~1M at 100k notes: a search that met one waited
    0.2-1 s (the fold's ~580k objects alone took 0.2 s a pass)."""
    try:
        saved.load()
    except Exception:  # derived data: the index warms as without it
        log.exception("reading the saved search index failed")
    gc.collect()
    gc.freeze()
    if gc.isenabled():
        gc.disable()
        collector.paused = True


def _resume(collector: _Collector | None) -> None:
    if collector is not None and collector.paused:
        collector.paused = False
        gc.enable()


def _save_index(saved: SearchCache, catch_up: int = 0) -> None:
    try:
        saved.save(catch_up)
    except Exception:  # derived data: the next start does without it
        log.exception("saving the search index failed")


def _save_meaning(services: Services) -> None:
    """The meaning indexes' cache files with the notes embedded since they were last written, for the next start
    (the sentence index's worker stopped first: it ends the batch under way)."""
    stop = getattr(services.notebook.meaning, "stop", None)
    if stop is not None:
        stop()
    save = getattr(services.notebook.meaning, "save", None)
    if save is None:
        return
    try:
        save()
    except Exception:  # derived data: the next start embeds those notes again
        log.exception("saving the meaning index failed")


def _settle_memory(collector: _Collector | None = None) -> None:
    """Once start-up work is done: collect its garbage, then freeze what is left (the folded notebook lives as long
    as the server, and a full collector pass over it is a latency spike on whichever request meets it), let the
    collector run again, then hand the heap pages the fold and the index build freed back to the system (glibc keeps
    them otherwise)."""
    gc.collect()  # before the freeze: garbage frozen with the rest would never be collected
    gc.freeze()
    _resume(collector)
    if (trim := malloc_trim()) is not None:
        trim(0)


def _watch_and_follow(store: Store) -> None:
    """One worker-thread hop per tick: the log folder still there and the disk taking writes (status shows
    `store.problem` when not), then whatever other machines' shards gained."""
    with contextlib.suppress(StoreWriteFailed):
        store.watch()
    store.refresh()


def create_app(
    settings: Settings,
    store: Store,
    *,
    tokens: Tokens | None = None,
    tracker: AgentTracker | None = None,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The whole server over an open store. Tokens and the agent tracker can be passed in (tests, the tray)."""
    services = Services(
        settings=settings,
        store=store,
        notebook=Notebook(store, meaning=open_index(settings.data_dir, settings.meaning, model_settings(settings))),
        graph=Graph(store),
        tokens=tokens or Tokens(Layout(settings.data_dir).tokens),
        tracker=tracker or AgentTracker(),
        desktop=any(getattr(route, "path", "").startswith("/desktop/") for route in extra_routes or []),
    )
    if settings.auth:
        services.tokens.default()  # exists before the first request, so snippets and clients can use it
    notebook_mcp = build_notebook_server(services.notebook, identify)
    notebook_mcp.middleware.append(tracking_middleware(services.tracker))
    # The SDK's own session limit (a 503 for everyone) sits above SessionLimits' per-person bounds, never reached.
    sessions: dict[str, Any] = {
        "transport_security": NO_SDK_HOST_CHECK,
        "host": settings.host,
        "session_idle_timeout": mcp_common.SESSION_IDLE_S,
        "max_sessions": mcp_common.SESSIONS_TOTAL + 100,
    }
    # The guard refuses a body past the route's limit first, saying it; the SDK's own limit sits just above it.
    notebook_http = notebook_mcp.streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=request_limit(settings, "/mcp") + 1, **sessions
    )
    sdk.check(notebook_mcp.session_manager, notebook_mcp)  # an SDK release that moved what Hivenote reads: said now
    saved_index = SearchCache(store)
    graph_mcp = GraphMCP(services.graph, identify=identify, extras=settings.graph_extras)
    graph_mcp.server.middleware.append(tracking_middleware(services.tracker))
    graph_http = graph_mcp.http_app(
        "/mcp/graph", max_request_body_size=request_limit(settings, "/mcp/graph") + 1, **sessions
    )
    session_limits = {
        "/mcp": limit_sessions(notebook_http, "/mcp", notebook_mcp.session_manager),
        "/mcp/graph": limit_sessions(graph_http, "/mcp/graph", graph_mcp.server.session_manager),
    }
    # Sessions `hivenote stdio` hands over on a Unix domain socket, run on the client's own pipes (handoff.py),
    # with the HTTP routes' limits.
    limits = {path: request_limit(settings, path) for path in ("/mcp", "/mcp/graph")}
    handoff = Handoff(
        socket_path(settings.data_dir) if handoff_available() else None,
        {
            path: Endpoint(
                server, manager, limits[path], too_large_text(path, limits[path]), direct=path == "/mcp/graph"
            )
            for path, server, manager in (
                ("/mcp", sdk.lowlevel(notebook_mcp), notebook_mcp.session_manager),
                ("/mcp/graph", graph_mcp.server, graph_mcp.server.session_manager),
            )
        },
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        async with (
            notebook_mcp.session_manager.run(),
            graph_mcp.server.session_manager.run(),
            handoff.listening(),
            anyio.create_task_group() as tasks,
        ):
            # Before the first request: the search index the last run saved, warm at once.
            collector = _Collector()
            await anyio.to_thread.run_sync(_start_up, saved_index, collector)
            tasks.start_soon(_follow_and_warm, services, graph_mcp, saved_index, collector)
            tasks.start_soon(_warm_meaning, services)
            tasks.start_soon(run_transports, services)
            # So the CLI can reach us while we hold the lock, and `hivenote stdio` hand us its session.
            announce(settings.data_dir, settings.base_url, handoff.listening_at)
            try:
                yield {"services": services}
            finally:
                with anyio.CancelScope(shield=True):  # first: stdio clients go on at once while the rest stops
                    await handoff.hand_back_all()
                withdraw(settings.data_dir)
                tasks.cancel_scope.cancel()
                _save_index(saved_index, COLD_INDEX)  # with what was written since it was warm, for the next start
                _save_meaning(services)
                # What `_settle_memory` froze is this server's: once it stops (the tray's Stop, a restart) it must be
                # collectable again, or every start leaves the last server's cycles behind for good.
                gc.unfreeze()
                _resume(collector)  # stopped before the index was warm

    # The MCP endpoints first: agents call them most, and the router tries each route in turn (~40 REST routes).
    routes: list[BaseRoute] = [
        *graph_http.routes,
        *notebook_http.routes,
        Route("/api/health", health),
        *rest_routes(services),
        *sync_routes(services),
        *(extra_routes or []),
        *web_routes(),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(Guard, settings=settings, tokens=services.tokens, sign_in=services.sign_in)],
        exception_handlers={HivenoteError: hivenote_error, 404: http_error, 405: http_error, 500: http_error},
    )
    app.state.services = services
    app.state.notebook_mcp = notebook_mcp  # benchmarks add a no-op tool to measure the protocol floor
    app.state.graph_mcp = graph_mcp
    app.state.session_limits = session_limits
    app.state.handoff = handoff
    return app
