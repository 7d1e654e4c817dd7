"""Which notes and how many: filters, the page bounds (a limit, or a budget of model tokens), and listing notes
newest first over the folded state: the recency order is kept in the `State` between calls and patched after
writes, so an agent's list costs its page, not a pass over the notebook.

Pure: imports only the standard library.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .fold import State
from .model import Note

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
TOKEN_BUDGET = 1500  # default result size, in estimated model tokens of the one-line summaries
REFRESH_RECENT = 1000  # list_notes brings its recency order up to date after at most this many changed notes


@dataclass(frozen=True, slots=True)
class Filters:
    kind: str | None = None
    project: str | None = None
    tag: str | None = None
    agent: str | None = None
    person: str | None = None
    node: str | None = None
    trashed: bool = False  # True: only the trash; False: only live notes

    def admit(self, note: Note) -> bool:
        return (
            note.trashed == self.trashed
            and (self.kind is None or note.kind == self.kind)
            and (self.project is None or note.project == self.project)
            and (self.tag is None or self.tag in note.tags)
            and (self.agent is None or self.agent in (note.created_by.agent, note.updated_by.agent))
            and (self.person is None or self.person in (note.created_by.person, note.updated_by.person))
            and (self.node is None or self.node in (note.created_on, note.updated_on))
        )


NO_FILTERS = Filters()


def estimated_tokens(note: Note) -> int:
    """Rough size of a note's one-line summary for a model (4 characters a token, plus framing)."""
    return 24 + (len(note.title) + len(note.project or "") + sum(len(t) + 2 for t in note.tags)) // 4


def bounded(notes: Iterable[Note], limit: int | None) -> list[Note]:
    if limit is not None:
        return list(notes)[: max(0, min(limit, MAX_LIMIT))]
    out: list[Note] = []
    used = 0
    for note in notes:
        cost = estimated_tokens(note)
        if out and (len(out) >= DEFAULT_LIMIT or used + cost > TOKEN_BUDGET):
            break
        out.append(note)
        used += cost
    return out


def list_notes(
    state: State, filters: Filters = NO_FILTERS, *, limit: int | None = None, offset: int = 0
) -> tuple[list[Note], int]:
    """Notes passing `filters`, most recently updated first; returns (page, total)."""
    cap = DEFAULT_LIMIT if limit is None else max(0, min(limit, MAX_LIMIT))  # bounded keeps no more
    recent = _recent(state)
    current = recent.current
    if replace(filters, trashed=False) == NO_FILTERS:  # the usual list: the page is at the front
        total = recent.counts[filters.trashed]
        page: list[Note] = []
        skip = offset
        for note in recent.notes if cap else ():
            if current.get(note.id) is note and note.trashed is filters.trashed:
                if skip:
                    skip -= 1
                    continue
                page.append(note)
                if len(page) == cap:
                    break
    else:
        notes = [n for n in recent.notes if current.get(n.id) is n and filters.admit(n)]
        total, page = len(notes), notes[offset : offset + cap]
    return (bounded(page, limit) if limit is None else page), total


@dataclass(slots=True)
class Recent:
    """Every note, most recently changed first, kept between lists (agents list far more often than they
    write). After writes newer than everything listed, their notes go in front and the views they replace
    stay behind as stale entries, skipped (not in `current`) until a rebuild drops them: no pass over the
    notebook either way."""

    version: int
    notes: list[Note]  # newest first, stale views included
    current: dict[str, Note]  # id -> the view listed for it
    counts: dict[bool, int]  # trashed -> how many notes
    stale: int = 0


@dataclass
class _Recency:
    """The recency order derived from a State and kept with it (`State.derived`): the fold puts every changed
    note's id in `pending` once the order exists."""

    pending: set[str]
    recent: Recent | None = None


def _new_recency(state: State) -> _Recency:
    recency = _Recency(pending=set())
    state.note_feeds.append(recency.pending)
    return recency


def _recent(state: State) -> Recent:
    recency = state.derived(_Recency, _new_recency)
    recent = recency.recent
    changed = recency.pending
    if recent is not None and recent.version == state.notes_version:
        return recent
    if recent is not None and len(changed) <= REFRESH_RECENT:
        fresh = [note for note_id in changed if (note := state.note(note_id)) is not None]
        fresh.sort(key=_REVISION, reverse=True)
        if not fresh or not recent.notes or fresh[-1].revision > recent.notes[0].revision:
            for note_id in changed:
                old = recent.current.pop(note_id, None)
                if old is not None:
                    recent.counts[old.trashed] -= 1
                    recent.stale += 1
            for note in fresh:
                recent.current[note.id] = note
                recent.counts[note.trashed] += 1
            recent.notes[:0] = fresh
            recent.version = state.notes_version
            changed.clear()
            if recent.stale <= len(recent.current):
                return recent
    notes = list(state.iter_notes())
    notes.sort(key=_REVISION, reverse=True)
    counts = {False: 0, True: 0}
    for note in notes:
        counts[note.trashed] += 1
    recent = recency.recent = Recent(state.notes_version, notes, {n.id: n for n in notes}, counts)
    changed.clear()
    return recent


_REVISION = operator.attrgetter("revision")
