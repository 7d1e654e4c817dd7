"""Which notes and how many: filters, the page bounds (a limit, or a budget of model tokens), and listing notes
newest first over the folded state: the recency order is kept in the `State` between calls and patched after
writes, so an agent's list costs its page, not a pass over the notebook.

Pure: imports only the standard library.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from .fold import Revision, State
from .model import Facets, Note
from .timewindow import Window

DEFAULT_LIMIT = 10
MAX_LIMIT = 200
TOKEN_BUDGET = 1500  # default result size, in estimated model tokens of the one-line summaries
REFRESH_RECENT = 1000  # list_notes brings its recency order up to date after at most this many changed notes
_INT64 = (1 << 63) - 1
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
    # The notes in the window, read from the state where a list or search starts (`reading`): a test (`LatestIn`), or
    # their ids (a filtered list's); not compared (a list keeps its last filtered order by its filters).
    inside: set[str] | LatestIn | None = field(default=None, compare=False, repr=False)

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
        """These filters over `state`: a window's notes are found once, from the list's order (`in_window`)."""
        if self.window is None:
            return self
        inside = window_test(state, self.window)
        if inside is None:  # the window holds every note: as without one (a search takes its quickest path)
            return replace(self, window=None, inside=None)
        return replace(self, inside=inside)

    def plain(self) -> bool:
        """Whether no filter but the trash's (and a window's) is set."""
        return replace(self, trashed=False, window=None) == NO_FILTERS

    def within(self, note_id: str) -> bool:
        """Whether the note was created or changed in the window (`reading` found which notes were)."""
        if self.window is None:
            return True
        assert self.inside is not None, "Filters.reading(state) before a window is applied"
        return note_id in self.inside


@dataclass(frozen=True, slots=True)
class LatestIn:
    """The notes of a time window as a test rather than a set of their ids (a set made at each search of a window
    of 50,000 notes cost five times the search): a note is in it when its latest change is (its revision,
    `State.listed`), or when it is one of `front`, changed in the window before a later change. A search over the
    index tests its matches' numbers against the recency the index keeps (`search._window_numbers`), so a window
    costs its matches, not its notes."""

    state: State
    window: Window
    front: frozenset[str]

    def __contains__(self, note_id: object) -> bool:
        if note_id in self.front:
            return True
        listed = self.state.listed(note_id) if isinstance(note_id, str) else None
        return listed is not None and self.window.contains(listed[0][0])

    def intersection(self, keys: Iterable[str]) -> set[str]:
        return {key for key in keys if key in self}


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

        window = filters.window
        if window is not None:
            # The window's notes from the order (newest first): a window costs its notes, not a pass over the notebook.
            if filters.plain() and not recent.counts[not filters.trashed]:  # every note is of this list: a slice
                _, front, start, end = _window_slice(state, window)
                ids = front[offset : offset + cap]
                skip = start + max(0, offset - len(front))
                ids += recent.ids[skip : max(skip, min(end, skip + cap - len(ids)))]
                page = [note for note in map(state.note, ids) if note is not None]
                return (bounded(page, limit) if limit is None else page), len(front) + end - start
            inside = in_window(state, window)
            current = recent.current
            flags = map(current.__getitem__, inside)
            every = list(itertools.compress(inside, flags if filters.trashed else map(operator.not_, flags)))
            if not filters.plain():
                filters = replace(filters, inside=set(every))
                every = [note_id for note_id in every if admitted(note_id)]
        elif last is not None and last[0] == filters:
            every = last[2] if last[1] == recent.version else _patched(recent, last[1], last[2], admitted)
        if every is None:
            every = [note_id for note_id in _chosen(recent, filters.trashed) if admitted(note_id)]
        if window is None:
            recent.filtered = (filters, recent.version, every)
        total, ids = len(every), every[offset : offset + cap]
    page = [note for note in map(state.note, ids) if note is not None]  # each is: the order is up to date
    return (bounded(page, limit) if limit is None else page), total


def in_window(state: State, window: Window) -> list[str]:
    """The ids of the notes (in the trash or not) created or changed in `window`, most recently changed first. The
    order keeps each entry's latest change (`Recent.walls`, newest first), so the notes whose latest change is in the
    window are one slice of it, found by bisection; a note whose latest change is after the window's end is in it
    when an earlier change is (its record read, for those notes alone)."""
    recent, front, start, end = _window_slice(state, window)
    return front + recent.ids[start:end] if front else recent.ids[start:end]


def window_test(state: State, window: Window) -> LatestIn | None:
    """`in_window` as a test, for a search's candidates (None when the window holds every note)."""
    recent, front, start, end = _window_slice(state, window)
    if start == 0 and end == len(recent.ids) and not recent.stale:
        return None
    return LatestIn(state, window, frozenset(front))


def _window_slice(state: State, window: Window) -> tuple[Recent, list[str], int, int]:
    """The order, the notes before `start` changed in the window before their latest change, and the slice
    [start, end) of the order whose latest change is in the window."""
    recent = _recent(state)
    if recent.stale:
        _compact(recent)
    ids, walls, since, until = recent.ids, recent.walls, window.since, window.until
    end = len(ids) if since is None else bisect.bisect_right(walls, -since, key=operator.neg)  # changed at/after since
    start = 0 if until is None else min(end, bisect.bisect_right(walls, -until, key=operator.neg))  # ... at/after until
    if start and recent.edited is None:
        recent.edited = set()
        _note_edited(state, recent.edited, state.notes)
    edited = recent.edited
    if not edited:  # every note written once: none changed before its latest change
        return recent, [], start, end
    front = [note_id for note_id in filter(edited.__contains__, ids[:start]) if _changed_in(state, note_id, window)]
    return recent, front, start, end


def _changed_in(state: State, note_id: str, window: Window) -> bool:
    """Whether a note whose latest change is after the window changed in it before."""
    record = state.notes.get(note_id)
    return record is not None and any(map(window.contains, record.walls()))


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
    walls: array[
        int
    ]  # each entry's latest change (ms, at most 2**63 - 1) when it was put in the order: never increasing
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
    # The notes with more than one change (most are written once): only these can have changed in a window before
    # their latest change (`in_window`); made when a window with an end first asks.
    edited: set[str] | None = None


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
    """Drop the stale entries: each note's id once, at its place (with its time there)."""
    first = dict(zip(reversed(recent.ids), reversed(recent.walls), strict=True))  # the wall of each id's first entry
    recent.ids = list(filter(recent.current.__contains__, dict.fromkeys(recent.ids)))
    recent.walls = array("q", map(first.__getitem__, recent.ids))
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
            if recent.edited is not None:
                _note_edited(state, recent.edited, changed)
            ids = [note_id for _, note_id, _ in fresh]
            if fresh:
                recent.ids[:0] = ids
                recent.walls[:0] = _walls(revision for revision, _, _ in fresh)
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
        _walls(revision for revision, _, _ in listed),
        {note_id: trashed for _, note_id, trashed in listed},
        counts,
        listed[0][0] if listed else None,
    )
    changed.clear()
    return recent


def _walls(revisions: Iterable[Revision]) -> array[int]:
    """The walls of `revisions` for `Recent.walls` (a wall past int64, from a clock far off, as the largest)."""
    return array("q", (min(revision[0], _INT64) for revision in revisions))


def _note_edited(state: State, edited: set[str], ids: Iterable[str]) -> None:
    """Keep `Recent.edited` up to date for the notes `ids`."""
    records = state.notes
    for note_id in ids:
        record = records.get(note_id)
        if record is not None and type(record.ops) is not int:
            edited.add(note_id)
        else:
            edited.discard(note_id)
