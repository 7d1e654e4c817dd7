"""What both MCP endpoints share: who is calling (provenance from clientInfo, User-Agent and the token's
owner) and the middleware that keeps the connected-agents list current for every request."""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from .agents import AgentTracker, author_for
from .model import Author

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


def identify(rc: Any, tool: str = "") -> Author:
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
