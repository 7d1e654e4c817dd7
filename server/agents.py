"""Which agent is calling (provenance) and which agents are connected ("online" = a request in the last two
minutes). The product is inferred from the MCP clientInfo name, with the User-Agent as fallback; it is never
taken from tool arguments. Tracking is in memory and must never break a request."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from .core.hlc import wall_ms
from .core.model import Author

ONLINE_MS = 120_000
MAX_TRACKED = 500  # clients remembered at once; past it, the one seen longest ago is forgotten
PEOPLE_NOT_AGENTS = frozenset({"dashboard", "cli"})  # a person at the dashboard or shell is not a connected agent
# Clients that are not agents: mcp-remote's probe for which transport works, and plain HTTP tools named only by
# their User-Agent (curl, a script's HTTP library).
_NOT_AGENTS = re.compile(
    r"^(mcp-remote-fallback-test\b|curl/|wget/|python-urllib/|python-requests/|python-httpx/|httpie/|go-http-client/)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Product:
    """An agent product: its id (in provenance, filters and the log), the name people read, and the pattern that
    recognises it in the lowercased MCP clientInfo name or User-Agent ("" = never inferred from a client)."""

    id: str
    name: str
    pattern: str


# The one table of agent products: the CLI, MCP answers, the tray and the dashboard (GET /ui/js/agent-names.js)
# all name agents from it. Order matters for recognition: the first matching pattern wins.
PRODUCTS: tuple[Product, ...] = (
    Product("claude-code", "Claude Code", r"claude-code|claude code"),
    Product("claude-desktop", "Claude Desktop", r"claude-ai|claude desktop|claude-desktop"),
    Product("cursor", "Cursor", r"cursor"),
    Product("codex", "Codex", r"codex"),
    Product("gemini-cli", "Gemini CLI", r"gemini"),
    Product("vscode", "VS Code", r"visual[ -]studio[ -]code|vscode"),
    Product("windsurf", "Windsurf", r"windsurf"),
    Product("zed", "Zed", r"^zed\b|\bzed/"),
    Product("roo-code", "Roo Code", r"roo-code|roo code"),
    Product("kilo-code", "Kilo Code", r"kilo-code|kilo code"),
    Product("cline", "Cline", r"cline"),
    Product("continue", "Continue", r"continue"),
    Product("opencode", "opencode", r"opencode"),
    Product("goose", "Goose", r"goose"),
    Product("junie", "JetBrains Junie", r"junie"),
    Product("jetbrains", "JetBrains", r"jetbrains"),
    Product("copilot", "Copilot", r"github-copilot|copilot"),
    Product("amazon-q", "Amazon Q", r"q-dev-cli|amazon q"),
    Product("amp", "Amp", r"^amp\b|amp-mcp"),
    Product("chatgpt", "ChatGPT", r"chatgpt|openai"),
    Product("antigravity", "Antigravity", r"antigravity"),
    Product("inspector", "MCP Inspector", r"inspector"),
    Product("cli", "CLI", r"^hivenote-cli|hivenote cli"),
    Product("dashboard", "Dashboard", r"^hivenote-dashboard"),
    Product("import", "Import", ""),
    Product("other", "Other client", ""),
)
AGENT_NAMES = {product.id: product.name for product in PRODUCTS}
_COMPILED = tuple((re.compile(product.pattern), product.id) for product in PRODUCTS if product.pattern)


def agent_name(agent: str) -> str:
    """The name people read for an agent id (an id this version does not know, from a newer machine, as is)."""
    return AGENT_NAMES.get(agent, agent or "unknown")


_VIA_REMOTE = re.compile(r"\s*\(via mcp-remote[^)]*\)\s*$", re.IGNORECASE)


def agent_id(client_name: str | None, user_agent: str | None = None) -> str:
    """The normalized product id: cursor, claude-code, codex, ... or "other"."""
    for raw in (client_name, user_agent):
        if not raw:
            continue
        text = _VIA_REMOTE.sub("", raw).strip().lower()
        for pattern, agent in _COMPILED:
            if pattern.search(text):
                return agent
    return "other"


def is_agent(author: Author) -> bool:
    """Whether a caller counts as a connected agent (the agents list, "agents online")."""
    return author.agent not in PEOPLE_NOT_AGENTS and not _NOT_AGENTS.match(author.client)


def author_for(client_name: str | None, client_version: str | None, user_agent: str | None, person: str) -> Author:
    """Provenance of a request: product id, the raw client string (name and version, else User-Agent), person."""
    client = " ".join(part for part in (client_name, client_version) if part) or (user_agent or "")
    return Author(agent=agent_id(client_name, user_agent), client=client[:200], person=person)


@dataclass
class AgentSeen:
    agent: str
    person: str
    client: str
    first_seen: int
    last_seen: int
    requests: int = 0
    last_tool: str = ""

    def to_json(self, now_ms: int) -> dict[str, object]:
        return {
            "agent": self.agent,
            "person": self.person,
            "client": self.client,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "requests": self.requests,
            "last_tool": self.last_tool,
            "online": now_ms - self.last_seen < ONLINE_MS,
        }


class AgentTracker:
    """Last-seen per (agent, person, client). Thread-safe; the clock is injectable for tests."""

    def __init__(self, now_ms: Callable[[], int] = wall_ms) -> None:
        self.now_ms = now_ms
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str, str], AgentSeen] = {}

    def record(self, author: Author, tool: str = "") -> None:
        """One request from `author` seen now (nothing for callers that are not agents: see is_agent)."""
        if not is_agent(author):
            return
        now = self.now_ms()
        key = (author.agent, author.person, author.client)
        with self._lock:
            seen = self._seen.pop(key, None)  # put back last: the dict stays ordered by last request
            if seen is None:
                seen = AgentSeen(author.agent, author.person, author.client, now, now)
                while len(self._seen) >= MAX_TRACKED:  # any number of client names: forget the longest unseen
                    del self._seen[next(iter(self._seen))]
            self._seen[key] = seen
            seen.last_seen = max(seen.last_seen, now)
            seen.requests += 1
            if tool:
                seen.last_tool = tool

    def snapshot(self) -> list[AgentSeen]:
        """Every agent seen, most recent first (copies: callers may keep them)."""
        with self._lock:
            items = [AgentSeen(**vars(s)) for s in self._seen.values()]
        return sorted(items, key=lambda s: s.last_seen, reverse=True)

    def online(self) -> list[AgentSeen]:
        now = self.now_ms()
        return [s for s in self.snapshot() if now - s.last_seen < ONLINE_MS]
