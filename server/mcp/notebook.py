"""The notebook as MCP tools (`/mcp`): thin adapters over `notebook.Notebook`. The descriptions are product copy
for models: they carry what users of shared notebooks learned the hard way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from .. import __version__
from ..core.errors import HivenoteError
from ..core.hlc import wall_ms
from ..core.listing import Filters
from ..core.model import MAX_TEXT_BYTES, Author, Note
from ..notebook import MAX_TAGS, MAX_TITLE, UNSET, Notebook
from ..render import ago, annotation, note_line, note_text, size_words, window_json, window_line
from ..settings import DEFAULT_MAX_BODY_BYTES

Identify = Callable[[Any], Author]  # MCP request context -> who is calling (mcp.common.identify)

INSTRUCTIONS = """\
Hivenote is the shared notebook of every AI agent this person uses (Cursor, Claude, Codex, Gemini, VS Code, ...).
Connecting does not copy chat history: the other agents know nothing you did not store here, and you know \
nothing they did not store.
- Before answering questions about earlier decisions, conventions or project facts, search (brain_search).
- When a durable decision, fact, preference or project note comes up, store it (brain_remember), written so \
another agent can act on it without this conversation: what was decided, why, and what to do.
- `project` is the codebase's name, like `shop-api` - never a file path.
- Change a note with brain_update instead of adding a near-copy; brain_forget moves a note to the trash.
- To see what changed since a time, call brain_list (or brain_search) with since='yesterday' (or 'monday', \
'last week', '3 days ago', '2h', an ISO date).
Notes are for durable choices, not for chat logs or scratch work."""

Kind = Literal["fact", "decision", "preference", "project"]
ProjectArg = Annotated[
    str | None,
    Field(description="The codebase's name, like 'shop-api' (never a file path). Same name on every machine."),
]
BODY_HELP = (
    f"Why, details, and what to do. Markdown is fine. At most {size_words(MAX_TEXT_BYTES)}; a whole request past "
    f"the server's limit ({size_words(DEFAULT_MAX_BODY_BYTES)} unless its max_body_bytes setting says otherwise) is "
    "refused: split long text into several notes."
)
ReplacesArg = Annotated[
    str | None,
    Field(
        description="The id of a note this one replaces (a decision that changed): the old note stays in history, "
        "and search lists this one first."
    ),
]
SinceArg = Annotated[
    str | None,
    Field(
        description="Only notes created or changed at or after this time: 'yesterday', 'today', 'monday', "
        "'last week', 'this month', '3 days ago', '2h', '7d', or an ISO 8601 date or date-time (local time)."
    ),
]
UntilArg = Annotated[
    str | None,
    Field(
        description="Only notes created or changed before this time, same forms as since; a day, week or month "
        "counts to its end ('yesterday' = before today)."
    ),
]
AgentArg = Annotated[str | None, Field(description="Only notes written by this agent, e.g. 'cursor'.")]
PersonArg = Annotated[str | None, Field(description="Only notes written by this teammate (their token's name).")]
WINDOW_HELP = " To see what changed since a time, pass since='yesterday' (or 'monday', 'last week', '2h', an ISO date)."
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _summary(note: Note) -> dict[str, Any]:
    data = note.to_json()
    data.pop("body")
    return data


def _ok(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _error(exc: HivenoteError) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)


def build_notebook_server(notebook: Notebook, identify: Identify) -> MCPServer:
    """The `/mcp` server: six brain_* tools and the instructions every client receives on connect."""
    # log_level: MCPServer calls logging.basicConfig itself (a no-op once the root logger has a handler, as
    # `hivenote serve` and the tray give it: server/logs.py); at INFO it would log every HTTP request.
    mcp = MCPServer("hivenote", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    @mcp.tool(
        name="brain_search",
        title="Search the shared notebook",
        annotations=READ,
        description=(
            "Search the notebook every agent of this person shares. Do this before answering questions about "
            "earlier decisions, conventions, preferences or project facts: another agent (or you, in another "
            "chat) may have stored the answer. Notes where every word matches (title, body, tags, project, kind; "
            "case and accents ignored) come first; when none does, the closest notes by meaning or by some of "
            "the words, each with the reason. A note another one replaces is listed after it. Returns one line "
            "per note with its id, kind, project and who wrote it where and when; read a whole note with brain_get."
            + WINDOW_HELP
        ),
    )
    def brain_search(
        ctx: Context,
        query: Annotated[str, Field(description="Words to find, e.g. 'orm prisma' or 'deploy friday'.")],
        kind: Kind | None = None,
        project: ProjectArg = None,
        tag: str | None = None,
        limit: Annotated[int | None, Field(ge=1, le=50, description="At most this many results.")] = None,
        agent: AgentArg = None,
        person: PersonArg = None,
        since: SinceArg = None,
        until: UntilArg = None,
    ) -> CallToolResult:
        try:
            window = notebook.window(since, until)
            filters = Filters(kind=kind, project=project, tag=tag, agent=agent, person=person, window=window)
            result = notebook.search(query, filters, limit)
        except HivenoteError as exc:
            return _error(exc)
        now = wall_ms()

        def line(note: Note) -> str:
            return note_line(note, now) + annotation(note.id, result.reasons, result.replaced_by)

        if result.hits:
            lines = [line(n) for n in result.hits]
            if result.total > len(result.hits):
                lines.append(f"({len(result.hits)} of {result.total} shown; narrow the query or raise limit)")
        else:
            lines = ["No matching memories. If this is a new decision or fact, store it with brain_remember."]
            if window is not None:
                lines = [f"No matching memories created or changed {window.describe(now_ms=now)} (local time)."]
            if result.near:
                lines.append("Closest matches (the reason is in brackets):")
                lines += [line(n) for n in result.near]
        if window is not None and result.hits:
            lines.insert(0, window_line(window, now))
        structured = {
            "results": [_summary(n) for n in result.hits],
            "near": [_summary(n) for n in result.near],
            "total": result.total,
            "reasons": result.reasons,
            "replaced_by": result.replaced_by,
        }
        if window is not None:
            structured["window"] = window_json(window, now)
        return _ok("\n".join(lines), structured)

    @mcp.tool(
        name="brain_get",
        title="Read a note",
        annotations=READ,
        description=(
            "Read one note in full (body, tags, who wrote it where and when) by the id a search or list showed."
        ),
    )
    def brain_get(
        ctx: Context, id: Annotated[str, Field(description="The note's id (a unique prefix works).")]
    ) -> CallToolResult:
        try:
            note = notebook.get(id)
        except HivenoteError as exc:
            return _error(exc)
        return _ok(note_text(note, wall_ms()), note.to_json())

    @mcp.tool(
        name="brain_remember",
        title="Store a note for every agent",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
        description=(
            "Store a durable decision, fact, preference or project note in the notebook every agent of this "
            "person shares. Write it so another agent can act on it without this conversation: the title says "
            "what was decided or learned, the body says why and what to do (include names, versions, commands). "
            "Not for chat logs or scratch work. If the answer names a note that looks the same, update that one "
            "with brain_update instead of keeping both."
        ),
    )
    def brain_remember(
        ctx: Context,
        kind: Annotated[Kind, Field(description="decision, fact, preference, or project (a note about a codebase).")],
        title: Annotated[
            str, Field(description=f"One line, up to {MAX_TITLE} characters: what was decided or learned.")
        ],
        body: Annotated[str, Field(description=BODY_HELP)] = "",
        project: ProjectArg = None,
        tags: Annotated[list[str] | None, Field(description=f"Up to {MAX_TAGS} short labels.")] = None,
        replaces: ReplacesArg = None,
    ) -> CallToolResult:
        by = identify(ctx)
        try:
            result = notebook.remember(
                kind=kind, title=title, body=body, tags=tags or [], project=project, replaces=replaces, by=by
            )
        except HivenoteError as exc:
            return _error(exc)
        new = result.note.id
        lines = [f"Stored: {note_line(result.note, wall_ms())}"]
        lines += [
            f"Looks like {n.id} {n.title!r}. If the new note replaces that decision, call brain_update with "
            f"id={new} and replaces={n.id} (the older note stays in history, marked replaced, and search shows the "
            f"new one first). If it is the same fact, brain_update {n.id} instead and brain_forget {new}."
            for n in result.similar
            if n.id != result.note.replaces
        ]
        structured = {"note": result.note.to_json(), "similar": [_summary(n) for n in result.similar]}
        return _ok("\n".join(lines), structured)

    @mcp.tool(
        name="brain_update",
        title="Change a note",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
        description=(
            "Change some fields of a note; fields you leave out keep their value, and every earlier version "
            "stays in the note's history. Use it when a decision changes, instead of storing a near-copy."
        ),
    )
    def brain_update(
        ctx: Context,
        id: Annotated[str, Field(description="The note's id.")],
        title: str | None = None,
        body: Annotated[str | None, Field(description=BODY_HELP)] = None,
        kind: Kind | None = None,
        project: ProjectArg = None,
        tags: list[str] | None = None,
        replaces: Annotated[
            str | None, Field(description="The id of the note this one replaces ('' drops the link).")
        ] = None,
    ) -> CallToolResult:
        by = identify(ctx)
        given: dict[str, Any] = {
            "title": title,
            "body": body,
            "kind": kind,
            "project": project,
            "tags": tags,
        }
        link: Any = UNSET if replaces is None else (replaces or None)
        try:
            note = notebook.update(
                id, by=by, replaces=link, **{k: (UNSET if v is None else v) for k, v in given.items()}
            )
        except HivenoteError as exc:
            return _error(exc)
        return _ok(f"Updated: {note_line(note, wall_ms())}", note.to_json())

    @mcp.tool(
        name="brain_list",
        title="List recent notes",
        annotations=READ,
        description=(
            "List notes, most recently changed first, optionally of one kind, project, tag, agent or person."
            + WINDOW_HELP
        ),
    )
    def brain_list(
        ctx: Context,
        kind: Kind | None = None,
        project: ProjectArg = None,
        tag: str | None = None,
        agent: AgentArg = None,
        limit: Annotated[int, Field(ge=1, le=50)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
        person: PersonArg = None,
        since: SinceArg = None,
        until: UntilArg = None,
    ) -> CallToolResult:
        try:
            window = notebook.window(since, until)
            filters = Filters(kind=kind, project=project, tag=tag, agent=agent, person=person, window=window)
            notes, total = notebook.list(filters, limit=limit, offset=offset)
        except HivenoteError as exc:
            return _error(exc)
        now = wall_ms()
        lines = [note_line(n, now) for n in notes] or ["No notes yet."]
        if window is not None:
            lines = [window_line(window, now)] + ([note_line(n, now) for n in notes] or ["No notes in that time."])
        if total > offset + len(notes):
            lines.append(f"({len(notes)} of {total} shown; pass offset={offset + len(notes)} for more)")
        structured: dict[str, Any] = {"results": [_summary(n) for n in notes], "total": total}
        if window is not None:
            structured["window"] = window_json(window, now)
        return _ok("\n".join(lines), structured)

    @mcp.tool(
        name="brain_forget",
        title="Move a note to the trash",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
        description=(
            "Move a note to the trash, e.g. when it is wrong or no longer true. It disappears from search and "
            "lists for every agent, and can be restored from the Hivenote dashboard."
        ),
    )
    def brain_forget(ctx: Context, id: Annotated[str, Field(description="The note's id.")]) -> CallToolResult:
        by = identify(ctx)
        try:
            note = notebook.forget(id, by=by)
        except HivenoteError as exc:
            return _error(exc)
        return _ok(
            f"Moved to the trash: {note.title!r} ({note.id}); it can be restored from the dashboard "
            f"(trashed {ago(note.updated, wall_ms())}).",
            note.to_json(),
        )

    return mcp
