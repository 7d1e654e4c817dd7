"""The REST machinery under rest.py's table: how an endpoint is declared (`Endpoint`), the JSON schemas the rows
name, the checks of query strings and bodies against them, and the Starlette routes and OpenAPI 3.1 document built
from the same rows, so what is served, what is checked and what is documented cannot drift apart."""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..agents import PEOPLE_NOT_AGENTS, AgentTracker, author_for
from ..core.errors import Forbidden, InvalidInput
from ..core.listing import MAX_LIMIT
from ..core.model import NOTE_KINDS, Author
from ..notebook import MAX_PROJECT, MAX_QUERY, MAX_TAG, MAX_TITLE
from ..settings import SETTINGS_HELP, SYNC_SETTINGS, Settings
from ..tokens import _NAME as _TOKEN_NAME  # the one rule for a person's name (Tokens.add checks it)

if TYPE_CHECKING:
    from .services import Services

log = logging.getLogger(__name__)

Schema = dict[str, Any]
REF = "#/components/schemas/"
CLIENT_HEADER = "x-hivenote-client"  # `<name>/<version>`, e.g. hivenote-dashboard/0.1.0 or hivenote-cli/0.1.0
FORBIDDEN = "Only the owner (this Hivenote's own token) manages tokens and settings; ask them to do it."


@dataclass(frozen=True)
class Call:
    """What a handler gets: the services, the request, who is calling, and its checked inputs."""

    services: Services
    request: Request
    author: Author
    person: str  # the token's owner; "" for this Hivenote's own (default) token, or when auth is off
    path: Mapping[str, str]
    query: dict[str, Any]
    body: Any  # the checked JSON body, the raw bytes of a file upload, or None


Handler = Callable[[Call], object]  # returns JSON data (sent with the row's status) or a ready Response


@dataclass(frozen=True)
class Endpoint:
    """One REST operation, declared once: its route and its OpenAPI operation are both built from it."""

    method: str
    path: str  # Starlette form: `{name}`, or `{name:path}` for a value that may hold "/" (sent as %2F)
    summary: str
    response: Schema
    handler: Handler | None = None  # None: served by app.py itself, documented here so the document is complete
    name: str = ""  # operationId (the handler's name)
    query: Schema | None = None  # an object schema over the query parameters
    body: Schema | None = None  # a JSON body
    file_body: bool = False  # the raw bytes of a file (import)
    status: int = 200
    also: Mapping[str, Schema] = field(default_factory=dict)  # other media types of the response (downloads)
    owner_only: bool = False
    public: bool = False  # no token needed (the guard lets it through)
    store: bool = True  # touches the store, so it may fail with 503
    blocking: bool = True  # runs in a worker thread (store reads, fsynced writes); False: on the event loop
    not_found: bool = False  # may answer 404 without path parameters (a body naming a missing entity)

    @property
    def openapi_path(self) -> str:
        return re.sub(r"\{(\w+):\w+\}", r"{\1}", self.path)

    @property
    def path_names(self) -> list[str]:
        return re.findall(r"\{(\w+)", self.path)


def endpoint(method: str, path: str, summary: str, response: Schema, **options: Any) -> Callable[[Handler], Endpoint]:
    """Declare the decorated handler as an endpoint (the decorated name then holds the `Endpoint`)."""

    def declare(handler: Handler) -> Endpoint:
        name = getattr(handler, "__name__", "")
        return Endpoint(method, path, summary, response, handler, name, **options)

    return declare


# -- schemas --------------------------------------------------------------------------------------------------------


def ref(name: str) -> Schema:
    return {"$ref": REF + name}


_TEXT_OR_NULL: Schema = {"type": ["string", "null"]}
_OBJECT_OR_NULL: Schema = {"type": ["object", "null"]}
_WALL_OR_NULL: Schema = {"type": ["integer", "null"]}


def obj(properties: dict[str, Schema], required: Sequence[str] | None = None) -> Schema:
    """A closed object (unknown fields refused on input, flagged by response checks); all fields required unless
    `required` names some."""
    needed = list(properties) if required is None else list(required)
    return {"type": "object", "properties": properties, "required": needed, "additionalProperties": False}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def described(schema: Schema, description: str) -> Schema:
    return {**schema, "description": description}


def mapping(values: Schema) -> Schema:
    return {"type": "object", "additionalProperties": values}


TEXT: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
TEXTS = array(TEXT)
LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": f"At most this many (1-{MAX_LIMIT})"}
OFFSET = {"type": "integer", "minimum": 0, "description": "Skip this many first"}
PAGE = {"limit": {"type": "integer", "minimum": 1}, "offset": OFFSET, "names_only": BOOLEAN}
KIND = {"enum": list(NOTE_KINDS)}
FORMAT = {"enum": ["notebook", "memory-jsonl"]}
PROJECT = described({"type": ["string", "null"]}, "The codebase's name, like 'shop-api' (never a file path)")
NOTE_FIELDS = {"kind": KIND, "title": TEXT, "body": TEXT, "tags": TEXTS, "project": PROJECT}
# What a write must respect (a stored note may hold anything another machine wrote, so `Note` says less). The
# notebook checks more than a schema can say: no control characters, a title that is not blank, a body of at most
# 64 KiB of UTF-8, a project that is not a file path.
REPLACES = described({"type": ["string", "null"]}, "The id of the note this one replaces (a superseded decision)")
NOTE_INPUT = NOTE_FIELDS | {
    "replaces": REPLACES,
    "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE},
    "tags": array({"type": "string", "minLength": 1, "maxLength": MAX_TAG}),
    "project": {**PROJECT, "maxLength": MAX_PROJECT},
}
QUERY = {"type": "string", "maxLength": MAX_QUERY}
NOTE, ENTITY, RELATION = ref("Note"), ref("Entity"), ref("Relation")
_BY = {"agent": described(TEXT, "The product, e.g. cursor"), "client": TEXT, "person": TEXT}
_BY |= {
    "imported": described(
        obj({"by": obj({"agent": TEXT, "client": TEXT, "person": TEXT}, []), "at": INTEGER, "file": TEXT}),
        "Set when the op came in with a notebook export: who imported it, when, from which file (the op's own "
        "author and time are the export's)",
    )
}
_WINDOW_TEXT = (
    "'yesterday', 'today', 'monday', 'last week', 'this month', '3 days ago', '2h', '7d', or an ISO 8601 date or "
    "date-time; read in the server's local time zone"
)
SINCE = described(TEXT, f"Only what was created or changed at or after this time: {_WINDOW_TEXT}")
UNTIL = described(TEXT, "Only what was created or changed before this time (a day, week or month: before its end)")
WINDOW = described(
    {"anyOf": [obj({"since": _WALL_OR_NULL, "until": _WALL_OR_NULL, "text": TEXT}), {"type": "null"}]},
    "The time window used (epoch ms; `text` says it in words, e.g. 'since Mon 1 Dec 00:00'), null without one",
)
_SETTING_TYPES = {"str": TEXT, "int": INTEGER, "bool": BOOLEAN, "tuple[str, ...]": TEXTS}
# Sync settings change only through `hivenote sync ...`, which moves shards and checks the bucket first.
SETTABLE = {
    f.name: _SETTING_TYPES[str(f.type)]
    for f in fields(Settings)
    if f.name in SETTINGS_HELP and f.name not in SYNC_SETTINGS
}
# Settings.check's simple bounds, so a client can see them (the rest, like max_import_bytes >= max_body_bytes, it
# explains when refused).
_SETTING_BOUNDS = {
    "port": {"minimum": 1, "maximum": 65535},
    "max_body_bytes": {"minimum": 128 << 10},
    "max_import_bytes": {"minimum": 128 << 10},
}
TOKEN_NAME: Schema = {"type": "string", "pattern": _TOKEN_NAME.pattern}
_SHARD = {"ops": INTEGER, "bad_lines": INTEGER, "unknown_ops": INTEGER, "torn_tail_bytes": INTEGER}
_SHARD |= {"unreadable": described({"type": ["string", "null"]}, "Why it cannot be read now (skipped until it can)")}
_LISTEN = {"host": TEXT, "port": INTEGER, "shared": BOOLEAN, "urls": described(TEXTS, "Where teammates open it")}
_WALL = {"type": ["integer", "null"]}
_TRANSPORT = {"name": TEXT, "kind": {"enum": ["folder", "s3", "peer"]}, "target": TEXT, "last_ok": _WALL}
_TRANSPORT |= {"last_error": _WALL, "error": TEXT, "failing": BOOLEAN, "bytes_in": INTEGER, "bytes_out": INTEGER}
_TRANSPORT |= {"detail": {"type": "object"}}
_DISK_KINDS = ["disk_full", "read_only", "no_permission", "io_error", "write_failed", "log_missing", "lock_lost"]
_DISK_PROBLEM = obj({"kind": {"enum": _DISK_KINDS}, "message": TEXT, "since": _WALL})
_COUNTS = dict.fromkeys(("notes", "trashed", "entities", "relations"), INTEGER)
_SNIPPET = {"client": TEXT, "title": TEXT, "format": {"enum": ["json", "toml", "yaml", "shell"]}, "text": TEXT}
_AGENT = {"agent": TEXT, "person": TEXT, "client": TEXT, "first_seen": INTEGER, "last_seen": INTEGER}

COMPONENTS: dict[str, Schema] = {
    "Error": obj({"error": obj({"code": TEXT, "message": described(TEXT, "What happened and what to do")})}),
    "Author": obj(_BY, []),
    "Writer": obj({**_BY, "node": described(TEXT, "The machine (node id) it was written on")}, ["node"]),
    "Note": obj(
        {**NOTE_FIELDS, "id": TEXT, "created": INTEGER, "updated": INTEGER}
        | {"created_by": ref("Writer"), "updated_by": ref("Writer"), "trashed": BOOLEAN, "replaces": REPLACES}
    ),
    "NoteList": obj(
        {"results": array(NOTE), "near": array(NOTE), "total": INTEGER}
        | {"reasons": described(mapping(TEXT), "Why a note that is not an exact match is listed, by id")}
        | {"replaced_by": described(mapping(TEXT), "A listed note -> the live note that replaces it")}
        | {"window": WINDOW}
    ),
    "Version": obj(
        {"at": INTEGER, "node": TEXT, "seq": INTEGER, "by": ref("Author")}
        | {"action": {"enum": ["set", "trash", "restore", "purge"]}, "fields": {"type": "object"}}
    ),
    "Entity": obj({"name": TEXT, "entityType": TEXT, "observations": TEXTS}),
    "Relation": obj({"from": TEXT, "to": TEXT, "relationType": TEXT}),
    "Graph": obj({"entities": array(ENTITY), "relations": array(RELATION)}),
    "GraphPage": obj(
        {"entities": array(ENTITY), "names": TEXTS, "relations": array(RELATION), "total": INTEGER},
        ["relations", "total"],
    ),
    "Agent": obj({**_AGENT, "requests": INTEGER, "last_tool": TEXT, "online": BOOLEAN}),
    "Status": obj(
        {"version": TEXT, "node": TEXT, "data_dir": TEXT, "uptime_s": {"type": "number"}, "counts": obj(_COUNTS)}
        | {"nodes": mapping(obj({"ops": INTEGER, "last_op": INTEGER, "lag_ms": INTEGER}))}
        | {"clock_skew_ms": mapping(INTEGER), "fsyncs": INTEGER, "agents_online": INTEGER, "auth": BOOLEAN}
        | {"shards": mapping(obj({**_SHARD, "problems": array(obj({"line": INTEGER, "reason": TEXT}))}))}
        | {"listen": obj(_LISTEN), "sync": obj({"log_dir": TEXT, "transports": array(obj(_TRANSPORT))})}
        | {"storage": obj({"ok": BOOLEAN, "problem": {"anyOf": [_DISK_PROBLEM, {"type": "null"}]}})}
        | {"desktop": described(BOOLEAN, "Served by the tray app (its /desktop routes exist)")}
        | {"meaning": ref("MeaningStatus")}
    ),
    "MeaningStatus": obj(
        {"on": BOOLEAN, "answering": described(_TEXT_OR_NULL, "static, sentence, or null while warming")}
        | {"summary": described(TEXT, "One line for a person: which model answers, the sentence index's progress")}
        | {"static": described(_OBJECT_OR_NULL, "The static model's index: notes, pending, warm, problem")}
        | {"sentence": described(_OBJECT_OR_NULL, "The sentence model's index, with its phase and download bytes")}
    ),
    "Snippet": obj(
        {**_SNIPPET, "where": mapping(TEXT), "steps": TEXTS, "url": TEXT}
        | {"note": described({"type": ["string", "null"]}, "Set when the token could not be filled in")}
    ),
    "NotebookExport": obj(
        {"format": {"const": "hivenote-notebook"}, "version": INTEGER, "exported_at": INTEGER, "node": TEXT}
        | {"notes": array(NOTE), "graph": ref("Graph")}
    ),
    "ImportSummary": obj(
        {"format": FORMAT, "added": mapping(INTEGER), "skipped": mapping(INTEGER)}
        | {"rejected": array(obj({"line": INTEGER, "reason": TEXT}))}
    ),
    "Settings": obj({"values": obj(SETTABLE), "help": obj(dict.fromkeys(SETTABLE, TEXT)), "file": TEXT}),
    "SettingsChange": obj(
        {
            k: described(
                {**v, **_SETTING_BOUNDS.get(k, {}), "type": [v["type"], "null"]},
                f"{SETTINGS_HELP[k]} (null: back to the default)",
            )
            for k, v in SETTABLE.items()
        },
        [],
    ),
    "Health": obj(
        {"ok": BOOLEAN, "version": TEXT, "proof": described(TEXT, "With `challenge`: this data dir's answer to it")},
        ["ok", "version"],
    ),
    "Ok": obj({"ok": {"const": True}}),
    "NewNote": obj(NOTE_INPUT, ["kind", "title"]),
    "NoteChange": obj(NOTE_INPUT, []) | {"minProperties": 1},
    "Remembered": obj({"note": NOTE, "similar": described(array(NOTE), "Live notes that look like the same fact")}),
    "Purged": obj({"purged": TEXT}),
    "History": obj({"versions": array(ref("Version")), "window": WINDOW}),
    "Entities": obj({"entities": array(ENTITY)}),
    "Relations": obj({"relations": array(RELATION)}),
    "NewObservations": obj({"observations": array(obj({"entityName": TEXT, "contents": TEXTS}))}),
    "AddedObservations": obj({"results": array(obj({"entityName": TEXT, "addedObservations": TEXTS}))}),
    "Deletions": obj({"deletions": array(obj({"entityName": TEXT, "observations": TEXTS}))}),
    "Agents": obj({"agents": array(ref("Agent")), "machine": obj({"node": TEXT, "host": TEXT})}),
    "Clients": obj({"clients": array(obj({"id": TEXT, "title": TEXT})), "url": TEXT}),
    "SettingsSaved": obj({"saved": {"type": "object"}, "file": TEXT, "restart_required": TEXTS}),
    "People": obj({"people": array(obj({"name": TEXT, "created": INTEGER}))}),
    "NewToken": obj({"name": described(TOKEN_NAME, "The person's name; their notes carry it")}),
    "IssuedToken": obj({"name": TEXT, "token": described(TEXT, "Shown this once"), "note": TEXT}),
    "Revoked": obj({"revoked": TEXT}),
    "OpenAPI": {"type": "object"},
}

QUERIES: dict[str, Schema] = {
    "notes": obj(
        {"q": described(QUERY, "Words that must all match (omit to list, most recently changed first)"), "kind": KIND}
        | dict.fromkeys(("project", "tag", "agent", "person", "node"), TEXT)
        | {"trashed": described(BOOLEAN, "true: only the trash"), "limit": LIMIT, "offset": OFFSET}
        | {"since": SINCE, "until": UNTIL},
        [],
    ),
    "history": obj({"since": SINCE, "until": UNTIL}, []),
    "health": obj(
        {
            "challenge": described(
                {"type": "string", "pattern": "^[0-9a-f]{32,128}$"},
                "Random hex; the answer's `proof` shows this server is the Hivenote of the asker's data dir",
            )
        },
        [],
    ),
    "page": obj(PAGE, []),
    "search": obj({"q": TEXT, **PAGE}, ["q"]),
    "connect": obj({"graph": described(BOOLEAN, "for the official memory tools at /mcp/graph")}, []),
    "export": obj({"format": FORMAT}, []),
    "import": obj(
        {"format": FORMAT, "skip_bad": described(BOOLEAN, "import the good lines, list the bad")}
        | {"file": described(TEXT, "The file's name, kept in each imported note's history")},
        [],
    ),
}

# -- checking requests ----------------------------------------------------------------------------------------------

_TYPE_NAMES = {
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_PYTHON = {"string": str, "boolean": bool, "array": list, "object": dict, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return type(value) in (int, float)
    return isinstance(value, _PYTHON[kind])


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def resolve(schema: Schema) -> Schema:
    while "$ref" in schema:
        schema = COMPONENTS[schema["$ref"].removeprefix(REF)]
    return schema


def _types(schema: Schema) -> list[str]:
    kinds = schema.get("type", [])
    return [kinds] if isinstance(kinds, str) else list(kinds)


def check(schema: Schema, value: Any, where: str = "", root: str = "the body") -> None:
    """Raise `InvalidInput` naming the field unless `value` fits `schema` (the subset of JSON Schema used here)."""
    schema = resolve(schema)
    label = where or root
    kinds = _types(schema)
    if kinds and not any(_is(value, k) for k in kinds):
        raise InvalidInput(f"{label} must be {' or '.join(_TYPE_NAMES[k] for k in kinds)} (got {_show(value)})")
    if "const" in schema and value != schema["const"]:
        raise InvalidInput(f"{label} must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidInput(f"{label} must be one of {', '.join(map(str, schema['enum']))} (got {_show(value)})")
    if type(value) is int and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        low, high = schema.get("minimum"), schema.get("maximum")
        bounds = f"at least {low}" if high is None else f"at most {high}" if low is None else f"from {low} to {high}"
        raise InvalidInput(f"{label} must be {bounds} (got {value})")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check(schema["items"], item, f"{label}[{i}]", root)
    if isinstance(value, dict) and "properties" in schema:
        props: dict[str, Schema] = schema["properties"]
        unknown = [name for name in value if name not in props]
        if unknown and schema.get("additionalProperties") is False:
            known = ", ".join(props) or "none"
            raise InvalidInput(f"unknown field {unknown[0]!r} in {label}; the fields it takes are: {known}")
        missing = [name for name in schema.get("required", ()) if name not in value]
        if missing:
            raise InvalidInput(f"{label} needs the field {missing[0]!r}")
        for name, item in value.items():
            if name in props:
                check(props[name], item, f"{where}.{name}" if where else name, root)


def parse_query(schema: Schema | None, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Query parameters typed by their schema (integers, true/false), then checked like a body."""
    schema = schema or obj({})
    props: dict[str, Schema] = schema["properties"]
    out: dict[str, Any] = {}
    for name, raw in pairs:
        if name not in props:
            raise InvalidInput(f"unknown query parameter {name!r}; this endpoint takes: {', '.join(props) or 'none'}")
        if name in out:
            raise InvalidInput(f"query parameter {name!r} is given twice; give it once")
        kinds = _types(resolve(props[name]))
        value: Any = raw
        if "integer" in kinds and re.fullmatch(r"-?\d{1,4000}", raw):  # below int()'s 4300-digit limit
            value = int(raw)
        elif "boolean" in kinds and raw in ("true", "false"):
            value = raw == "true"
        out[name] = value
    check(schema, out, root="the query")
    return out


# -- serving --------------------------------------------------------------------------------------------------------


class InvalidJson(InvalidInput):
    code = "invalid_json"


def _author(request: Request, person: str) -> Author:
    name, _, version = request.headers.get(CLIENT_HEADER, "").strip().partition("/")
    return author_for(name or None, version or None, request.headers.get("user-agent"), person)


def _track(tracker: AgentTracker, author: Author, what: str) -> None:
    if author.agent in PEOPLE_NOT_AGENTS:
        return
    try:
        tracker.record(author, what)
    except Exception:  # tracking must never break a request
        log.exception("could not record the calling client")


async def _body(ep: Endpoint, request: Request) -> Any:
    raw = await request.body()
    if ep.file_body:
        return raw
    if ep.body is None:
        if raw.strip():
            raise InvalidInput(f"{ep.method} {ep.openapi_path} takes no body; send the request without one")
        return None
    if not raw.strip():
        raise InvalidJson("the body is empty; send a JSON object (Content-Type: application/json)")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidJson(f"the body is not valid JSON ({exc}); send one JSON object") from None
    check(ep.body, value)
    return value


def route(ep: Endpoint, services: Services) -> Route:
    """The Starlette route of one row: who is calling, owner check, query and body checked, then the handler (in a
    worker thread unless the row says otherwise). Errors propagate to app.py's HivenoteError handler."""
    handler = ep.handler
    assert handler is not None, f"{ep.openapi_path} is served elsewhere"

    async def serve(request: Request) -> Response:
        person = str(getattr(request.state, "person", "") or "")
        author = _author(request, person)
        if ep.owner_only and person:
            raise Forbidden(FORBIDDEN)
        query = parse_query(ep.query, request.query_params.multi_items())
        call = Call(services, request, author, person, request.path_params, query, await _body(ep, request))
        result = await anyio.to_thread.run_sync(handler, call) if ep.blocking else handler(call)
        _track(services.tracker, author, f"{ep.method} {ep.openapi_path}")  # a refused request is no sign of life
        response = result if isinstance(result, Response) else JSONResponse(result, status_code=ep.status)
        response.headers["Cache-Control"] = "no-store"
        return response

    return Route(ep.path, serve, methods=[ep.method], name=ep.name)


# -- the OpenAPI document -------------------------------------------------------------------------------------------

_ERRORS = {
    400: "Invalid input: a bad value, an unknown field, malformed JSON (nothing was written)",
    401: "No valid bearer token",
    403: "Only the owner's token may do this; or a browser page served elsewhere (Origin) called",
    404: "No such note, entity, client or token",
    413: "The body is over the size limit (nothing was written)",
    421: "The Host header is not one of this server's names (DNS rebinding guard)",
    503: "The notebook could not be read or written (disk full, permissions, ...)",
}


def _operation(ep: Endpoint) -> Schema:
    params = [{"name": n, "in": "path", "required": True, "schema": TEXT} for n in ep.path_names]
    if ep.query:
        needed = ep.query["required"]
        params += [
            {"name": n, "in": "query", "required": n in needed, "schema": s} for n, s in ep.query["properties"].items()
        ]
    content = {media: {"schema": s} for media, s in {"application/json": ep.response, **ep.also}.items()}
    op: Schema = {
        "operationId": ep.name,
        "summary": ep.summary,
        "tags": [ep.openapi_path.split("/")[2].removesuffix(".json")],
        "responses": {str(ep.status): {"description": ep.summary, "content": content}},
    }
    doc = inspect.getdoc(ep.handler) if ep.handler else None
    if doc:
        op["description"] = doc
    if params:
        op["parameters"] = params
    if ep.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ep.body}}}
    if ep.file_body:
        raw = {"type": "string", "contentMediaType": "application/octet-stream"}
        op["requestBody"] = {"required": True, "content": {"application/octet-stream": {"schema": raw}}}
    errors = {
        400: bool(params) or ep.body is not None or ep.file_body,
        401: not ep.public,
        403: True,  # the guard refuses a foreign Origin on every route
        404: bool(ep.path_names) or ep.not_found,
        413: ep.body is not None or ep.file_body,
        421: True,  # the guard, on every route
        503: ep.store,
    }
    op["responses"] |= {str(s): {"$ref": f"#/components/responses/E{s}"} for s, applies in errors.items() if applies}
    if ep.public:
        op["security"] = []
    return op


def openapi_document(endpoints: Sequence[Endpoint], version: str) -> Schema:
    paths: dict[str, Schema] = {}
    for ep in endpoints:
        paths.setdefault(ep.openapi_path, {})[ep.method.lower()] = _operation(ep)
    error = {"application/json": {"schema": ref("Error")}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Hivenote",
            "version": version,
            "description": "The shared notebook's REST API (the dashboard's only backend). Errors are always "
            '`{"error": {"code", "message"}}`. Callers name themselves with `X-Hivenote-Client: <name>/<version>`; '
            "writes record it with the token's owner.",
        },
        "paths": paths,
        "components": {
            "schemas": COMPONENTS,
            "responses": {f"E{s}": {"description": d, "content": error} for s, d in _ERRORS.items()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
