"""CLI commands on notes and the knowledge graph (`remember`, `search`, `list`, `get`, `update`, `forget`,
`restore`, `purge`, `history`, `graph`): thin adapters over the same use-cases as MCP and REST."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.hlc import wall_ms
from ..core.listing import Filters
from ..core.model import Note
from ..graph import Graph, graph_json
from ..meaning import open_index
from ..notebook import UNSET, Notebook
from ..render import ago, annotation, imported_text, note_line, note_text, window_json, window_line
from ..settings import load_settings

if TYPE_CHECKING:
    from .context import Context


def _filters(args: argparse.Namespace, notebook: Notebook, *, trashed: bool = False) -> Filters:
    return Filters(
        kind=args.kind,
        project=args.project,
        tag=getattr(args, "tag", None),
        agent=getattr(args, "agent", None),
        person=getattr(args, "person", None),
        trashed=trashed,
        window=notebook.window(args.since, args.until),
    )


def _with_window(text: str, filters: Filters, now: int) -> str:
    """The window a list or search used, said first."""
    return text if filters.window is None else f"{window_line(filters.window, now)}\n{text}"


def _read_body(args: argparse.Namespace) -> str | None:
    if getattr(args, "body_file", None):
        source = args.body_file
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    body: str | None = args.body
    return body


def cmd_remember(ctx: Context) -> int:
    a = ctx.args
    with ctx.notebook() as notebook:
        result = notebook.remember(
            kind=a.kind,
            title=a.title,
            body=_read_body(a) or "",
            tags=a.tag or [],
            project=a.project,
            replaces=a.replaces,
        )
    new = result.note.id
    lines = [f"Remembered {note_line(result.note, wall_ms())}"]
    lines += [
        f"Looks like {n.id} {n.title!r}. If the new note replaces it: hivenote update {new} --replaces {n.id} "
        f"(the older one stays, marked replaced). If it is the same fact: update {n.id} instead and forget {new}."
        for n in result.similar
        if n.id != result.note.replaces
    ]
    ctx.emit({"note": result.note.to_json(), "similar": [n.to_json() for n in result.similar]}, "\n".join(lines))
    return 0


def cmd_search(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        from ..meaning.both import ModelSettings

        settings = load_settings(data_dir=ctx.data_dir)
        # The indexes from the server's cache files, or built here; never a download from a command.
        index = open_index(ctx.data_dir, settings.meaning, ModelSettings(settings.model_dir, download=False))
        if index is not None:
            index.catch_up(store)
        notebook = Notebook(store, meaning=index)
        filters = _filters(a, notebook, trashed=a.trash)
        result = notebook.search(a.query, filters, a.limit)
    now = wall_ms()

    def line(note: Note) -> str:
        return note_line(note, now) + annotation(note.id, result.reasons, result.replaced_by)

    if result.hits:
        more = (
            f"\n({len(result.hits)} of {result.total} shown; use --limit for more)"
            if result.total > len(result.hits)
            else ""
        )
        text = "\n".join(line(n) for n in result.hits) + more
    else:
        text = "No matching notes."
        if result.near:
            text += " Closest matches:\n" + "\n".join(line(n) for n in result.near)
    ctx.emit(
        {
            "results": [n.to_json() for n in result.hits],
            "near": [n.to_json() for n in result.near],
            "total": result.total,
            "reasons": result.reasons,
            "replaced_by": result.replaced_by,
            "window": window_json(filters.window, now),
        },
        _with_window(text, filters, now),
    )
    return 0


def cmd_list(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        notebook = Notebook(store)
        filters = _filters(a, notebook, trashed=a.trash)
        notes, total = notebook.list(filters, limit=a.limit, offset=a.offset)
    now = wall_ms()
    empty = "No notes in that time." if filters.window else "The trash is empty." if a.trash else "No notes yet."
    text = "\n".join(note_line(n, now) for n in notes) or empty
    if total > a.offset + len(notes):
        text += f"\n({len(notes)} of {total} shown; use --limit/--offset for more)"
    doc = {"results": [n.to_json() for n in notes], "total": total, "window": window_json(filters.window, now)}
    ctx.emit(doc, _with_window(text, filters, now))
    return 0


def cmd_get(ctx: Context) -> int:
    with ctx.store(write=False) as store:
        note = Notebook(store).get(ctx.args.id)
    ctx.emit(note.to_json(), note_text(note, wall_ms()))
    return 0


def cmd_update(ctx: Context) -> int:
    a = ctx.args
    body = _read_body(a)
    tags: Any = UNSET
    if a.no_tags:
        tags = []
    elif a.tag is not None:
        tags = a.tag
    with ctx.notebook() as notebook:
        note = notebook.update(
            a.id,
            kind=a.kind if a.kind is not None else UNSET,
            title=a.title if a.title is not None else UNSET,
            body=body if body is not None else UNSET,
            tags=tags,
            project=a.project if a.project is not None else UNSET,
            replaces=UNSET if a.replaces is None else (a.replaces or None),
        )
    ctx.emit(note.to_json(), f"Updated {note_line(note, wall_ms())}")
    return 0


def flag_command(verb: str, done: str) -> Callable[[Context], int]:
    def run(ctx: Context) -> int:
        with ctx.notebook() as notebook:
            note = getattr(notebook, verb)(ctx.args.id)
        ctx.emit(note.to_json(), f"{done} {note_line(note, wall_ms())}")
        return 0

    return run


def cmd_purge(ctx: Context) -> int:
    with ctx.notebook() as notebook:
        note_id = notebook.purge(ctx.args.id)
    ctx.emit({"purged": note_id}, f"Purged {note_id} for good.")
    return 0


def cmd_history(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        notebook = Notebook(store)
        window = notebook.window(a.since, a.until)
        versions = notebook.history(a.id, window)
    now = wall_ms()
    lines = [] if window is None else [f"Versions made {window.describe(now_ms=now)} (local time):"]
    for v in versions:
        who = " · ".join(x for x in (v.by.agent, v.by.person, v.node) if x)
        changed = ", ".join(f"{k}={json.dumps(val, ensure_ascii=False)[:60]}" for k, val in v.fields.items())
        lines.append(f"{ago(v.at, now):>16}  {v.action:<8} {who}  {changed}{imported_text(v.by, now)}")
    if window is not None and not versions:
        lines.append("None in that time.")
    ctx.emit([v.to_json() for v in versions], "\n".join(lines))
    return 0


def cmd_graph(ctx: Context) -> int:
    a = ctx.args
    with ctx.store(write=False) as store:
        graph = Graph(store)
        if a.graph_command == "open":
            entities, relations = graph.open_nodes(a.names)
            ctx.emit(graph_json(entities, relations), json.dumps(graph_json(entities, relations), indent=2))
            return 0
        page = graph.page(
            a.query if a.graph_command == "search" else None,
            limit=a.limit,
            offset=a.offset,
            names_only=a.names_only,
        )
    doc = page.to_json()
    if a.names_only:
        text = "\n".join(doc["names"]) + f"\n({len(doc['names'])} of {page.total_entities} entities)"
    else:
        text = json.dumps(doc, ensure_ascii=False, indent=2)
    ctx.emit(doc, text)
    return 0
