"""What both MCP endpoints share: who is calling (provenance from clientInfo, User-Agent and the token's
owner) and the middleware that keeps the connected-agents list current for every request."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from ..agents import AgentTracker, author_for
from ..core.model import Author
from . import sdk

log = logging.getLogger(__name__)


def author_of(rc: ServerRequestContext[Any, Any]) -> Author:
    """Provenance of an MCP request. The client names itself at initialize (or per request on the 2026 era);
    the token's owner was put on the HTTP request by the auth guard."""
    name = version = None
    params = rc.session.client_params if rc.session is not None else None
    info = params.client_info if params is not None else None
    if info is None and rc.method == "initialize" and rc.params:
        raw = rc.params.get("clientInfo") or {}
        name, version = raw.get("name"), raw.get("version")
    elif info is not None:
        name, version = info.name, info.version
    request = rc.request
    headers = getattr(request, "headers", None)
    user_agent = headers.get("user-agent") if headers is not None else None
    person = getattr(getattr(request, "state", None), "person", "") or ""
    return author_for(name, version, user_agent, person)


def identify(rc: Any) -> Author:
    """`author_of` for the context any handler gets (MCPServer's Context wraps the lowlevel one)."""
    return author_of(getattr(rc, "request_context", rc))


def tracking_middleware(tracker: AgentTracker) -> Any:
    """Records every MCP request (initialize, lists, tool calls) as the caller being seen now."""

    async def track(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            tool = str((ctx.params or {}).get("name", "")) if ctx.method == "tools/call" else ""
            tracker.record(author_of(ctx), tool)
        except Exception:  # tracking must never break a request
            log.exception("could not record the calling agent")
        return await call_next(ctx)

    return track


# -- the session table: bounded per person ----------------------------------------------------------------------------

SESSIONS_PER_PERSON = 200  # MCP sessions one token may hold at once (each agent holds one per endpoint)
SESSIONS_TOTAL = 1000  # all tokens together, per endpoint
SESSION_IDLE_S = 30 * 60.0  # a session with no request for this long is forgotten (its client opens a new one)
SESSION_HEADER = b"mcp-session-id"


class SessionLimits:
    """In front of an MCP endpoint: each person (the token's owner, set by the guard) holds at most
    SESSIONS_PER_PERSON sessions, and the endpoint at most SESSIONS_TOTAL. A new session past a person's bound ends
    that person's least recently used one; past the total, the least recently used one of whoever holds the most.
    So one token flooding sessions only ever pushes out its own, and another person's agent always gets in (the
    SDK's own limit, a 503 for everyone, is set above these and never reached)."""

    def __init__(self, app: Any, manager: Any) -> None:
        self.app = app
        self.manager = manager  # the SDK's StreamableHTTPSessionManager
        self.used: dict[str, tuple[str, float]] = {}  # session id -> (person, when last used)
        self.opening: Counter[str] = Counter()  # sessions being opened now, per person

    def _live(self) -> dict[str, Any]:
        return sdk.live_sessions(self.manager)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        person = str(scope.get("state", {}).get("person", "") or "")
        session = next((v.decode("latin-1") for k, v in scope["headers"] if k == SESSION_HEADER), None)
        if session is not None or scope["method"] != "POST":  # an existing session (or the SDK refuses it)
            if session in self.used:
                self.used[session] = (self.used[session][0], time.monotonic())
            await self.app(scope, receive, send)
            return
        await self._make_room(person)
        self.opening[person] += 1
        counted = True

        async def watch(message: Any) -> None:
            nonlocal counted
            if message["type"] == "http.response.start" and counted:
                counted = False
                self.opening[person] -= 1
                new = next((v.decode("latin-1") for k, v in message.get("headers", []) if k == SESSION_HEADER), None)
                if new and message["status"] < 400:
                    self.used[new] = (person, time.monotonic())
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if counted:
                self.opening[person] -= 1

    async def _make_room(self, person: str) -> None:
        live = self._live()
        for gone in [s for s in self.used if s not in live]:
            del self.used[gone]
        held = Counter(p for p, _ in self.used.values())
        if held[person] + self.opening[person] >= SESSIONS_PER_PERSON:
            await self._end_oldest(person)
        elif len(live) + sum(self.opening.values()) >= SESSIONS_TOTAL and held:
            await self._end_oldest(max(held, key=lambda p: held[p]))

    async def _end_oldest(self, person: str) -> None:
        theirs = [(when, s) for s, (p, when) in self.used.items() if p == person]
        if not theirs:
            return
        _, session = min(theirs)
        del self.used[session]
        transport = self._live().get(session)
        if transport is not None:
            log.info("ending the least recently used MCP session of %r to open a new one", person or "the owner")
            await sdk.end_session(self.manager, session, transport)


def limit_sessions(app: Any, path: str, manager: Any) -> SessionLimits | None:
    """Wrap the route at `path` of the SDK's Starlette `app` in SessionLimits (returned; None if no such route)."""
    from starlette.routing import Route

    for i, route in enumerate(app.router.routes):
        if isinstance(route, Route) and route.path == path:
            limits = SessionLimits(route.endpoint, manager)
            app.router.routes[i] = Route(path, endpoint=limits)
            return limits
    return None
