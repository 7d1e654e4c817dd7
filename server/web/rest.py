"""The REST API under /api (JSON; the dashboard's only backend): each endpoint declared once, beside its handler,
and the Starlette routes and OpenAPI document built from that one table (`ENDPOINTS`). Handlers are thin adapters
over the use-cases MCP and the CLI share; errors go through app.py's HivenoteError handler, so every failure is
`{"error": {"code", "message"}}` and a rejected request writes nothing."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from .. import __version__, transfer
from ..connect import CLIENTS, all_snippets, snippet, stdio_command
from ..core.errors import EntityNotFound, Forbidden, ImportRejected, InvalidInput, NotFound
from ..core.hlc import wall_ms
from ..core.listing import DEFAULT_LIMIT, MAX_LIMIT, Filters
from ..core.model import Entity, Note, Relation
from ..graph import GraphPage, graph_json
from ..meaning import status_of as meaning_status
from ..render import window_json
from ..settings import SETTINGS_HELP, save_settings
from .rest_schema import (
    NOTE,
    QUERIES,
    SETTABLE,
    TEXT,
    Call,
    Endpoint,
    endpoint,
    obj,
    openapi_document,
    ref,
    route,
)
from .session import (
    CODE_LIFETIME_S,
    COOKIE_LIFETIME_S,
    KEY_HEADER,
    cookie_header,
    cookie_name,
    from_the_dashboard,
)

if TYPE_CHECKING:
    from .services import Services

TOKEN_PLACEHOLDER = "<your token>"
# Tokens is not thread-safe and the guard reads it on the event loop: token routes run there too (small file writes).
TOKENS: dict[str, bool] = {"owner_only": True, "store": False, "blocking": False}


def _notes(notes: list[Note]) -> list[dict[str, Any]]:
    return [n.to_json() for n in notes]


HEALTH = Endpoint(
    "GET",
    "/api/health",
    "Is the server up (no token needed)",
    ref("Health"),
    name="health",
    public=True,
    store=False,
    query=QUERIES["health"],
)


# -- notes ----------------------------------------------------------------------------------------------------------


@endpoint("GET", "/api/notes", "Search (with q) or list notes", ref("NoteList"), query=QUERIES["notes"])
def list_notes(c: Call) -> object:
    """The same Notebook.search / Notebook.list calls as MCP and the CLI. Without `limit`, as many as fit the
    default budget (about 10); a search pages within its best 200 matches. `near` holds the closest partial
    matches when nothing matched every word."""
    q = c.query
    notebook = c.services.notebook
    time_window = notebook.window(q.get("since"), q.get("until"))
    filters = Filters(**{k: q[k] for k in ("kind", "project", "tag", "agent", "person", "node", "trashed") if k in q})
    filters = replace(filters, window=time_window)
    used = window_json(time_window, wall_ms())
    limit, offset = q.get("limit"), q.get("offset", 0)
    if "q" not in q:
        notes, total = notebook.list(filters, limit=limit, offset=offset)
        return {"results": _notes(notes), "near": [], "total": total, "reasons": {}, "replaced_by": {}, "window": used}
    window = limit if not offset else offset + (limit or DEFAULT_LIMIT)
    if window is not None and window > MAX_LIMIT:
        raise InvalidInput(f"a search ranks its best {MAX_LIMIT} matches: offset + limit must be at most {MAX_LIMIT}")
    result = notebook.search(q["q"], filters, window)
    return {
        "results": _notes(result.hits[offset:]),
        "near": _notes(result.near),
        "total": result.total,
        "reasons": result.reasons,
        "replaced_by": result.replaced_by,
        "window": used,
    }


@endpoint("POST", "/api/notes", "Remember a note", ref("Remembered"), body=ref("NewNote"), status=201)
def create_note(c: Call) -> object:
    """`similar` lists live notes that look like the same fact: perhaps update one of them instead."""
    b = c.body
    done = c.services.notebook.remember(
        kind=b["kind"],
        title=b["title"],
        body=b.get("body", ""),
        tags=b.get("tags", []),
        project=b.get("project"),
        replaces=b.get("replaces"),
        by=c.author,
    )
    return {"note": done.note.to_json(), "similar": _notes(done.similar)}


@endpoint("GET", "/api/notes/{id}", "Read a note (a unique id prefix works)", NOTE)
def get_note(c: Call) -> object:
    return c.services.notebook.get(c.path["id"]).to_json()


@endpoint("PATCH", "/api/notes/{id}", "Change the fields given (null project clears it)", NOTE, body=ref("NoteChange"))
def update_note(c: Call) -> object:
    return c.services.notebook.update(c.path["id"], by=c.author, **c.body).to_json()


@endpoint("POST", "/api/notes/{id}/trash", "Move a note to the trash", NOTE)
def trash_note(c: Call) -> object:
    return c.services.notebook.forget(c.path["id"], by=c.author).to_json()


@endpoint("POST", "/api/notes/{id}/restore", "Bring a note back from the trash", NOTE)
def restore_note(c: Call) -> object:
    return c.services.notebook.restore(c.path["id"], by=c.author).to_json()


@endpoint("DELETE", "/api/notes/{id}", "Delete a trashed note for good, with its history", ref("Purged"))
def purge_note(c: Call) -> object:
    return {"purged": c.services.notebook.purge(c.path["id"], by=c.author)}


@endpoint("GET", "/api/notes/{id}/history", "Every version of a note", ref("History"), query=QUERIES["history"])
def note_history(c: Call) -> object:
    """With since/until, the versions made in that window (the same window as a list's)."""
    notebook = c.services.notebook
    window = notebook.window(c.query.get("since"), c.query.get("until"))
    versions = notebook.history(c.path["id"], window)
    return {"versions": [v.to_json() for v in versions], "window": window_json(window, wall_ms())}


# -- knowledge graph ------------------------------------------------------------------------------------------------


def _page(c: Call) -> GraphPage:
    q = c.query
    names_only = q.get("names_only", False)
    return c.services.graph.page(q.get("q"), limit=q.get("limit"), offset=q.get("offset", 0), names_only=names_only)


@endpoint("GET", "/api/graph", "The knowledge graph, a page at a time", ref("GraphPage"), query=QUERIES["page"])
def read_graph(c: Call) -> object:
    return _page(c).to_json()


@endpoint("GET", "/api/graph/search", "Entities matching q", ref("GraphPage"), query=QUERIES["search"])
def search_graph(c: Call) -> object:
    """The official search_nodes rule (substring of name, type or observation, case-insensitive), paged."""
    return _page(c).to_json()


@endpoint("GET", "/api/graph/entities/{name:path}", "One entity and its relations", ref("Graph"))
def open_entity(c: Call) -> object:
    entities, relations = c.services.graph.open_nodes([c.path["name"]])
    if not entities:
        raise EntityNotFound(c.path["name"])
    return graph_json(entities, relations)


@endpoint(
    "POST", "/api/graph/entities", "Create entities (existing names are skipped)", ref("Entities"), body=ref("Entities")
)
def create_entities(c: Call) -> object:
    """create_entities with the official semantics; answers with the entities actually created."""
    wanted = [Entity(e["name"], e["entityType"], tuple(e["observations"])) for e in c.body["entities"]]
    return {"entities": [e.to_json() for e in c.services.graph.create_entities(wanted, by=c.author)]}


@endpoint("DELETE", "/api/graph/entities/{name:path}", "Delete an entity and its relations", ref("Ok"))
def delete_entity(c: Call) -> object:
    """delete_entities for one name: deleting a missing name changes nothing and is not an error."""
    c.services.graph.delete_entities([c.path["name"]], by=c.author)
    return {"ok": True}


@endpoint(
    "POST",
    "/api/graph/observations",
    "Add observations",
    ref("AddedObservations"),
    body=ref("NewObservations"),
    not_found=True,
)
def add_observations(c: Call) -> object:
    """add_observations: an unknown entity fails the whole call (404) and changes nothing."""
    added = c.services.graph.add_observations(
        [(o["entityName"], o["contents"]) for o in c.body["observations"]], by=c.author
    )
    return {"results": [{"entityName": name, "addedObservations": texts} for name, texts in added]}


@endpoint("DELETE", "/api/graph/observations", "Delete observations", ref("Ok"), body=ref("Deletions"))
def delete_observations(c: Call) -> object:
    c.services.graph.delete_observations(
        [(d["entityName"], d["observations"]) for d in c.body["deletions"]], by=c.author
    )
    return {"ok": True}


def _relations(c: Call) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in c.body["relations"]]


@endpoint(
    "POST",
    "/api/graph/relations",
    "Create relations (existing ones are skipped)",
    ref("Relations"),
    body=ref("Relations"),
)
def create_relations(c: Call) -> object:
    return {"relations": [r.to_json() for r in c.services.graph.create_relations(_relations(c), by=c.author)]}


@endpoint("DELETE", "/api/graph/relations", "Delete relations", ref("Ok"), body=ref("Relations"))
def delete_relations(c: Call) -> object:
    c.services.graph.delete_relations(_relations(c), by=c.author)
    return {"ok": True}


# -- this server: agents, status, connect snippets ------------------------------------------------------------------


@endpoint("GET", "/api/agents", "Agents seen, online if seen in the last 2 minutes", ref("Agents"), store=False)
def agents(c: Call) -> object:
    now = c.services.tracker.now_ms()
    return {
        "agents": [seen.to_json(now) for seen in c.services.tracker.snapshot()],
        "machine": {"node": c.services.store.node, "host": socket.gethostname()},
    }


def _for_caller(c: Call, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer as the caller may see it: a teammate (a person's token) does not learn this machine's local
    folders (the data dir, the log folder), wherever they appear in it (settings, sync state, a storage problem)."""
    if not c.person:
        return answer
    text = json.dumps(answer)
    for path, alias in ((c.services.settings.log_path, "<log folder>"), (c.services.settings.data_dir, "<data dir>")):
        for spelled in {str(path), str(path.absolute())}:
            text = text.replace(json.dumps(spelled)[1:-1], alias)
    hidden: dict[str, Any] = json.loads(text)
    return hidden


@endpoint("GET", "/api/status", "Counts, machines, shards, clock skew, agents", ref("Status"))
def status(c: Call) -> object:
    """`lag_ms` is now minus the last op seen from that machine; `shards` counts unreadable lines (never deleted)
    and lists the first ones reported."""
    s, store = c.services, c.services.store
    counts = s.notebook.counts()
    with store.reading() as state:
        now = store.now_ms()
        nodes = {
            n: {"ops": st.ops, "last_op": st.last_wall, "lag_ms": now - st.last_wall} for n, st in state.nodes.items()
        }
        shards = {
            name: {"ops": h.ops, "bad_lines": h.bad, "unknown_ops": h.unknown, "torn_tail_bytes": h.torn_tail_bytes}
            | {"problems": [{"line": b.line, "reason": b.reason} for b in h.bad_lines]}
            | {"unreadable": h.unreadable or None}
            for name, h in store.health().items()
        }
        skew = dict(store.clock.skew.ahead_ms)
    return _for_caller(
        c,
        {
            "version": __version__,
            "node": store.node,
            "data_dir": str(s.settings.data_dir),
            "uptime_s": round(time.monotonic() - s.started, 3),
            "counts": counts,
            "nodes": nodes,
            "clock_skew_ms": skew,
            "shards": shards,
            "fsyncs": store.fsyncs,
            "agents_online": len(s.tracker.online()),
            "auth": s.settings.auth,
            "listen": {
                "host": s.settings.host,
                "port": s.settings.port,
                "shared": not s.settings.loopback,
                "urls": s.settings.share_urls,
            },
            "sync": {"log_dir": str(s.settings.log_path), "transports": s.sync.snapshot()},
            "storage": {"ok": store.problem is None, "problem": store.problem.to_json() if store.problem else None},
            "desktop": s.desktop,
            "meaning": meaning_status(s.notebook.meaning),
        },
    )


def _mcp_url(c: Call, graph: bool) -> str:
    """From the request's own base URL, so a dashboard opened through a LAN name gets snippets with that name."""
    return str(c.request.base_url).rstrip("/") + ("/mcp/graph" if graph else "/mcp")


@endpoint("GET", "/api/connect", "The clients with connect snippets", ref("Clients"), store=False, blocking=False)
def connect_clients(c: Call) -> object:
    url = _mcp_url(c, graph=False)
    return {"clients": [{"id": s.client, "title": s.title} for s in all_snippets(url=url, token=None)], "url": url}


@endpoint(
    "GET",
    "/api/connect/{client}",
    "A ready config for one client",
    ref("Snippet"),
    store=False,
    blocking=False,
    query=QUERIES["connect"],
)
def connect_snippet(c: Call) -> object:
    """The owner's token is filled in; a person's token is kept only as a digest, so their snippet holds a
    placeholder and `note` says so."""
    client, graph = c.path["client"], c.query.get("graph", False)
    if client not in CLIENTS:
        raise NotFound(f"no connect snippet for {client!r}; GET /api/connect lists them: {', '.join(CLIENTS)}")
    token, note = None, None
    if c.services.settings.auth and c.person:
        token = TOKEN_PLACEHOLDER
        note = f"Replace {TOKEN_PLACEHOLDER} with the token you were given (Hivenote keeps only its digest)."
    elif c.services.settings.auth:
        token = c.services.tokens.default()
    url = _mcp_url(c, graph)
    port = urlsplit(url).port or c.services.settings.port
    bridge = stdio_command(c.services.settings.data_dir, port)  # the launcher's full path, the data dir, the port
    found = snippet(client, url=url, token=token, graph=graph, stdio_command=bridge)
    return {**found.to_json(), "url": url, "note": note}


# -- files: export and import ---------------------------------------------------------------------------------------


@endpoint(
    "GET",
    "/api/export",
    "The notebook as a file",
    ref("NotebookExport"),
    query=QUERIES["export"],
    also={"application/jsonl": {"type": "string", "description": "memory.jsonl, as the official server writes it"}},
)
def export(c: Call) -> object:
    """A download (Content-Disposition). Taken in one read of the state, serialized after letting go of it."""
    store = c.services.store
    jsonl = c.query.get("format") == "memory-jsonl"
    with store.reading() as state:
        graph = state.graph() if jsonl else None
        doc = None if jsonl else transfer.export_notebook(state, node=store.node, now_ms=store.now_ms())
    if graph is not None:
        data, media, name = transfer.export_memory_jsonl(*graph), "application/jsonl", "memory.jsonl"
    else:
        data, media, name = json.dumps(doc, ensure_ascii=False, indent=2) + "\n", "application/json", "notebook.json"
    return Response(data.encode(), media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})


@endpoint(
    "POST",
    "/api/import",
    "Import a notebook export or a memory.jsonl",
    ref("ImportSummary"),
    file_body=True,
    query=QUERIES["import"],
)
def import_file(c: Call) -> object:
    """The body is the file itself. A bad line is refused with its number and nothing is imported, unless
    skip_bad=true; importing the same file again adds nothing."""
    try:
        content = c.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"the file is not UTF-8 text ({exc.reason} at byte {exc.start}); convert it to UTF-8"
        ) from None
    try:
        fmt = c.query.get("format") or transfer.detect_format(content)
    except InvalidInput:  # its message names the CLI's flag
        raise InvalidInput(
            "cannot tell the file's format: it is neither a memory.jsonl nor a Hivenote notebook export; "
            "pass format=notebook or format=memory-jsonl"
        ) from None
    skip, notes = c.query.get("skip_bad", False), list[dict[str, Any]]()
    try:
        if fmt == "memory-jsonl":
            entities, relations, bad = transfer.parse_memory_jsonl(content, skip_bad=skip)
        else:
            notes, entities, relations, bad = transfer.parse_notebook(content, skip_bad=skip)
    except ImportRejected as exc:  # its message names the CLI's flag
        raise InvalidInput(str(exc).replace("--skip-bad", "skip_bad=true")) from None
    summary = transfer.ImportSummary(fmt, rejected=bad)
    transfer.import_notes(c.services.notebook, notes, summary, by=c.author, source=c.query.get("file", ""))
    transfer.import_graph(c.services.graph, entities, relations, summary, by=c.author)
    return summary.to_json()


# -- settings and tokens --------------------------------------------------------------------------------------------

WIDENING_SETTINGS = frozenset({"host", "allowed_hosts"})  # who can reach this server (log_dir, S3: not over REST)
OWNER_TOKEN_NEEDED = (
    "Auth is off (--no-auth): every account on this machine may use the notebook, but {what} needs the owner's token "
    "(`Authorization: Bearer $(hivenote token show)`), or this account's own `hivenote` command."
)


def _owner_proven(c: Call, what: str) -> None:
    """With auth on, the guard let only credentials in and owner_only rows let only the owner's; with auth off it
    lets everyone in, so what would widen who can reach the server (or outlive --no-auth) asks for the owner's
    credential (a bearer token or the dashboard's cookie) all the same."""
    if not getattr(c.request.state, "owner_proven", False):
        raise Forbidden(OWNER_TOKEN_NEEDED.format(what=what))


@endpoint("GET", "/api/settings", "The running settings and what each means", ref("Settings"), store=False)
def get_settings(c: Call) -> object:
    s = c.services.settings
    values = {name: list(v) if isinstance(v := getattr(s, name), tuple) else v for name in SETTABLE}
    answer = {"values": values, "help": {name: SETTINGS_HELP[name] for name in SETTABLE}, "file": str(s.settings_path)}
    return _for_caller(c, answer)


@endpoint(
    "PUT",
    "/api/settings",
    "Change settings.json (owner only)",
    ref("SettingsSaved"),
    body=ref("SettingsChange"),
    owner_only=True,
    store=False,
    blocking=False,  # on the event loop, so two saves never interleave their read-modify-write (a tiny file)
)
def put_settings(c: Call) -> object:
    """Merges the given values into settings.json (null: back to the default), checks the result exactly as a
    start would, then swaps the file in atomically. Settings are read at start-up: `restart_required` names the
    given ones whose value differs from the running server's."""
    running = c.services.settings
    path = running.settings_path
    if widening := sorted(WIDENING_SETTINGS & set(c.body)):
        _owner_proven(c, f"changing {' and '.join(widening)} (who can reach this server)")
    saved, upcoming = save_settings(running.data_dir, c.body)  # InvalidInput etc.: the file is left as it was
    changed = [name for name in c.body if getattr(upcoming, name) != getattr(running, name)]
    return {"saved": saved, "file": str(path), "restart_required": changed}


@endpoint("GET", "/api/tokens", "People with a token (owner only)", ref("People"), **TOKENS)
def list_tokens(c: Call) -> object:
    return {"people": [{"name": p.name, "created": p.created} for p in c.services.tokens.people()]}


@endpoint(
    "POST",
    "/api/tokens",
    "A token for a person (owner only)",
    ref("IssuedToken"),
    body=ref("NewToken"),
    status=201,
    **TOKENS,
)
def add_token(c: Call) -> object:
    """The token is shown in this answer only; Hivenote keeps its digest. Notes written with it carry the name."""
    _owner_proven(c, "making a token (it would open this server once auth is back on)")
    name = c.body["name"]
    token = c.services.tokens.add(name)
    return {"name": name, "token": token, "note": "Shown once: copy it now. Hivenote keeps only its digest."}


@endpoint("DELETE", "/api/tokens/{name}", "Revoke a person's token (owner only)", ref("Revoked"), **TOKENS)
def revoke_token(c: Call) -> object:
    c.services.tokens.revoke(c.path["name"])
    return {"revoked": c.path["name"]}


# -- the dashboard's session -----------------------------------------------------------------------------------------

SESSION_REFUSED = (
    "This sign-in link was used already or is too old. On this machine, open the dashboard again from Hivenote's "
    "tray (Open dashboard) or with `hivenote open`. From another machine, paste a token: the owner runs "
    "`hivenote token add <your name>` and gives it to you."
)


@endpoint(
    "POST",
    "/api/session/code",
    "A one-time code that signs a dashboard in (owner's token only; good once, for two minutes)",
    obj({"code": TEXT, "expires_in": {"type": "number"}}),
    status=201,
    owner_only=True,
    store=False,
    blocking=False,
)
def session_code(c: Call) -> object:
    """What the tray and `hivenote open` ask before they open the dashboard: the page they open at `/?code=...`
    trades it for the sign-in cookie (POST /api/session). Not with the cookie itself: a page cannot make codes that
    would outlive it."""
    if getattr(c.request.state, "signed_in_by", "") == "cookie":
        raise Forbidden("A one-time code is made with the owner's token only (`Authorization: Bearer`).")
    _owner_proven(c, "a sign-in code")
    return {"code": c.services.sign_in.code(), "expires_in": CODE_LIFETIME_S}


@endpoint(
    "POST",
    "/api/session",
    "Trade a one-time code for the dashboard's sign-in cookie (no token needed)",
    obj({"person": TEXT}),
    body=obj({"code": TEXT}),
    public=True,
    owner_only=True,  # documents the 403; the guard sets no person on an open path, so the route's own check passes
    store=False,
    blocking=False,  # Tokens is read on the event loop, like the token routes
)
def session(c: Call) -> object:
    """Answers only the dashboard's own request (`X-Hivenote-Client: hivenote-dashboard/...`, a custom header a page
    of another origin cannot send without a CORS preflight this server never grants, not marked cross-origin by the
    browser; the guard refuses foreign Origins) with a code this server made in the last two minutes and has not
    taken before. The answer sets an HttpOnly, SameSite=Strict cookie that stands for the owner on /api and
    /desktop. Nothing here looks at the caller's address: the code is the proof."""
    if not from_the_dashboard(c.request.headers) or not c.services.sign_in.redeem(c.body["code"]):
        raise Forbidden(SESSION_REFUSED)
    response = JSONResponse({"person": ""})
    # With auth off too: there the cookie is what shows the owner's dashboard may widen who reaches the server.
    server = c.request.scope.get("server") or ("", c.services.settings.port)
    name = cookie_name(int(server[1] or c.services.settings.port))
    cookie = c.services.sign_in.cookie()
    response.headers["Set-Cookie"] = cookie_header(name, cookie, COOKIE_LIFETIME_S)
    response.headers[KEY_HEADER] = c.services.sign_in.key(cookie)  # kept by the page, per origin (session.py)
    return response


@endpoint("GET", "/api/openapi.json", "This document", ref("OpenAPI"), store=False, blocking=False)
def openapi(c: Call) -> object:
    return openapi_document(ENDPOINTS, __version__)


ENDPOINTS: tuple[Endpoint, ...] = (
    HEALTH,
    openapi,
    list_notes,
    create_note,
    get_note,
    update_note,
    trash_note,
    restore_note,
    purge_note,
    note_history,
    read_graph,
    search_graph,
    open_entity,
    create_entities,
    delete_entity,
    add_observations,
    delete_observations,
    create_relations,
    delete_relations,
    agents,
    status,
    connect_clients,
    connect_snippet,
    export,
    import_file,
    get_settings,
    put_settings,
    list_tokens,
    add_token,
    revoke_token,
    session_code,
    session,
)


def rest_routes(services: Services) -> list[BaseRoute]:
    """Every row of the table with a handler, as a Starlette route (health is served by app.py itself)."""
    return [route(ep, services) for ep in ENDPOINTS if ep.handler is not None]
