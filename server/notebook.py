"""The notebook use-cases (remember, get, update, list, search, forget, restore, purge, history), shared by MCP,
REST, dashboard and CLI so that all of them see exactly the same results and the same errors.

Validation and decisions (limits, duplicate hints, "already trashed") happen here, against the current state,
before any op is written; the fold itself never rejects an op.
"""

from __future__ import annotations

import builtins
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .core.errors import InvalidInput, NoteNotFound
from .core.fold import State
from .core.ids import new_ulid
from .core.listing import NO_FILTERS, Filters, list_notes, note_counts
from .core.model import LOCAL_AUTHOR, NOTE_KINDS, Author, Note, Version
from .core.search import Meaning, SearchResult, search_notes, similar_notes
from .core.timewindow import Window, read_window
from .storage.store import Payload, Store

MAX_TITLE = 200
MAX_BODY_BYTES = 64 * 1024
MAX_TAGS = 20
MAX_TAG = 64
MAX_PROJECT = 100
MAX_QUERY = 1000  # a search is a few words; matching one very long word costs time quadratic in its length
MIN_ID_PREFIX = 6


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


@dataclass(frozen=True, slots=True)
class Remembered:
    note: Note
    similar: list[Note]  # live notes that look like the same fact: suggest brain_update instead


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # Unicode category Cc, and lone surrogates
_CONTROL_IN_BODY = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # tab, LF, CR allowed
# Embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): a title, tag or project holding one displays in
# another order than it is written ("invoice\u202efdp.exe" reads "invoiceexe.pdf"). Refused in those one-line fields;
# the marks right-to-left text uses (LRM, RLM, ALM) are fine, and so is a body (it may quote such text).
_DIRECTION = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _reject_controls(name: str, text: str, pattern: re.Pattern[str] = _CONTROL) -> None:
    if pattern is _CONTROL and (direction := _DIRECTION.search(text)) is not None:
        ch = direction.group()
        raise InvalidInput(
            f"{name} contains U+{ord(ch):04X} ({unicodedata.name(ch)}), a direction control that makes the {name} "
            f"display in another order than it is written; remove it (right-to-left text displays correctly without it)"
        )
    found = pattern.search(text)
    if found is None:
        return
    ch = found.group()
    if "\ud800" <= ch <= "\udfff":
        raise InvalidInput(f"{name} contains an unpaired surrogate (U+{ord(ch):04X}); send valid Unicode text")
    raise InvalidInput(
        f"{name} contains the control character U+{ord(ch):04X}; remove it"
        + (" (line breaks and tabs are fine in the body)" if pattern is _CONTROL_IN_BODY else "")
    )


def check_kind(kind: Any) -> str:
    if kind not in NOTE_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(NOTE_KINDS)} (got {kind!r})")
    return str(kind)


def check_title(title: Any) -> str:
    if not isinstance(title, str) or not title.strip():
        raise InvalidInput("title is required: one line saying what was decided or learned")
    if len(title) > MAX_TITLE:
        raise InvalidInput(f"title is {len(title)} characters; keep it to {MAX_TITLE} and put the details in the body")
    _reject_controls("title", title)
    return title


def check_body(body: Any) -> str:
    if not isinstance(body, str):
        raise InvalidInput("body must be text")
    _reject_controls("body", body, _CONTROL_IN_BODY)
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidInput(
            f"body is {size} bytes; the limit is {MAX_BODY_BYTES} (64 KiB). "
            "Store the decision and its reasons, not whole files or logs."
        )
    return body


def check_tags(tags: Any) -> list[str]:
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidInput("tags must be a list of short labels")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip():
            raise InvalidInput("each tag must be a non-empty label")
        if len(tag) > MAX_TAG:
            raise InvalidInput(f"tag {tag[:20]!r}... is {len(tag)} characters; keep tags to {MAX_TAG}")
        _reject_controls("tag", tag)
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"{len(out)} tags given; a note takes at most {MAX_TAGS}")
    return out


_DRIVE = re.compile(r"^[A-Za-z]:")


def check_project(project: Any) -> str | None:
    """A project is the codebase's name (`shop-api`), never a file path."""
    if project is None:
        return None
    if not isinstance(project, str):
        raise InvalidInput("project must be the codebase's name, like 'shop-api'")
    if len(project) > MAX_PROJECT:  # before the blank check: a blank name that long is refused too
        raise InvalidInput(f"project name is {len(project)} characters; keep it to {MAX_PROJECT}")
    if not project.strip():
        return None
    looks_like_path = (
        "/" in project or "\\" in project or project.startswith(("~", ".")) or _DRIVE.match(project) is not None
    )
    if looks_like_path:
        name = re.split(r"[\\/]+", project.rstrip("/\\"))[-1].lstrip("~.") or "shop-api"
        raise InvalidInput(
            f"project must be the codebase's name, not a file path: use {name!r} instead of {project!r}. "
            "The same name lets every agent on every machine find the notes."
        )
    _reject_controls("project", project)
    return project


class Notebook:
    """Notes on top of a `Store`. Each write is made as its `by`: the server passes the caller (MCP clientInfo,
    User-Agent, token owner) per request; without one, as the notebook's own `author` (the CLI's, or LOCAL_AUTHOR)."""

    def __init__(
        self,
        store: Store,
        *,
        author: Author = LOCAL_AUTHOR,
        random_bytes: Callable[[int], bytes] = os.urandom,
        meaning: Meaning | None = None,
    ) -> None:
        self.store = store
        self.author = author
        self._random = random_bytes
        self.meaning = meaning  # a meaning index (hivenote.server.meaning) when meaning search is on

    # -- reads --------------------------------------------------------------------------------------

    def _resolve(self, state: State, note_id: str) -> Note:
        note = state.note(note_id) if isinstance(note_id, str) else None
        if note is not None:
            return note
        if isinstance(note_id, str) and len(note_id) >= MIN_ID_PREFIX:
            prefix = note_id.upper()
            if len(prefix) >= state.longest_note_id:  # a whole id (typed in lower case, or none held): no scan
                found = [n] if (n := state.note(prefix)) is not None else []
            else:  # a scan of every id: a note's short id is typed by a person now and then
                found = [n for k in state.notes if k.startswith(prefix) and (n := state.note(k)) is not None]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise NoteNotFound(note_id, f"{len(found)} notes start with it; give more characters.")
        raise NoteNotFound(str(note_id))

    def get(self, note_id: str) -> Note:
        with self.store.reading() as state:
            return self._resolve(state, note_id)

    def window(self, since: str | None = None, until: str | None = None) -> Window | None:
        """The time window `since` and `until` name ("yesterday", "last week", "3 days ago", "2h", "monday", an ISO
        date or date-time), read now in the machine's local time zone; None when neither is given. Raises
        InvalidInput (listing the forms it reads) for a value it cannot read."""
        return read_window(since, until, now_ms=self.store.now_ms())

    def history(self, note_id: str, window: Window | None = None) -> list[Version]:
        """The note's versions, oldest first (those made in `window` when one is given)."""
        with self.store.reading() as state:
            note = self._resolve(state, note_id)
            versions = state.history(note.id)
        return versions if window is None else [v for v in versions if window.contains(v.at)]

    def search(self, query: str, filters: Filters = NO_FILTERS, limit: int | None = None) -> SearchResult:
        if limit is not None and limit < 1:
            raise InvalidInput("limit must be at least 1")
        if len(query) > MAX_QUERY:
            raise InvalidInput(f"the query is {len(query)} characters; search with a few words (at most {MAX_QUERY})")
        with self.store.reading() as state:
            return search_notes(state, query, filters, limit, self.meaning)

    def list(
        self, filters: Filters = NO_FILTERS, *, limit: int | None = None, offset: int = 0
    ) -> tuple[builtins.list[Note], int]:
        if limit is not None and limit < 1:
            raise InvalidInput("limit must be at least 1")
        if offset < 0:
            raise InvalidInput("offset must not be negative")
        with self.store.reading() as state:
            return list_notes(state, filters, limit=limit, offset=offset)

    def counts(self) -> dict[str, int]:
        with self.store.reading() as state:
            notes = note_counts(state)
            entities, relations = state.graph_counts()
            return {"notes": notes[False], "trashed": notes[True], "entities": entities, "relations": relations}

    # -- writes -------------------------------------------------------------------------------------

    def remember(
        self,
        *,
        kind: str,
        title: str,
        body: str = "",
        tags: Sequence[str] = (),
        project: str | None = None,
        replaces: str | None = None,
        by: Author | None = None,
    ) -> Remembered:
        fields: dict[str, Any] = {
            "kind": check_kind(kind),
            "title": check_title(title),
            "body": check_body(body),
            "tags": check_tags(tags),
            "project": check_project(project),
        }
        note_id = new_ulid(self.store.now_ms(), self._random(10))
        similar: list[Note] = []

        def decide(state: State) -> list[Payload]:
            if replaces is not None:
                fields["replaces"] = self._replaced(state, replaces, note_id)
            similar.extend(similar_notes(state, kind=fields["kind"], project=fields["project"], title=fields["title"]))
            # `since`: no purge seen (a new id). A purge of it made later elsewhere wins, whatever this line's stamp
            # (a clock a day ahead): OPLOG.md "Op kinds and merge rules".
            return [("note.set", {"id": note_id, "fields": fields, "since": None})]

        self.store.write(decide, by or self.author)
        return Remembered(self.get(note_id), similar)

    def update(
        self,
        note_id: str,
        *,
        kind: Any = UNSET,
        title: Any = UNSET,
        body: Any = UNSET,
        tags: Any = UNSET,
        project: Any = UNSET,
        replaces: Any = UNSET,
        by: Author | None = None,
    ) -> Note:
        """Change only the named fields; fields left UNSET keep their value. No change writes nothing. `replaces`
        names the note this one replaces (None drops the link)."""
        checks: dict[str, tuple[Any, Callable[[Any], Any]]] = {
            "kind": (kind, check_kind),
            "title": (title, check_title),
            "body": (body, check_body),
            "tags": (tags, check_tags),
            "project": (project, check_project),
        }
        wanted = {name: check(value) for name, (value, check) in checks.items() if value is not UNSET}
        if replaces is not UNSET and replaces is not None and not isinstance(replaces, str):
            raise InvalidInput("replaces must be the id of the note this one replaces, or null")
        if not wanted and replaces is UNSET:
            raise InvalidInput("nothing to update: name at least one of kind, title, body, tags, project, replaces")
        resolved: list[str] = []

        def decide(state: State) -> list[Payload]:
            note = self._resolve(state, note_id)
            resolved.append(note.id)
            current = note.to_json()
            if replaces is not UNSET:
                wanted["replaces"] = None if replaces is None else self._replaced(state, replaces, note.id)
            changed = {k: v for k, v in wanted.items() if current[k] != v}
            if not changed:
                return []
            if set(changed) == {"replaces"}:
                # A line carries at least one field older Hivenotes know (they ignore the link): the kind, as is.
                changed["kind"] = note.kind
            rec = state.notes[note.id]
            seen = rec.purge and (rec.purge.wall, rec.purge.counter, rec.purge.node, rec.purge.seq)
            # The purge this edit was made after: one made meanwhile elsewhere wins over it (OPLOG.md).
            return [("note.set", {"id": note.id, "fields": changed, "since": seen or None})]

        self.store.write(decide, by or self.author)
        return self.get(resolved[0])

    def _replaced(self, state: State, replaces: Any, own_id: str) -> str:
        """The full id of the note `replaces` names (a unique prefix works), which must be another note."""
        if not isinstance(replaces, str) or not replaces.strip():
            raise InvalidInput("replaces must be the id of the note this one replaces")
        old = self._resolve(state, replaces.strip())
        if old.id == own_id:
            raise InvalidInput("a note cannot replace itself")
        return old.id

    def _flag(self, note_id: str, by: Author | None, make: Callable[[Note], builtins.list[Payload]]) -> Note:
        resolved: list[str] = []

        def decide(state: State) -> list[Payload]:
            note = self._resolve(state, note_id)
            resolved.append(note.id)
            return make(note)

        self.store.write(decide, by or self.author)
        return self.get(resolved[0])

    def forget(self, note_id: str, *, by: Author | None = None) -> Note:
        """Move a note to the trash (it can be restored)."""
        return self._flag(note_id, by, lambda n: [] if n.trashed else [("note.trash", {"id": n.id})])

    def restore(self, note_id: str, *, by: Author | None = None) -> Note:
        return self._flag(note_id, by, lambda n: [("note.restore", {"id": n.id})] if n.trashed else [])

    def purge(self, note_id: str, *, by: Author | None = None) -> str:
        """Delete a trashed note for good (its earlier history included). Returns the purged id."""
        resolved: list[str] = []

        def decide(state: State) -> list[Payload]:
            note = self._resolve(state, note_id)
            if not note.trashed:
                raise InvalidInput(
                    f"note {note.id} is not in the trash; forget it first (purge deletes it permanently)"
                )
            resolved.append(note.id)
            return [("note.purge", {"id": note.id})]

        self.store.write(decide, by or self.author)
        return resolved[0]
