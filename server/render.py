"""Plain-text renderings shared by the CLI and the MCP tools: one compact line per note, relative times."""

from __future__ import annotations

from .agents import agent_name
from .core.model import Author, Note
from .core.timewindow import Window


def ago(then_ms: int, now_ms: int) -> str:
    """'just now', '5 minutes ago', '3 days ago', ... (future stamps from skewed clocks read 'just now')."""
    seconds = max(0, (now_ms - then_ms) // 1000)
    for unit, size in (
        ("year", 31_536_000),
        ("month", 2_592_000),
        ("day", 86_400),
        ("hour", 3_600),
        ("minute", 60),
    ):
        if seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "just now"


def machine(node: str) -> str:
    """The hostname part of a node id (`laptop-7f3a` -> `laptop`)."""
    head, sep, tail = node.rpartition("-")
    return head if sep and len(tail) == 4 else node


def who(by: Author, node: str) -> str:
    parts = [agent_name(by.agent)]
    if by.person:
        parts.append(by.person)
    parts.append(machine(node))
    return " · ".join(parts)


def note_line(note: Note, now_ms: int) -> str:
    """`[decision] Use Drizzle, not Prisma (shop-api) #db — id 01J... · Cursor · laptop · 3 days ago`"""
    project = f" ({note.project})" if note.project else ""
    tags = "".join(f" #{t}" for t in note.tags)
    trashed = " [trashed]" if note.trashed else ""
    return (
        f"[{note.kind}] {note.title}{project}{tags}{trashed} — id {note.id} · "
        f"{who(note.updated_by, note.updated_on)} · {ago(note.updated, now_ms)}"
    )


def annotation(note_id: str, reasons: dict[str, str], replaced_by: dict[str, str]) -> str:
    """What a search says after a note's line: why it is listed when it is no exact match ("similar meaning",
    "some words match", "replaces <id>"), and which note replaces it."""
    parts = [reasons[note_id]] if note_id in reasons else []
    if note_id in replaced_by:
        parts.append(f"replaced by {replaced_by[note_id]}")
    return f" ({'; '.join(parts)})" if parts else ""


def note_text(note: Note, now_ms: int) -> str:
    """The full note, for `get`."""
    lines = [
        f"{note.title}",
        f"id: {note.id}",
        f"kind: {note.kind}" + (" (in the trash)" if note.trashed else ""),
    ]
    if note.project:
        lines.append(f"project: {note.project}")
    if note.tags:
        lines.append("tags: " + ", ".join(note.tags))
    if note.replaces:
        lines.append(f"replaces: {note.replaces}")
    lines.append(f"created: {ago(note.created, now_ms)} by {who(note.created_by, note.created_on)}")
    if note.updated != note.created or note.updated_on != note.created_on:
        lines.append(f"updated: {ago(note.updated, now_ms)} by {who(note.updated_by, note.updated_on)}")
    if note.body:
        lines += ["", note.body]
    return "\n".join(lines)


def window_line(window: Window, now_ms: int) -> str:
    """What a windowed list or search says first: "Created or changed since Mon 1 Dec 00:00 (local time):"."""
    return f"Created or changed {window.describe(now_ms=now_ms)} (local time):"


def window_json(window: Window | None, now_ms: int) -> dict[str, object] | None:
    """The window an answer used: its bounds (epoch ms) and the same in words."""
    if window is None:
        return None
    return {**window.to_json(), "text": window.describe(now_ms=now_ms)}


def imported_text(by: Author, now_ms: int) -> str:
    """What a version's line adds when an import wrote it: " (imported by Hivenote CLI 2 hours ago from x.json)"."""
    imported = by.imported
    if imported is None:
        return ""
    importer = " · ".join(x for x in (agent_name(imported.agent), imported.person) if x)
    source = f" from {imported.file}" if imported.file else ""
    return f" (imported by {importer} {ago(imported.at, now_ms)}{source})"


def size_words(size: int) -> str:
    """1048576 -> "1 MiB", 65536 -> "64 KiB", anything else in bytes."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"
