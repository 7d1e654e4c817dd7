"""Search over the folded state's notes: every term must match; field-weighted rank, then recency; near matches
kept apart; the duplicate hint. Index-backed (listing is `listing`'s, the knowledge graph `graphsearch`'s).

Pure: imports only the standard library. Indexes live in the `State` and are brought up to date lazily from
the ids the fold marked as changed, so a query never rescans the whole notebook. A query over the index keeps its
matches as the index's numbers of notes (sets of ints), not ids, until the page is known; the trash and the duplicate
hint's title-word postings use the same numbers.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import re
import string
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, TypeVar

from .fold import Revision, State
from .listing import DEFAULT_LIMIT, MAX_LIMIT, NO_FILTERS, Filters, LatestIn, bounded, list_notes
from .model import Note, Stamp
from .textindex import Dumped, SubstringIndex

# Field weights: a term in the title says more than the same term deep in the body.
WEIGHTS = (("title", 4.0), ("tags", 3.0), ("project", 3.0), ("kind", 2.0), ("body", 1.0))  # note_text's order
NEAR_LIMIT = 5
COMMON_TITLE_WORD = 2000  # postings longer than this are not counted by the duplicate hint
PENDING_DIRECT = 8  # the duplicate hint checks up to this many not-yet-indexed notes one by one
COLD_INDEX = 2000  # with more notes than this waiting and no index yet, a query scans instead of indexing all
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


def fold_text(text: str) -> str:
    """Case- and accent-insensitive form used for note search (NFKD, drop combining marks, casefold)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Note]
    near: list[Note]  # closest partial or meaning matches, only when nothing matched every term
    total: int  # how many notes matched every term (hits may be fewer: limit / token budget)
    # Why a note is listed when it is not an exact match: "similar meaning", "some words match", "replaces <id>".
    reasons: dict[str, str] = field(default_factory=dict)
    replaced_by: dict[str, str] = field(default_factory=dict)  # a listed note -> the live note that replaces it


class Meaning(Protocol):
    """What the search asks of a meaning index (hivenote.server.meaning), when there is one."""

    def scores(self, query: str) -> dict[str, float] | None:
        """Notes close in meaning to the query with a score (a cosine, about -1..1); None while not ready."""
        ...

    def replaced(self, note_ids: list[str], named: Callable[[str, str], bool] | None = None) -> dict[str, str]:
        """Of these notes, those a newer note replaces without naming them: old id -> new id. `named(old, new)`
        says whether the two notes' titles name a thing no other note names (`_named_alone`)."""
        ...


# In a note's indexed text, every token of its title starts with TITLE, every token of its tags, project and kind
# with OTHER: the index can then tell where a term matched.
TITLE, OTHER = "\x01", "\x02"
HEAD = (TITLE, OTHER)
_TOKEN_START = re.compile(r"(?<!\S)(?=\S)")  # \s is str.split()'s whitespace
_UNMARK = str.maketrans(dict.fromkeys(HEAD))


def note_text(note: Note) -> str:
    """Everything a query term may match in a note, folded: title, tags, project, kind, then the body (last,
    as the one field that may hold line breaks, so `_fields` can split the text back apart). The tokens of the
    first four are marked (`TITLE`, `OTHER`), so the index can tell a term in them from one in the body."""
    title = fold_text(note.title)
    other = fold_text("\n".join((" ".join(note.tags), note.project or "", note.kind)))
    return f"{_TOKEN_START.sub(TITLE, title)}\n{_TOKEN_START.sub(OTHER, other)}\n{fold_text(note.body)}"


# The duplicate hint's postings (`NoteIndex.title_words`) are one bytearray per title word, of 6-byte entries: the
# 2-byte code of the note's kind and project (`NoteIndex.title_codes`), then its number in the index, in 7-bit
# groups. Only a code's first byte has its high bit set, so a code found in the bytes starts an entry: counting and
# listing one kind and project's entries is `bytearray.count` and a regex in C, and each word costs one object,
# not one array per (kind, project, word) and a key string for each (at 100k notes: 26 MB -> 3 MB).
_CODES = 1 << 14  # kind-and-project pairs beyond this many share the last code (their entries count together)
_NUMBERS = 1 << 28


def _title_code(derived: NoteIndex, kind: str, project: str) -> bytes:
    code = derived.title_codes.get((kind, project))
    if code is None:
        n = min(len(derived.title_codes), _CODES - 1)
        code = derived.title_codes[kind, project] = bytes((0x80 | n >> 7, n & 0x7F))
    return code


def _title_entry(code: bytes, number: int) -> bytes:
    if number >= _NUMBERS:
        raise OverflowError("too many notes for the duplicate hint's postings")
    return code + bytes((number >> 21, number >> 14 & 0x7F, number >> 7 & 0x7F, number & 0x7F))


_ENTRY = 6  # bytes of a title-word entry: the 2-byte code, then the 4-byte number


def _entry_number(digits: bytes | bytearray) -> int:
    return digits[0] << 21 | digits[1] << 14 | digits[2] << 7 | digits[3]


@functools.lru_cache(maxsize=256)
def _entries_of(code: bytes) -> re.Pattern[bytes]:
    """The number digits of every entry with this code (a digit may be any byte below 0x80, "\\n" too)."""
    return re.compile(re.escape(code) + b"(....)", re.DOTALL)


@dataclass
class NoteIndex:
    """The notes' search index, derived from a State and kept with it (`State.derived`); this module alone reads
    and writes it. The fold puts every changed note's id in `pending`; `refresh_note_index` takes them out."""

    pending: set[str]  # notes changed since they were last indexed
    texts: SubstringIndex[str] = field(default_factory=SubstringIndex)
    trashed: set[int] = field(default_factory=set)  # the indexed notes in the trash, by their numbers in `texts`
    # The duplicate hint's postings: title word -> an entry (kind and project's code, note number in `texts`) for each
    # time a note gained the word or, holding it, another kind or project (stale entries tolerated; see _title_code).
    title_words: dict[str, bytearray] = field(default_factory=dict)
    title_codes: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (folded kind, project) -> code
    # By number in `texts`: the note's `NoteRecord.mark` when it was indexed (0: none), saved with the index so a later
    # start can tell the notes whose ops changed since (`adopt_index`).
    marks: array[int] = field(default_factory=lambda: array("Q"))
    # By number in `texts`: when the note last changed (`_recency` of its revision; 0: a free number). Orders notes as
    # their revisions do but for those changed in one millisecond and count, so a common word's matches are ranked
    # by recency without reading each one's record.
    recent: array[int] = field(default_factory=lambda: array("Q"))
    # The scan a cold index answers from (for a notes version), kept between queries while the notes do not change:
    # a server warming its index after start meets agents' first searches, and building the stand-in (every note's
    # text) costs far more than scanning it. Dropped once the index is warm.
    scan: tuple[int, _Scan] | None = None


def _new_index(state: State) -> NoteIndex:
    index = NoteIndex(pending=set(state.notes))  # made late: every note is still to index
    state.note_feeds.append(index.pending)
    return index


def note_index(state: State) -> NoteIndex:
    """This state's note index (made on first use)."""
    return state.derived(NoteIndex, _new_index)


def refresh_note_index(state: State, budget: int | None = None) -> bool:
    """Index up to `budget` of the notes the fold changed since the last call (all when None).
    Returns True when the index is fully up to date."""
    derived = note_index(state)
    index, changed = derived.texts, derived.pending
    todo = list(changed) if budget is None or budget >= len(changed) else list(itertools.islice(changed, budget))
    title_words, trashed, marks, recent = derived.title_words, derived.trashed, derived.marks, derived.recent
    # A warm-up scan's texts (nothing written since) become the index's: built once, and nothing freed in between
    # the index's own objects when the stand-in goes (at 100k notes that left ~30 MB of the heap pinned for good).
    scan = derived.scan[1] if derived.scan is not None and derived.scan[0] == state.notes_version else None
    for note_id in todo:
        note = state.note(note_id, keep=False)  # indexing the notebook keeps no view (a search shows a page)
        if note is None:
            number = index.number(note_id)
            if number is not None:  # its number goes to the next new note
                trashed.discard(number)
                marks[number] = recent[number] = 0
            index.discard(note_id)
            continue
        text = (scan.text(note_id) if scan is not None else None) or note_text(note)
        old = index.text(note_id)
        index.set(note_id, text)
        number = index.number(note_id)
        assert number is not None  # just set
        for column in (marks, recent):
            if number >= len(column):
                column.frombytes(bytes(column.itemsize * (number + 1 - len(column))))
        marks[number] = state.notes[note_id].mark()
        recent[number] = _recency(note.revision)
        if note.trashed:
            trashed.add(number)
        else:
            trashed.discard(number)
        title, _, project, kind, _ = _fields(text)
        new_words = _folded_words(title)
        if old is not None and new_words:
            old_title, _, old_project, old_kind, _ = _fields(old)
            if (old_kind, old_project) == (kind, project):
                new_words -= _folded_words(old_title)
        if new_words:
            entry = _title_entry(_title_code(derived, kind, project), number)
            for word in new_words:
                postings = title_words.get(word)
                if postings is None:
                    title_words[word] = bytearray(entry)
                else:
                    postings += entry
    changed.difference_update(todo)
    if not changed:
        derived.scan = None  # warm: the stand-in's texts are not needed any more
    return not changed


class _Scan:
    """A throwaway stand-in for the index when it is cold (a fresh CLI process on a big notebook): one pass
    over the notes costs less than building the whole index for a single query."""

    def __init__(self, state: State) -> None:
        derived = note_index(state)
        index, changed = derived.texts, derived.pending
        self._texts = {
            note.id: (None if note.id in changed else index.text(note.id)) or note_text(note)
            for note in state.iter_notes()
        }

    def candidates(self, term: str) -> set[str]:
        return {key for key, text in self._texts.items() if term in text}

    def text(self, key: str) -> str | None:
        return self._texts.get(key)

    def count_estimate(self, term: str) -> int:
        return len(self._texts)


class SavedIndex(NamedTuple):
    """A warm note index as plain data, for a later start of the same notebook (`saved_index`, `adopt_index`)."""

    key: bytes  # the ops key of the state it was taken from (`State.ops_key`)
    texts: Dumped[str]  # the index of texts
    marks: array[int]  # by number in `texts`: the note's `NoteRecord.mark` then (0: none, or a free number)
    recent: array[int]  # by number in `texts`: when the note last changed (`NoteIndex.recent`)
    trashed: array[int]  # the numbers of the notes in the trash
    title_words: dict[str, bytearray]  # the duplicate hint's postings
    title_codes: dict[tuple[str, str], bytes]
    links: dict[str, str]  # the live notes' `replaces` links


def saved_index(state: State) -> SavedIndex | None:
    """What a later start of the same notebook needs to search at once, its index warm from the first request: the
    whole note index as plain data (`adopt_index`), each note's mark, and the live notes' `replaces` links; None
    while the index is not warm. Under the store's lock: lists of the index's own strings and copies of its postings
    and marks (the caller writes them out)."""
    derived = note_index(state)
    if derived.pending:
        return None
    texts = derived.texts.dump()
    marks, recent = derived.marks[: len(texts.keys)], derived.recent[: len(texts.keys)]
    for column in (marks, recent):
        column.frombytes(bytes(column.itemsize * (len(texts.keys) - len(column))))
    return SavedIndex(
        state.ops_key(),
        texts,
        marks,
        recent,
        array("I", sorted(derived.trashed)),
        {word: bytearray(entries) for word, entries in derived.title_words.items()},
        dict(derived.title_codes),
        dict(_links(state).linking),
    )


def carry_index(old: State, new: State) -> bool:
    """Give `new` (the same notebook folded again, after a failed write) `old`'s warm index, for the notes whose ops
    are the same (`adopt_index`); the others are indexed again as usual. A search after a failed write then stays
    warm instead of scanning every note while the index is built again. Returns whether it was taken."""
    saved = saved_index(old)
    return saved is not None and adopt_index(new, saved)


def adopt_index(state: State, saved: SavedIndex) -> bool:
    """Take an index `saved_index` gave as this state's, warm at once but for the notes whose ops differ: none when
    this state holds the very ops it was saved from (`saved.key`, compared with `state.ops_key()`); else those whose
    record's mark is not the saved one, or that only one side holds (ops another machine wrote while this one was off,
    or written after the index was saved), indexed again from `pending` as usual. Returns False (and changes nothing)
    when the parts do not fit together, or the index or the links were already started."""
    derived = note_index(state)
    if len(derived.texts) or derived.scan is not None or state.has_derived(_Links):
        return False
    keys = saved.texts.keys
    if len(saved.marks) != len(keys) or len(saved.recent) != len(keys):
        return False
    try:
        texts = SubstringIndex[str].restored(saved.texts)
    except ValueError:
        return False
    if any(texts.numbered(n) is None for n in saved.trashed):
        return False
    if saved.key == state.ops_key():
        changed: set[str] = set()
    else:
        records = state.notes
        changed = {
            key
            for key, mark in zip(keys, saved.marks, strict=True)
            if key is not None and ((record := records.get(key)) is None or mark != record.mark() or not mark)
        }
        changed.update(records.keys() - texts.keys())
    derived.texts = texts
    derived.trashed = set(saved.trashed)
    derived.title_words = saved.title_words
    derived.title_codes = saved.title_codes
    derived.marks = array("Q", saved.marks)
    derived.recent = array("Q", saved.recent)
    derived.pending.clear()
    derived.pending.update(changed)
    made = _Links(pending=set(changed), linking=dict(saved.links))
    state.note_feeds.append(made.pending)
    state.derived(_Links, lambda _: made)
    return True


_Texts = SubstringIndex[str] | _Scan  # what a query reads the notes' texts from


def _texts(state: State) -> _Texts:
    """The index when it is (nearly) up to date; otherwise a scan, while the index catches up a step at a time. A
    long-running server adopts the index its last run saved (`adopt_index`), or else warms it with
    `refresh_note_index` right after start."""
    derived = note_index(state)
    if derived.scan is not None and derived.scan[0] == state.notes_version and derived.pending:
        return derived.scan[1]  # still warming, nothing written since: the same texts
    if refresh_note_index(state, budget=COLD_INDEX):
        return derived.texts
    scan = _Scan(state)
    derived.scan = (state.notes_version, scan)
    return scan


def _fields(text: str) -> list[str]:
    """The folded title, tags, project, kind and body of an indexed text."""
    parts = text.split("\n", 4)
    parts = [part.translate(_UNMARK) for part in parts[:4]] + parts[4:]
    return parts if len(parts) == 5 else [*parts, *[""] * (5 - len(parts))]


@functools.lru_cache(maxsize=1024)
def _word_end(term: str) -> re.Pattern[str]:
    """`term` with no letter or digit right after it (`[^\\W_]` is exactly `str.isalnum`). Led by the literal,
    so the regex engine skips ahead with a fast substring search; the start is checked by `_whole_word`."""
    return re.compile(rf"{re.escape(term)}(?![^\W_])")


def _whole_word(text: str, term: str, start: int) -> int:
    """Where `term` first occurs from `start` on with no letter or digit on either side, or -1."""
    found = _word_end(term).search(text, start)
    while found is not None:
        at = found.start()
        if at == 0 or not text[at - 1].isalnum():
            return at
        found = _word_end(term).search(text, at + 1)
    return -1


_FIELD_WEIGHT = tuple(weight for _, weight in WEIGHTS)


def _score(text: str, terms: list[str]) -> tuple[float, int]:
    """(relevance, terms matched) of a note's folded text: each term counts its best field, doubled for a
    whole-word match. Fields come in falling weight order, so a term's best field is that of its first
    occurrence or, doubled, that of its first whole-word occurrence: two searches in C, not a loop over fields
    (a short term can match most of a big notebook, and every match is scored)."""
    total = 0.0
    matched = 0
    for term in terms:
        at = text.find(term)
        if at < 0:
            continue
        best = _FIELD_WEIGHT[min(text.count("\n", 0, at), 4)]
        whole = _whole_word(text, term, at)
        if whole >= 0:
            best = max(best, 2.0 * _FIELD_WEIGHT[min(text.count("\n", 0, whole), 4)])
        total += best
        matched += 1
    return total, matched


def _score_bound(text: str, terms: list[str], bounds: list[tuple[float, ...]]) -> float:
    """At least `_score(text, terms)[0]` for a text holding every term, for less: the field of a term's first
    occurrence is its heaviest, and a whole-word match there at most doubles it (`_bounds`)."""
    total = 0.0
    for term, bound in zip(terms, bounds, strict=True):
        total += bound[min(text.count("\n", 0, text.find(term)), 4)]
    return total


_FIELD_BOUND = tuple(2.0 * weight for weight in _FIELD_WEIGHT)


def _bounds(index: _Texts, terms: list[str]) -> list[tuple[float, ...]]:
    """Per term, the most each field can give it: doubled only if some token of the notebook holds the term as a
    whole word (a prefix being typed seldom is one, and then a note's bound is its exact relevance)."""
    bounds = []
    for term in terms:
        tokens = index.tokens(term) if isinstance(index, SubstringIndex) else None
        whole = tokens is None or any(_whole_word(token, term, 0) >= 0 for token in tokens)
        bounds.append(_FIELD_BOUND if whole else _FIELD_WEIGHT)
    return bounds


_Key = TypeVar("_Key", str, int)  # a note's id, or its number in the index


def _same(key: str) -> str:
    return key


def _ranked(
    state: State,
    keys: list[_Key],
    text: Callable[[_Key], str | None],
    note_id: Callable[[_Key], str],
    terms: list[str],
    bounds: list[tuple[float, ...]],
    limit: int,
    recent: Callable[[_Key], int] | None = None,
    body_from: int | None = None,
    bound_of: Callable[[_Key], float] | None = None,
) -> list[tuple[float, Note]]:
    """The `limit` best notes by (relevance, recency), with their relevance. A short term can match most of a
    big notebook, mostly deep in bodies: notes are grouped by a cheap bound of their relevance and scored
    exactly, best group first, only while their bound can still beat the worst note kept. (Grouped, not
    sorted: sorting tens of thousands of notes scattered over a big heap costs more than scoring them.) A note is
    read (its view built) only when its group is reached: while the index warms, most matches of a common word have
    none built yet, and building them cost more than the rest of the search. `keys` are note ids or the index's
    numbers of notes (`text` and `note_id` read them).

    With `recent` (each note's `_recency`), a note that cannot beat the worst note kept (no more points, and older)
    is passed over without reading its record: a common word's matches are mostly that. The notes from `body_from` on
    hold every term in their bodies alone: their bound is known without reading their texts; `bound_of` gives the
    others' (at least their `_score_bound`) when the caller knows it."""
    if limit <= 0:
        return []
    # Note numbers in compact arrays, not (text, note) tuples: objects kept across the pass would be promoted
    # by the collector and make it walk the whole notebook.
    groups: dict[float, array[int]] = {}
    for number in range(len(keys) if body_from is None else body_from):
        key = keys[number]
        bound = bound_of(key) if bound_of is not None else _score_bound(text(key) or "", terms, bounds)
        group = groups.get(bound)
        if group is None:
            group = groups[bound] = array("I")
        group.append(number)
    if body_from is not None and body_from < len(keys):
        groups.setdefault(sum(bound[-1] for bound in bounds), array("I")).extend(range(body_from, len(keys)))
    # A min-heap of the best so far, (score, revision, id, recency): revisions are unique. A note's view is made for
    # the page alone (its revision is read from its record).
    kept: list[tuple[float, Revision, str, int]] = []
    for bound in sorted(groups, reverse=True):
        if len(kept) == limit and bound < kept[0][0]:
            break
        for number in groups[bound]:
            key = keys[number]
            full = len(kept) == limit
            when = 0 if recent is None else recent(key)
            if full and recent is not None and (bound, when) < (kept[0][0], kept[0][3]):
                continue  # at most as many points as the worst kept, and older
            score = bound if recent is None else _score(text(key) or "", terms)[0]  # at most, or exactly
            if full and recent is not None and (score, when) < (kept[0][0], kept[0][3]):
                continue
            found = note_id(key)
            listed = state.listed(found)
            if listed is None:
                continue
            revision = listed[0]
            if full and (score, revision) < kept[0][:2]:
                continue
            if recent is None:
                score = _score(text(key) or "", terms)[0]
            item = (score, revision, found, when)
            if len(kept) < limit:
                heapq.heappush(kept, item)
            elif item[:2] > kept[0][:2]:
                heapq.heapreplace(kept, item)
    kept.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [(score, note) for score, _, found, _ in kept if (note := state.note(found)) is not None]


def _head_first(
    state: State,
    index: SubstringIndex[str],
    numbers: set[int],
    terms: list[str],
    bounds: list[tuple[float, ...]],
    trashed: bool,
    limit: int,
) -> tuple[list[Note], int] | None:
    """The usual search (no filter but the trash's) without looking at every match, which for a common word can be
    most of a big notebook: a note holding no term in its title, tags, project or kind scores at most a whole-word
    body match per term, so the notes that do and score more come first, and only the places they leave are
    ranked among the rest. Returns (hits, total), or None when a term is too broad to tell where it matched. Notes are
    the index's numbers of them throughout."""
    in_trash = note_index(state).trashed
    matches = numbers & in_trash if trashed else numbers - in_trash
    if len(terms) == 1:
        # The most a term can score: standing whole in a title, or, when it is nowhere a whole word, in a title at
        # all. With a page of such notes, the newest of them win.
        term, whole = terms[0], bounds[0] is _FIELD_BOUND

        def best(token: str) -> bool:
            return token.startswith(TITLE) and (not whole or _whole_word(token, term, 0) >= 0)

        top = (_holding(index, term, best) or set()) & matches
        if len(top) >= limit:
            return _newest_numbers(state, index, top, limit), len(matches)
    # Where each term is: in a title, else in the tags, project or kind (the index's marked tokens say, for a set of
    # notes at a time), else in the body alone. A head note's bound follows, without reading its text (the head of
    # two common words is thousands of notes).
    places: list[tuple[tuple[float, ...], set[int], set[int]]] = []
    for term, bound in zip(terms, bounds, strict=True):
        titled = _holding(index, term, lambda tok: tok.startswith(TITLE))
        other = _holding(index, term, lambda tok: tok.startswith(OTHER))
        if titled is None or other is None:
            return None
        titled &= matches
        places.append((bound, titled, (other & matches) - titled))
    head: set[int] = set().union(*(titled | other for _, titled, other in places))
    bound_at: dict[int, float] = {}
    cells = [((b[0], titled), (b[1], other), (b[-1], head - titled - other)) for b, titled, other in places]
    for chosen in itertools.product(*cells):  # a place for each term: at most 27 set intersections
        bound_at.update(dict.fromkeys(set.intersection(*(notes for _, notes in chosen)), sum(b for b, _ in chosen)))
    body_only = sum(bound[-1] for bound in bounds)  # the most a note with every term in its body only can score
    text, note_id, recent = index.text_at, index.key_at, note_index(state).recent.__getitem__
    ranked = _ranked(state, list(head), text, note_id, terms, bounds, limit, recent, bound_of=bound_at.__getitem__)
    certain = [note for score, note in ranked if score > body_only]
    if len(certain) < limit:
        # The rest: the head's notes not certain, then those with every term in the body alone (their bound known).
        body = matches - head
        head.difference_update([index.number(note.id) for note in certain])
        rest = [*head, *body]
        more = _ranked(
            state, rest, text, note_id, terms, bounds, limit - len(certain), recent, len(head), bound_at.__getitem__
        )
        certain += [note for _, note in more]
    return certain, len(matches)


def _holding(index: SubstringIndex[str], term: str, which: Callable[[str], bool]) -> set[int] | None:
    """The notes (their numbers) with a token that holds `term` and is `which` (a title's, one holding it whole, ...),
    or None when the term is too broad for the index to list its tokens."""
    tokens = index.tokens(term)
    if tokens is None:
        return None
    return index.numbers_with_tokens([token for token in tokens if which(token)])


def _notes(state: State, keys: Iterable[str]) -> list[Note]:
    return [note for key in keys if (note := state.note(key)) is not None]


def _admitted(state: State, keys: Iterable[str], filters: Filters) -> list[str]:
    """Of the notes `keys`, those `filters` admit, without making their views (a common word's matches are most of
    the notebook): the trash flag from the record, what other filters look at from its deciding ops."""
    if filters.plain():  # no filter but the trash's (and a window's: its notes, `Filters.reading`)
        if filters.inside is not None:
            keys = filters.inside.intersection(keys)
        return [key for key in keys if (listed := state.listed(key)) is not None and listed[1] == filters.trashed]
    return [key for key in keys if (seen := state.facets(key)) is not None and filters.admit(seen)]


def _recency(revision: Revision) -> int:
    """A revision as one number that orders as it does but for revisions of one millisecond and count (wall
    milliseconds, then the counter, each capped: never past 64 bits)."""
    return _recency_at(revision[0]) | min(max(revision[1], 0), 0xFFFF)


def _recency_at(ms: int) -> int:
    """The least `_recency` of a revision at wall time `ms`."""
    return min(max(ms, 0), (1 << 48) - 1) << 16


def _window_numbers(state: State, index: SubstringIndex[str], inside: LatestIn, numbers: set[int]) -> set[int]:
    """Of the notes `numbers`, those in a time window (`Filters.inside`): each one's latest change as the index keeps
    it (`NoteIndex.recent`, up to date whenever the index answers) tested against the window, and those changed in
    it before a later change (`LatestIn.front`)."""
    window, recent = inside.window, note_index(state).recent
    low = 0 if window.since is None else _recency_at(window.since)
    high = 1 << 64 if window.until is None else _recency_at(window.until)
    found = {number for number in numbers if low <= recent[number] < high}
    if inside.front:
        found.update(n for key in inside.front if (n := index.number(key)) is not None and n in numbers)
    return found


def _newest_numbers(state: State, index: SubstringIndex[str], numbers: set[int], limit: int) -> list[Note]:
    """`_newest` of notes given as the index's numbers: ranked on their recency (`NoteIndex.recent`), and on their
    revisions only among those as recent as the last one kept."""
    recent = note_index(state).recent.__getitem__
    top = heapq.nlargest(limit, numbers, key=recent)
    if len(top) == limit:
        least = recent(top[-1])
        top = [number for number in numbers if recent(number) >= least]
    return _newest(state, map(index.key_at, top), limit)


def _newest(state: State, keys: Iterable[str], limit: int) -> list[Note]:
    """The `limit` most recently changed of the notes `keys`, newest first: only theirs are read (`NoteRecord.listed`
    orders the rest without making their views; a common word is in thousands of titles)."""
    dated = ((listed[0], key) for key in keys if (listed := state.listed(key)) is not None)
    return _notes(state, (key for _, key in heapq.nlargest(limit, dated)))


def search_notes(
    state: State, query: str, filters: Filters = NO_FILTERS, limit: int | None = None, meaning: Meaning | None = None
) -> SearchResult:
    """Notes matching every term of `query` (substring, case/accent-insensitive), best first; a note another live
    note replaces comes right after it. With nothing matching every term, `near` holds the closest notes: partial
    matches, fused with the notes closest in meaning when a `meaning` index is given and ready."""
    filters = filters.reading(state)  # a time window asks the state when each note changed
    result = _lexical(state, query, filters, limit, near=meaning is None)
    reasons: dict[str, str] = {}
    near = result.near
    if not result.hits and result.total == 0 and query.strip():
        scores = meaning.scores(query) if meaning is not None else None
        if scores is not None:
            near, reasons = _fused(state, query, filters, scores)
        else:
            if meaning is not None:  # not ready yet: the near matches of words alone
                near = _lexical(state, query, filters, limit).near
            reasons = dict.fromkeys((n.id for n in near), SOME_WORDS)
    hits, near, replaced_by = _newer_first(state, result.hits, near, filters, meaning, reasons)
    return SearchResult(hits, near, result.total, reasons, replaced_by)


SOME_WORDS = "some words match"
SIMILAR = "similar meaning"
# Words of a question that say nothing of what is asked: a note holding "how" or "does" is no closer for it.
_QUESTION_WORDS = frozenset(
    """
    can could did does how may might must our shall should what when where which who why
    """.split()  # noqa: SIM905
)
QUERY_NOISE = _STOPWORDS | _QUESTION_WORDS  # what a question's words are weighed without (the meaning model too)
# A near match's score: its meaning score (a cosine standardised over the notebook, index.py) plus this times the share
# of the query's words it holds. Flat from 0 to 1 with the sentence model on bench/retrieval's questions.
LEX_WEIGHT = 0.25
NEAR_POOL = 30  # partial matches weighed against the meaning matches


def _fused(state: State, query: str, filters: Filters, scores: dict[str, float]) -> tuple[list[Note], dict[str, str]]:
    """Near matches ranked on scores, not ranks: a note's meaning score plus LEX_WEIGHT times the share of the
    query's words it holds (weak lexical leftovers add little, so they never drown a match in meaning alone)."""
    terms = [t for t in _WORD.findall(fold_text(query)) if len(t) > 2 and t not in QUERY_NOISE]
    index = _texts(state)
    lexical = _near_scored(state, index, terms, filters, NEAR_POOL) if terms else {}
    # Ranked on what the list keeps of each note (its revision breaks a tie); a view is made only for the notes
    # returned (made for each of the ~60 was a third of a question's work at 100k notes).
    fused: list[tuple[float, Revision, str]] = []
    for note_id in set(scores) | set(lexical):
        if (listed := state.listed(note_id)) is None:
            continue
        fused.append((scores.get(note_id, 0.0) + LEX_WEIGHT * lexical.get(note_id, 0.0), listed[0], note_id))
    fused.sort(reverse=True)
    near: list[Note] = []
    reasons: dict[str, str] = {}
    for _, _, note_id in fused:
        if (seen := state.facets(note_id)) is None or not filters.admit(seen) or (note := state.note(note_id)) is None:
            continue
        near.append(note)
        sim = scores.get(note_id, 0.0)
        reasons[note_id] = SIMILAR if sim >= LEX_WEIGHT * lexical.get(note_id, 0.0) else SOME_WORDS
        if len(near) == NEAR_LIMIT:
            break
    return near, reasons


def _newer_first(
    state: State,
    hits: list[Note],
    near: list[Note],
    filters: Filters,
    meaning: Meaning | None,
    reasons: dict[str, str],
) -> tuple[list[Note], list[Note], dict[str, str]]:
    """A listed note that a live note replaces (its `replaces` link, or a newer note of its project that says in
    words it changes something and means nearly the same, with a meaning index, or names in its title a thing only
    the two name, with words alone) follows that note, which is listed first (with "replaces")."""
    listed = [n.id for n in (*hits, *near)]
    if not listed:
        return hits, near, {}
    links = {old: new for old, new in _replacements(state).items() if old in listed}
    if len(links) < len(listed):
        unlinked = [i for i in listed if i not in links]
        guessed = (
            _named_changes(state, unlinked) if meaning is None else meaning.replaced(unlinked, _named_alone(state))
        )
        for old, new in guessed.items():
            links.setdefault(old, new)
    replaced_by: dict[str, str] = {}
    for old, new in links.items():
        note = state.note(new)
        if note is not None and not note.trashed and filters.admit(note):
            replaced_by[old] = new
    if not replaced_by:
        return hits, near, {}
    seen: set[str] = set()

    def arrange(notes: list[Note]) -> list[Note]:
        out: list[Note] = []
        for note in notes:
            if note.id in seen:
                continue
            chain: list[Note] = [note]
            cur = note.id
            while (new := replaced_by.get(cur)) is not None and new not in seen and len(chain) < 8:
                newer = state.note(new)
                if newer is None or any(n.id == new for n in chain):
                    break
                chain.append(newer)
                cur = new
            for n in reversed(chain):
                if n.id not in seen:
                    seen.add(n.id)
                    out.append(n)
                    if n.id != note.id:
                        reasons.setdefault(n.id, f"replaces {note.id}")
        return out

    hits = arrange(hits)
    near = arrange(near)
    for old, new in replaced_by.items():
        if old in seen and new in seen:
            reasons.setdefault(new, f"replaces {old}")
    return hits, near, {old: new for old, new in replaced_by.items() if old in seen}


# Words by which a newer note says it changes what an older one said: it takes its place ("replaces", "instead
# of", "in favour of"), moves ("switch", "migrate", "moves from"), ends it ("no longer", "dropped", "retired",
# "deprecated", "phased out"), starts anew ("adopted", "from now on", "going forward", "takes over") or sets a new
# value ("raised to", "cut to", "shifted to", "is now"). A note saying them is taken to replace an older note of its
# project only when the two mean nearly the same (meaning search's SAME_DECISION) or their titles name a thing no
# other note names (`_named_alone`). Matched in the lowercased text: IGNORECASE made each note ~23 us instead of ~6
# (100k notes embedded, 1.7 s).
REPLACING = re.compile(
    r"\b(?:replac|supersed|instead of|in place of|rather than|in favou?r of"
    r"|switch|migrat|mov(?:e[sd]?|ing) (?:from|to|away|back|over)|port(?:s|ed)? to"
    r"|no longer|not any ?more|stop(?:s|ped)? using|drop(?:s|ped|ping)?\b|retir(?:e|ed|es|ing)\b|deprecat|abandon"
    r"|sunset|phas(?:e|ed|es|ing) out|ditch|decommission"
    r"|adopt|from now on|going forward|takes? over|took over|becomes|became"
    r"|chang(?:e|ed|es|ing) (?:to|from)|updat(?:e|ed|es|ing) to|upgrad|downgrad|revert"
    r"|(?:rais|lower|increas|decreas|reduc|cut|extend|shorten|bump|shift)(?:e|ed|es|s|ing)? to"
    r"|is now|are now|now (?:go|use|run|live|happen|come|sit))"
)


def says_a_change(note: Note) -> bool:
    """Whether the note says in words that it changes what an older note said (REPLACING)."""
    return any(REPLACING.search(text.lower()) for text in (note.title, note.body))


def _in_two_notes_at_most(state: State, index: _Texts, word: str) -> bool:
    """Whether at most two notes hold `word` (`count_estimate`, a scan of the index's vocabulary), asked only when the
    duplicate hint's postings do not already show it in more than two titles (a look-up: titles repeat their words).
    Those postings may count a retitled note twice: a word then seems commoner than it is, never rarer."""
    titles = note_index(state).title_words.get(word)
    return (titles is None or len(titles) <= 2 * _ENTRY) and index.count_estimate(word) <= 2


def _named_alone(state: State) -> Callable[[str, str], bool]:
    """Whether two notes' titles share a word that no other note holds ("Dropped Jest for Vitest" and "Web unit tests
    run on Jest" in a notebook where no other note says "jest"): they name a thing only they name. The index's count
    is an upper bound (it counts every word holding the word), so a word it counts in more than two notes may be
    rare still, never the other way round. The index is looked up at the first call: most searches make none."""
    index: _Texts | None = None

    def named(old: str, new: str) -> bool:
        nonlocal index
        a, b = state.note(old), state.note(new)
        if a is None or b is None:
            return False
        shared = words(a.title) & words(b.title)
        if shared and index is None:
            index = _texts(state)
        return index is not None and any(_in_two_notes_at_most(state, index, word) for word in shared)

    return named


def _named_changes(state: State, note_ids: list[str]) -> dict[str, str]:
    """Words alone: of these notes, those a newer note of the same project replaces because it says a change and its
    title shares with theirs a word no other note holds (`_named_alone`, without the likeness a meaning index asks
    too): old id -> the newest such note (made last; as the meaning index orders them).

    The other note holds the word in its title, so it is in the duplicate hint's postings of the word: a word is
    looked at only when those show it in exactly two titles, the other note is checked first, and the vocabulary is
    scanned (`_in_two_notes_at_most`) only for a pair that passes. Scanned for every title word of every note listed,
    it was most of a typed search's time in a small notebook (1k notes: 1.5 ms against 0.3 ms, where most title words
    are in one title). A cold index (a scan while it warms) counts every note for a word, so nothing is guessed then."""
    index = _texts(state)
    derived = note_index(state)
    if index is not derived.texts:
        return {}
    texts, title_words = derived.texts, derived.title_words
    out: dict[str, str] = {}
    for old in note_ids:
        note = state.note(old)
        number = texts.number(old)
        if note is None or number is None:
            continue
        best: Note | None = None
        for word in words(note.title):
            entries = title_words.get(word)
            if entries is None or len(entries) != 2 * _ENTRY:  # in this title alone, or in three or more
                continue
            others = {_entry_number(entries[at + 2 : at + _ENTRY]) for at in (0, _ENTRY)} - {number}
            for other in others:
                found = texts.numbered(other)  # None: an entry left by a note since gone
                if found is None or (record := state.notes.get(found[0])) is None:
                    continue
                seen = record.facets()  # no view made: most fail here
                if seen is None or seen.trashed or seen.project != note.project:
                    continue
                new = state.note(record.id, keep=False)  # not listed: no view kept
                if (
                    new is not None
                    and (new.created, new.revision) > (note.created, note.revision)
                    and (best is None or (new.created, new.revision) > (best.created, best.revision))
                    and word in words(new.title)
                    and says_a_change(new)
                    and _in_two_notes_at_most(state, texts, word)
                ):
                    best = new
        if best is not None:
            out[old] = best.id
    return out


@dataclass
class _Links:
    """The `replaces` links of live notes, derived from a State and kept with it, brought up to date from the fold's
    change feed (a search after a write looks at the notes that changed, not at the notebook)."""

    pending: set[str]  # notes changed since their link was last read
    linking: dict[str, str] = field(default_factory=dict)  # a live note -> the note it replaces
    reverse: dict[str, str] | None = None  # old id -> the newest live note that replaces it (None: to work out)


def _new_links(state: State) -> _Links:
    links = _Links(pending=set(state.notes))
    state.note_feeds.append(links.pending)
    return links


def _links(state: State) -> _Links:
    """The links, brought up to date."""
    links = state.derived(_Links, _new_links)
    if links.pending:
        records = state.notes
        for note_id in links.pending:  # every note, the first time: a view only of a note that sets the field
            rec = records.get(note_id)
            note = rec.note(keep=False) if rec is not None and rec.sets("replaces") else None
            was = links.linking.pop(note_id, None)
            if note is not None and note.replaces and not note.trashed:
                links.linking[note_id] = note.replaces
                links.reverse = None  # a new link, or a linking note changed (its revision orders the links)
            elif was is not None:
                links.reverse = None
        links.pending.clear()
    return links


def _replacements(state: State) -> dict[str, str]:
    """Every note another live note names in its `replaces` field: old id -> the newest such note."""
    links = _links(state)
    if links.reverse is None:
        newest: dict[str, tuple[Stamp, str]] = {}
        for new, old in links.linking.items():
            note = state.note(new)
            if note is None:
                continue
            cur = newest.get(old)
            if cur is None or note.revision > cur[0]:
                newest[old] = (note.revision, new)
        links.reverse = {old: new for old, (_, new) in newest.items()}
    return links.reverse


# What testing one note's text for a term costs, in postings entries put in a set (~15 ns each): a term whose postings
# cost less than that test on each note the terms before it left is intersected by its postings. Two words that are
# each in a quarter of 100k notes: 28k texts tested took 7 ms, their postings 1.
_TEXT_TEST_COST = 8


def _lexical(state: State, query: str, filters: Filters, limit: int | None, near: bool = True) -> SearchResult:
    terms = fold_text(query).translate(_UNMARK).split()
    if not terms:
        notes, total = list_notes(state, filters, limit=limit)
        return SearchResult(notes, [], total)
    index = _texts(state)
    estimates: dict[str, int] = {}
    # A term no note holds ends the search: looked for first among terms no word is likely to hold whole, such as
    # a question's last word with its question mark (each estimate scans the index's vocabulary).
    for term in sorted(terms, key=lambda term: (term.isalnum(), -len(term))):
        estimates[term] = index.count_estimate(term)
        if not estimates[term]:
            return SearchResult([], _near(state, index, terms, filters) if near else [], 0)
    ordered = sorted(terms, key=estimates.__getitem__)
    numbers: set[int] = set()
    candidates: set[str] = set()
    if isinstance(index, SubstringIndex):
        # The index's numbers of notes, not their ids, until the page is known: a common word matches thousands of
        # notes, and a set of ints fills several times faster than one of ids (no id read per postings entry).
        numbers, text_at = index.candidate_numbers(ordered[0]), index.text_at
        for term in ordered[1:]:
            if not numbers:
                break
            if estimates[term] < _TEXT_TEST_COST * len(numbers):  # its postings, intersected: two common words
                numbers = index.numbers_among(term, numbers)
            else:  # a rare first term leaves few notes: each one's text holds the term or not
                numbers = {number for number in numbers if term in text_at(number)}
    else:
        candidates = index.candidates(ordered[0])
        for term in ordered[1:]:
            if not candidates:
                break
            candidates = {key for key in candidates if term in (index.text(key) or "")}
    if not candidates and not numbers:  # nothing to rank (a question in an agent's own words): to the near list
        return SearchResult([], _near(state, index, terms, filters) if near else [], 0)
    cap = DEFAULT_LIMIT if limit is None else max(0, min(limit, MAX_LIMIT))  # bounded keeps no more
    bounds = _bounds(index, terms)
    if isinstance(index, SubstringIndex):
        if isinstance(inside := filters.inside, LatestIn):  # a time window's notes: the matches are those of them
            numbers = _window_numbers(state, index, inside, numbers)
        if filters.plain():  # no filter but the trash's (and a window's, applied above): ranked head first
            quick = _head_first(state, index, numbers, terms, bounds, filters.trashed, cap)
            if quick is not None and quick[1]:
                return SearchResult(bounded(quick[0], limit), [], quick[1])
        candidates = set(map(index.key_at, numbers))
    matches = _admitted(state, candidates, filters)
    ranked = _ranked(state, matches, index.text, _same, terms, bounds, cap)
    hits = bounded([note for _, note in ranked], limit)
    closest = [] if matches or not near else _near(state, index, terms, filters)
    return SearchResult(hits, closest, len(matches))


def _near(state: State, index: _Texts, terms: list[str], filters: Filters) -> list[Note]:
    """Closest notes when nothing matched every term: most terms matched, or a term's longest matching prefix. A
    question's own words ("how", "do", "we", ...) are left out when it has others: in a big notebook they are in
    nearly every note, and they only told the notes apart by chance (and cost a pass over all of them); counted
    again when the others are in no note."""
    content = [core for term in terms if len(core := term.strip(_PUNCTUATION)) > 2 and core not in QUERY_NOISE]
    scored = _near_candidates(state, index, content, filters) if content else []
    if not scored and content != terms:
        scored = _near_candidates(state, index, terms, filters)
    best = heapq.nlargest(NEAR_LIMIT, scored, key=lambda s: s[:3])
    return [note for item in best if (note := state.note(item[3])) is not None]


def _near_scored(state: State, index: _Texts, terms: list[str], filters: Filters, pool: int) -> dict[str, float]:
    """The `pool` notes holding most of the query's terms (or their longest matching prefixes), with the share of
    the terms each holds (0..1); ties go to the greater id. Counted with set operations, never note by note
    (`_by_count`: a question's common words each hold thousands of notes). With the index, the notes are its
    numbers until a count is ranked: a common word's notes as ids were most of a question's lexical work (~6 ms of
    ~10 at 100k notes of English)."""
    if isinstance(index, SubstringIndex):
        return _pooled(state, _probed(index.candidate_numbers, terms), len(terms), filters, pool, index.key_at)
    return _pooled(state, _probed(index.candidates, terms), len(terms), filters, pool, _same)


def _pooled(
    state: State,
    probes: list[tuple[str, set[_Key]]],
    terms: int,
    filters: Filters,
    pool: int,
    key_of: Callable[[_Key], str],
) -> dict[str, float]:
    """`_near_scored` over the probes' notes as keys or numbers (`key_of` gives a note's id)."""
    admit = None if filters == NO_FILTERS else filters.admit
    ranked: list[tuple[str, int]] = []
    for c, exactly in _by_count(probes, None if admit is not None else pool):
        level = map(key_of, exactly)
        need = pool - len(ranked)
        if admit is None:
            ranked += [(key, c) for key in heapq.nlargest(need, level)]
        else:
            kept = [key for key in level if (seen := state.facets(key)) is not None and admit(seen)]
            ranked += [(key, c) for key in heapq.nlargest(need, kept)]
        if len(ranked) >= pool:
            break
    return {key: count / terms for key, count in ranked}


def _by_count(probes: list[tuple[str, set[_Key]]], pool: int | None) -> Iterator[tuple[int, set[_Key]]]:
    """(count, the notes found in exactly that many of the probes), most first. Counted with set operations over the
    probes' notes, rarest first: `levels[c]` holds the notes found in more than c of them. With a `pool`, once the
    notes already found in more probes than are left fill it, no note first seen in a commoner probe can enter it,
    and those probes are only intersected with the notes found so far (such notes are then left out)."""
    found = sorted((notes for _, notes in probes), key=len)
    levels: list[set[_Key]] = []
    for i, notes in enumerate(found):
        for c in range(len(levels) - 1, -1, -1):
            both = levels[c] & notes
            if not both:
                continue
            if c + 1 == len(levels):
                levels.append(both)
            else:
                levels[c + 1] |= both
        # A note first seen here counts at most 1 + `left`: it cannot enter a pool filled by notes counting more.
        left = len(found) - i - 1
        if not levels:
            levels.append(set(notes))
        elif pool is None or len(levels) <= left + 1 or len(levels[left + 1]) < pool:
            levels[0] |= notes
    for c in range(len(levels) - 1, -1, -1):
        yield c + 1, levels[c] - levels[c + 1] if c + 1 < len(levels) else levels[c]


# English inflections a question's word may carry that the note's word does not ("deployed" for "deploys",
# "services" for "service", "retrained" for "retraining"): a partial match looks for the word without it, and the
# substring index then finds every form. Measured on bench/retrieval (run.py), with meaning search: superseded
# decisions newer first 16 -> 18 of 18, one shared word 28 -> 29 of 33, nothing lost; words only: newer first 9 -> 11,
# one shared word 23 -> 22. Snowball's English stemmer did the same with meaning search, and its package imports 35
# languages (2.3 MB).
_INFLECTIONS = ("ies", "ing", "es", "ed", "s", "ly")
STEM_MIN = 4  # letters an inflection leaves at least: "uses", "need" and "only" stay whole


def inflection_stem(term: str) -> str:
    """`term` without one English inflection when STEM_MIN letters or more are left ("deployed" -> "deploy",
    "services" -> "servic", "replies" -> "repl", "nightly" -> "night"): a prefix of every form of the word. A term
    of anything but letters (an identifier, a number) is kept as it is."""
    if term.isalpha():
        for ending in _INFLECTIONS:
            if term.endswith(ending) and len(term) - len(ending) >= STEM_MIN:
                return term[: -len(ending)]
    return term


def _probed(holding: Callable[[str], set[_Key]], terms: list[str]) -> list[tuple[str, set[_Key]]]:
    """Per term, its inflection stem or the stem's longest prefix of three letters or more that some note holds,
    with those notes as `holding` gives them (ids, or the index's numbers)."""
    probes: list[tuple[str, set[_Key]]] = []
    for term in terms:
        probe = inflection_stem(term)
        notes = holding(probe)
        while not notes and len(probe) > 3:
            probe = probe[:-1]
            notes = holding(probe)
        if notes:
            probes.append((probe, notes))
    return probes


def _near_candidates(
    state: State, index: _Texts, terms: list[str], filters: Filters
) -> list[tuple[int, float, Revision, str]]:
    """(terms matched, relevance, revision, id) of the notes holding the most probes that pass `filters`: those of
    the most probes first, then fewer, until NEAR_LIMIT are scored (a note holding fewer cannot rank above them). A
    question's common words hold most of the notebook: no note's view is made (`NoteRecord.listed`,
    `NoteRecord.facets`), and with the index its notes are numbers until they are scored."""
    if isinstance(index, SubstringIndex):
        probes = _probed(index.candidate_numbers, terms)
        inside = filters.inside
        # A time window's notes alone: each probe's notes narrowed to them, not each one's record read.
        if isinstance(inside, LatestIn):
            probes = [(probe, _window_numbers(state, index, inside, notes)) for probe, notes in probes]
        return _scored_levels(state, probes, filters, index.key_at, index.text_at, isinstance(inside, LatestIn))
    return _scored_levels(state, _probed(index.candidates, terms), filters, _same, lambda key: index.text(key) or "")


def _scored_levels(
    state: State,
    probes: list[tuple[str, set[_Key]]],
    filters: Filters,
    key_of: Callable[[_Key], str],
    text_of: Callable[[_Key], str],
    windowed: bool = False,
) -> list[tuple[int, float, Revision, str]]:
    """`_near_candidates` over the probes' notes as keys or numbers (`windowed`: only notes of the filters' window)."""
    words = [probe for probe, _ in probes]
    scored = []
    plain = filters.plain() and (filters.window is None or windowed)  # the trash flag alone left to check
    for _, exactly in _by_count(probes, None):
        for held in exactly:
            key = key_of(held)
            listed = state.listed(key)
            if listed is None:
                continue
            if plain:
                if listed[1] != filters.trashed:
                    continue
            elif (seen := state.facets(key)) is None or not filters.admit(seen):
                continue
            relevance, matched = _score(text_of(held), words)
            scored.append((matched, relevance, listed[0], key))
        if len(scored) >= NEAR_LIMIT:
            break
    return scored


_WORD = re.compile(r"\w+")
_PUNCTUATION = string.punctuation + "\u00bf\u00a1\u2026\u201c\u201d\u2018\u2019\u00ab\u00bb"  # ¿ ¡ … and curly quotes


def _folded_words(folded: str) -> set[str]:
    return {w for w in _WORD.findall(folded) if len(w) > 2 and w not in _STOPWORDS}


def words(text: str) -> set[str]:
    """The words that carry meaning in `text` (folded, three letters or more, common English words dropped)."""
    return _folded_words(fold_text(text))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def similar_notes(
    state: State,
    *,
    kind: str,
    project: str | None,
    title: str,
    exclude: str | None = None,
    threshold: float = 0.5,
) -> list[Note]:
    """Live notes of the same kind and project that look like the same fact: at least `threshold` of their
    title words shared (Jaccard), so the caller can suggest updating that note instead of adding a near-copy.

    Runs on every remember, so it never waits for the index: notes changed since the last search are
    checked directly, the rest through the title-word postings."""
    mine = words(title)
    if not mine:
        return []
    derived = note_index(state)
    if len(derived.pending) > PENDING_DIRECT:
        refresh_note_index(state, budget=COLD_INDEX)
    pending = derived.pending
    want = (fold_text(project or ""), fold_text(kind))
    found: dict[str, float] = {}

    def consider(note_id: str, folded_title: str, folded_project: str, folded_kind: str) -> None:
        if (folded_project, folded_kind) == want:
            likeness = _jaccard(mine, _folded_words(folded_title))
            if likeness >= threshold:
                found[note_id] = likeness

    if len(pending) > COLD_INDEX:
        direct: Iterable[str] = state.notes  # the index is cold: look at every title once
    else:
        direct = pending
        # Jaccard >= t means the other title holds at least ceil(t * n) of our n words: count each note's
        # hits over the words' entries of this kind and project and look closer only at notes that reach that
        # (minus the words too common to count: more than COMMON_TITLE_WORD such entries).
        code = derived.title_codes.get((want[1], want[0]))
        listed: list[bytes] = []  # the number digits of every entry of this kind and project, over the words
        common = 0
        if code is not None:  # else no indexed note has this kind and project
            entries_of = _entries_of(code)
            for word in mine:
                entries = derived.title_words.get(word)
                if entries is None:
                    continue
                if len(entries) > _ENTRY * COMMON_TITLE_WORD and entries.count(code) > COMMON_TITLE_WORD:
                    common += 1
                else:
                    listed += entries_of.findall(entries)
        need = max(1, math.ceil(threshold * len(mine)) - common)
        # Stale entries may count twice: that only adds a candidate to check, never loses one.
        for digits, count in Counter(listed).items():
            if count >= need and (held := derived.texts.numbered(_entry_number(digits))) is not None:
                key, text = held
                if key not in pending:
                    folded_title, _, folded_project, folded_kind, _ = _fields(text)
                    consider(key, folded_title, folded_project, folded_kind)
    for note_id in direct:
        note = state.note(note_id)
        if note is not None:
            consider(note_id, fold_text(note.title), fold_text(note.project or ""), note.kind)
    notes = [
        (likeness, note)
        for note_id, likeness in found.items()
        if (note := state.note(note_id)) is not None and not note.trashed and note.id != exclude
    ]
    notes.sort(key=lambda item: (item[0], item[1].revision), reverse=True)
    return [note for _, note in notes[:3]]
