"""Which notes and how many: filters, the page bounds (a limit, or a budget of model tokens), and listing notes
newest first over the folded state: the recency order is kept in the `State` between calls and patched after
writes, so an agent's list costs its page, not a pass over the notebook.

Pure: imports only the standard library.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from .fold import Revision, State
from .model import Facets, Note
from .timewindow import Window

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
TOKEN_BUDGET = 1500  # default result size, in estimated model tokens of the one-line summaries
REFRESH_RECENT = 1000  # list_notes brings its recency order up to date after at most this many changed notes
KEPT_PATCHES = 32  # patches of the order kept for bringing a filtered list up to date (`Recent.patches`)


@dataclass(frozen=True, slots=True)
class Filters:
    kind: str | None = None
    project: str | None = None
    tag: str | None = None
    agent: str | None = None
    person: str | None = None
    node: str | None = None
    trashed: bool = False  # True: only the trash; False: only live notes
    window: Window | None = None  # only notes created or changed in it (an edit, a trash, a restore)
    # When a note changed, for the window: the state's (`reading`), set where a list or search starts; not compared
    # (a list keeps its last filtered order by its filters).
    state: State | None = field(default=None, compare=False, repr=False)

    def admit(self, note: Note | Facets) -> bool:
        return (
            note.trashed == self.trashed
            and (self.kind is None or note.kind == self.kind)
            and (self.project is None or note.project == self.project)
            and (self.tag is None or self.tag in note.tags)
            and (self.agent is None or self.agent in (note.created_by.agent, note.updated_by.agent))
            and (self.person is None or self.person in (note.created_by.person, note.updated_by.person))
            and (self.node is None or self.node in (note.created_on, note.updated_on))
            and (self.window is None or self.within(note.id))
        )

    def reading(self, state: State) -> Filters:
        """These filters over `state` (a window asks it when each note changed)."""
        return self if self.window is None or self.state is state else replace(self, state=state)

    def plain(self) -> bool:
        """Whether no filter but the trash's (and a window's) is set."""
        return replace(self, trashed=False, window=None) == NO_FILTERS

    def within(self, note_id: str) -> bool:
        """Whether the note was created or changed in the window: its latest change is in it, or, when that is after
        the window's end, an earlier one is (the note's record is read only then)."""
        window, state = self.window, self.state
        if window is None:
            return True
        assert state is not None, "Filters.reading(state) before a window is applied"
        listed = state.listed(note_id)
        if listed is None:
            return False
        latest = listed[0][0]
        since, until = window.since, window.until
        if since is not None and latest < since:
            return False
        if until is None or latest < until:
            return True
        record = state.notes.get(note_id)
        return record is not None and any(window.contains(wall) for wall in record.walls())


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
    """Notes passing `filters`, most recently updated first; returns (page, total). Either list makes the views of its
    page alone: a filtered one reads what its filters look at from each note's record (`State.facets`)."""
    cap = DEFAULT_LIMIT if limit is None else max(0, min(limit, MAX_LIMIT))  # bounded keeps no more
    recent = _recent(state)
    filters = filters.reading(state)
    plain = replace(filters, trashed=False) == NO_FILTERS
    if recent.stale and (offset or not plain):  # a walk past the front: without stale entries it runs in C
        _compact(recent)
    if plain:  # the usual list: the page is at the front (or `offset` ids on, skipped without reading a note)
        total = recent.counts[filters.trashed]
        if recent.stale or recent.counts[not filters.trashed]:
            ids = list(itertools.islice(_chosen(recent, filters.trashed), offset, offset + cap))
        else:  # every entry is a note of this list, each once: the page is a slice
            ids = recent.ids[offset : offset + cap]
    else:
        facets, last, every = state.facets, recent.filtered, None

        def admitted(note_id: str) -> bool:
            return (seen := facets(note_id)) is not None and filters.admit(seen)

        if filters.plain():  # a window alone: the trash flag from the order's record, without the note's facets

            def admitted(note_id: str) -> bool:
                return (
                    (got := state.listed(note_id)) is not None and got[1] == filters.trashed and filters.within(note_id)
                )

        window = filters.window
        if window is not None and window.since is not None:
            # Newest first: the notes changed since the window's start are at the front, and the walk ends at the
            # first one older (a window costs its notes, not a pass over the notebook).
            newer = itertools.takewhile(
                lambda note_id: _since(state, note_id, window), _chosen(recent, filters.trashed)
            )
            every = [note_id for note_id in newer if admitted(note_id)]
        elif last is not None and last[0] == filters:
            every = last[2] if last[1] == recent.version else _patched(recent, last[1], last[2], admitted)
        if every is None:
            every = [note_id for note_id in _chosen(recent, filters.trashed) if admitted(note_id)]
        if window is None or window.since is None:
            recent.filtered = (filters, recent.version, every)
        total, ids = len(every), every[offset : offset + cap]
    page = [note for note in map(state.note, ids) if note is not None]  # each is: the order is up to date
    return (bounded(page, limit) if limit is None else page), total


def _since(state: State, note_id: str, window: Window) -> bool:
    """Whether the note's latest change is at or after the window's start (its place in the order says no earlier)."""
    listed = state.listed(note_id)
    return listed is not None and (window.since is None or listed[0][0] >= window.since)


def note_counts(state: State) -> dict[bool, int]:
    """How many notes are out of the trash (False) and in it (True), from the list's order (no pass over the notes
    once it is made)."""
    return dict(_recent(state).counts)


@dataclass(slots=True)
class Recent:
    """Every note's id, most recently changed first, kept between lists (agents list far more often than they
    write), with whether each is in the trash: no note's view (a list makes its page's). After writes newer than
    everything listed, their ids go in front and their earlier entries stay behind as stale ones, skipped (the
    first entry of an id is its place) until a rebuild drops them: no pass over the notebook either way."""

    version: int
    ids: list[str]  # newest first, stale entries included
    current: dict[str, bool]  # id -> in the trash, for every note there is
    counts: dict[bool, int]  # trashed -> how many notes
    head: Revision | None  # the revision of the note listed first
    stale: int = 0
    # The last filtered list's notes in order, with its filters and the notebook's version then: its next page, or the
    # same list polled again, reads no note while nothing changed (a filtered list is a pass over the notebook), and
    # after a change only the notes it touched (`patches`).
    filtered: tuple[Filters, int, list[str]] | None = None
    # The last patches of the order after writes: (version before, version after, the ids changed, those that are
    # notes now, newest first), so a filtered list of an earlier version can be brought up to date.
    patches: list[tuple[int, int, set[str], list[str]]] = field(default_factory=list)


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


def _in_order(recent: Recent) -> Iterator[str]:
    """Each note's id once, newest first: its first entry is its place (later ones are stale), and an id no note has
    now is skipped."""
    seen: set[str] = set()
    current = recent.current
    for note_id in recent.ids:
        if note_id not in seen and note_id in current:
            seen.add(note_id)
            yield note_id


def _chosen(recent: Recent, trashed: bool) -> Iterator[str]:
    """The ids of the notes in the trash (`trashed`) or out of it, newest first; without stale entries, walked in C
    (paging to the end of 100k notes read every id before the page from the front in Python: ~80 ms a page)."""
    current = recent.current
    if recent.stale:
        return (note_id for note_id in _in_order(recent) if current[note_id] == trashed)
    flags = map(current.__getitem__, recent.ids)
    return itertools.compress(recent.ids, flags if trashed else map(operator.not_, flags))


def _patched(recent: Recent, since: int, ids: list[str], admitted: Callable[[str], bool]) -> list[str] | None:
    """`ids`, a filtered list as of version `since`, brought up to date from the order's patches since then: the notes
    they changed are read again (each patch's are newer than all before it), the others keep their place. None when
    the patches kept do not reach back to `since`."""
    chain: list[tuple[set[str], list[str]]] = []
    version = recent.version
    for start, end, changed, fresh in reversed(recent.patches):
        if end != version:
            return None
        chain.append((changed, fresh))
        version = start
        if version == since:
            break
    if version != since:
        return None
    gone: set[str] = set()
    front: list[str] = []
    for changed, fresh in chain:  # the newest patch first
        front += [note_id for note_id in fresh if note_id not in gone and admitted(note_id)]
        gone |= changed
    return front + [note_id for note_id in ids if note_id not in gone]


def _compact(recent: Recent) -> None:
    """Drop the stale entries: each note's id once, at its place."""
    recent.ids = list(filter(recent.current.__contains__, dict.fromkeys(recent.ids)))
    recent.stale = 0


def _listed(state: State, ids: Iterable[str]) -> list[tuple[Revision, str, bool]]:
    """(revision, id, in the trash) of each of `ids` that is a note now, newest first."""
    out = [(got[0], note_id, got[1]) for note_id in ids if (got := state.listed(note_id)) is not None]
    out.sort(reverse=True)
    return out


def _recent(state: State) -> Recent:
    recency = state.derived(_Recency, _new_recency)
    recent = recency.recent
    changed = recency.pending
    if recent is not None and recent.version == state.notes_version:
        return recent
    if recent is not None and len(changed) <= REFRESH_RECENT:
        fresh = _listed(state, changed)
        if not fresh or recent.head is None or fresh[-1][0] > recent.head:
            current, counts = recent.current, recent.counts
            for note_id in changed:
                old = current.pop(note_id, None)
                if old is not None:
                    counts[old] -= 1
                    recent.stale += 1
            for _, note_id, trashed in fresh:
                current[note_id] = trashed
                counts[trashed] += 1
            ids = [note_id for _, note_id, _ in fresh]
            if fresh:
                recent.ids[:0] = ids
                recent.head = fresh[0][0]
            recent.patches.append((recent.version, state.notes_version, set(changed), ids))
            del recent.patches[:-KEPT_PATCHES]
            recent.version = state.notes_version
            changed.clear()
            if recent.stale <= len(current):
                return recent
    listed = _listed(state, state.notes)
    counts = {False: 0, True: 0}
    for _, _, trashed in listed:
        counts[trashed] += 1
    recent = recency.recent = Recent(
        state.notes_version,
        [note_id for _, note_id, _ in listed],
        {note_id: trashed for _, note_id, trashed in listed},
        counts,
        listed[0][0] if listed else None,
    )
    changed.clear()
    return recent
