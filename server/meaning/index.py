"""The meaning index: one vector per note, derived data like the op cache. Built in the background after start and
after writes (`refresh`, a batch at a time, never holding the store's lock while it embeds), cached in
`cache/meaning.bin` (outside `log/`: never synced, never exported; rebuilt when the model changes), and asked by
the search (`scores`) only once warm: until then search answers lexically. A start takes from the file every note
whose mark (`NoteRecord.mark`) is the one it was saved with, without reading the note; after that, a pass looks at
the notes the state's change feed names.

A note's vector mixes its whole text and its title (the title says what the note is about). Scores are cosines
against the notebook's mean vector taken out (what every note shares says nothing about any one of them).

Vectors are held (and saved) as one signed byte a component and a scale a row, not four-byte floats: a quarter of
the memory (100k notes: 26 MB, not 102), and cosines within 0.001 of the float vectors' (only notes tied closer than
that can swap places). A question is scored a block of rows at a time, the block made float32 on the way (~1.4x the
time of a float matrix).

A big notebook is scored in two passes when the model allows it (`Embedder.coarse`): each row's signs (one bit a
component, 48 bytes at 384 dimensions) pick the rows whose signs most agree with the question's, COARSE_SHARE of the
notebook, and only those are scored as above. A score's standardisation does not need every row's cosine: the mean and
spread of a question's cosines over the notebook follow from the rows' sum and the sum of their outer products
(`_sum`, `_square`), kept as rows come and go.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.fold import Revision
from ..core.model import Note
from ..core.search import says_a_change
from ..storage.files import private_dir, write_whole
from .model import Embedder, Unavailable, question_text

if TYPE_CHECKING:
    from ..core.fold import State
    from ..storage.store import Store
    from .model import Matrix

log = logging.getLogger(__name__)

BATCH = 512  # notes embedded per step (a few ms each step)
LOOK = 1000  # notes read per hold of the store's lock when the notebook changed (~10 ms at 100k notes)
WRITE_ROWS = 256  # vectors written to the cache file at a time (64 KB at 256 dims)
# After the first, the cache file is written at most this often: it was written again after every write (at 100k
# notes, 100 MB and ~8 MB of JSON a note written). A note written since is embedded again at the next start.
WRITE_EVERY_S = 300.0
SCORE_ROWS = 4096  # rows made float32 at a time to score a question (4 MB at 256 dims: stays in the CPU's cache)
# Above this many rows a model with `coarse` set scores in two passes, picking by signs first: a pass over every row of
# 384 int8 components was ~20 ms of CPU at 100k notes (memory-bound: float32 rows resident took as long), the signs
# ~4 ms. At or below it every row is scored (a few ms), so results are exactly those of one pass.
EXACT_ROWS = 20_000
# The share of the notebook scored in full after the signs, and at least COARSE_ROWS. On 6,000 notes of bench/retrieval
# text (all-MiniLM-L6-v2) and its 133 questions, the rows picked held every one of the one-pass top 5 at a sixth
# (99.85% at 12%, 99.5% at 8%, 82% at 0.5%), and 99.55% of its top 30.
COARSE_SHARE = 1 / 6
COARSE_ROWS = 2000
TITLE_WEIGHT = 0.3
CENTRE_PRIOR = 30  # notes' worth of a zero mean the notebook's mean is shrunk towards
CANDIDATES = 30  # meaning matches handed to the fusion
SAME_DECISION = 0.6  # cosine at which a newer note that says it replaces something is taken to replace an older one
# The same when the two notes' titles name a thing no other note names ("Dropped Jest for Vitest" and "Web unit tests
# run on Jest"): product names weigh much in a static model's vector, and two notes naming different ones for the same
# job often meant less alike than SAME_DECISION (0.37 there).
NAMED_DECISION = SAME_DECISION / 2
NAMED_TRIES = 8  # notes between the two likenesses asked whether their titles name it (each asks the notebook)
LOOKED_AT = 2 * NAMED_TRIES  # most alike replacing notes, of each note asked, looked at one by one
MAGIC = b"HNMEAN2\n"  # int8 vectors and a float32 scale a row
MAGIC_1 = b"HNMEAN1\n"  # before: float32 vectors (read, so an upgrade embeds nothing again; written as MAGIC)


def note_texts(note: Note) -> tuple[str, str]:
    """(whole text, title) as embedded."""
    whole = f"{note.title}. {note.body} {' '.join(note.tags)} {note.project or ''}"
    return whole, note.title


def quantized(vectors: Matrix) -> tuple[Any, Matrix]:
    """Rows as int8 and a scale each (the row's largest component over 127): row ~= int8 * scale. The row's largest
    component is exactly +-127, so a row made from its own int8 and scale gives them back unchanged."""
    import numpy as np  # hivenote[meaning]

    scales = (np.abs(vectors).max(axis=1) / 127).astype(np.float32)
    codes = np.rint(vectors / np.where(scales > 0, scales, 1)[:, None]).astype(np.int8)
    return codes, scales


def _digest(note: Note) -> int:
    """Of the text a note's vector is made from (saved in the file as 16 hex digits)."""
    whole, _ = note_texts(note)
    return int.from_bytes(hashlib.blake2b(whole.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class _Snapshot:
    """What a search reads, swapped whole after a change so queries take no lock. `vectors` is a view of the
    index's matrix: a row written meanwhile is a newer vector of the same note, never another note's."""

    ids: tuple[str | None, ...]  # row -> note id (None: a free row)
    vectors: Any  # (rows, dim) int8: a unit row over its scale
    scales: Matrix  # (rows,)
    alive: Any  # bool per row
    mean: Matrix  # (dim,)
    replacing: Any  # rows of notes that say they change something (their vectors are `vectors`' rows)
    replacing_codes: Any  # of each row in `replacing`: its project's number (`_Rows.code`), int32
    replacing_created: Any  # and when its note was made (ms), int64: which of two notes may be the newer
    live: int  # rows in use
    signs: Any  # uint64 (dim / 64, rows): each row's signs (`signs`), a word of every row after another
    first: Any  # float64 (dim,): the live rows' mean
    second: Any  # float64 (dim, dim): the sum of their outer products (never changed in place)
    coarse: bool  # scored in two passes above EXACT_ROWS (`Embedder.coarse`)
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # worked out once, when asked

    def by_project(self) -> dict[int, tuple[Any, Any, Any, Any]]:
        """The replacing rows of each project's number, oldest first, with when each one's note was made, and their
        vectors and scales copied in that order (a search reads a project's rows as one block, where gathering them
        from the matrix at each question was a quarter of its work at 100k notes): a note is compared with its own
        project's newer rows alone. Worked out at the first search that asks after a write (two searches at once may
        both work it out, to the same answer)."""
        import numpy as np  # hivenote[meaning]

        groups: dict[int, tuple[Any, Any, Any, Any]] | None = self.memo.get("by_project")
        if groups is None:
            order = np.lexsort((self.replacing_created, self.replacing_codes))
            codes, rows, created = self.replacing_codes[order], self.replacing[order], self.replacing_created[order]
            vectors, scales = self.vectors[rows], self.scales[rows]
            cuts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), len(codes)]
            groups = {
                int(codes[a]): (rows[a:b], created[a:b], vectors[a:b], scales[a:b])
                for a, b in itertools.pairwise(cuts)
                if b > a
            }
            self.memo["by_project"] = groups
        return groups


# What the index keeps of each note beside its vector, in the cache file after the vectors: numbers in one block of
# records (strings in the header), so a start takes a note whose mark is the same without reading it.
_NUMBERS = (
    ("wall", "<i8"),
    ("counter", "<i8"),
    ("seq", "<i8"),
    ("stamp_digest", "<u8"),
    ("created", "<i8"),
    ("mark", "<u8"),
    ("replacing", "u1"),
)
_TYPECODES = {"<i8": "q", "<u8": "Q", "u1": "B"}


class _Rows:
    """What the index keeps of each note, by row, in columns of numbers (~60 bytes a note, where a tuple, a stamp and
    their ints took ~450): its revision (the stamp of its latest op), the digest of the text its vector was made from,
    its project, when it was created, whether it says it replaces something, and its `NoteRecord.mark`."""

    def __init__(self) -> None:
        self.numbers: dict[str, array[int]] = {name: array(_TYPECODES[kind]) for name, kind in _NUMBERS}
        self.digests = array("Q")
        self.nodes: list[str | None] = []
        self.projects: list[str | None] = []
        self.codes = array("i")  # the project's number (`code`), compared a block of rows at a time by `replaced`
        self._codes: dict[str | None, int] = {None: 0}

    def code(self, project: str | None) -> int:
        """A number for the project, the same for the index's life (one per project ever seen)."""
        return self._codes.setdefault(project, len(self._codes))

    def add(self) -> None:
        """One more row, empty."""
        for column in self.numbers.values():
            column.append(0)
        self.digests.append(0)
        self.nodes.append(None)
        self.projects.append(None)
        self.codes.append(0)

    def put(self, row: int, note: Note, digest: int, replacing: bool, mark: int) -> None:
        revision = note.revision
        numbers = self.numbers
        numbers["wall"][row], numbers["counter"][row], numbers["seq"][row] = revision[0], revision[1], revision[3]
        numbers["stamp_digest"][row], numbers["created"][row] = revision[4], note.created
        numbers["mark"][row], numbers["replacing"][row] = mark, replacing
        self.digests[row] = digest
        self.nodes[row], self.projects[row] = revision[2], note.project
        self.codes[row] = self.code(note.project)

    def take(self, row: int, file: _File, at: int) -> None:
        """The file's entry `at`, as it was saved."""
        for name, column in self.numbers.items():
            column[row] = file.numbers[name][at]
        self.digests[row] = file.digests[at]
        self.nodes[row], self.projects[row] = file.nodes[at], file.projects[at]
        self.codes[row] = self.code(file.projects[at])

    def clear(self, row: int) -> None:
        """A freed row: nothing of its note is kept (its project's string, its claim to replace)."""
        self.numbers["replacing"][row] = self.numbers["mark"][row] = self.digests[row] = self.codes[row] = 0
        self.nodes[row] = self.projects[row] = None

    def newer(self, row: int) -> tuple[int, Revision]:
        """(created, revision) of the row's note: which of two notes is newer (made in the same ms: the one written
        last)."""
        n = self.numbers
        node = self.nodes[row] or ""
        return n["created"][row], (n["wall"][row], n["counter"][row], node, n["seq"][row], n["stamp_digest"][row])


class _File:
    """The cache file's notes, as columns, until the first pass is done."""

    def __init__(self, header: dict[str, Any], block: Any) -> None:
        ids, digests = header["ids"], header["digests"]
        if len(digests) != len(ids):
            raise ValueError("the cache file's columns disagree")
        self.rows: dict[str, int] = dict(zip(ids, range(len(ids)), strict=True))  # note -> row in the file
        self.digests = array("Q", [int(d, 16) for d in digests])  # of the text each vector was made from
        self.numbers: dict[str, array[int]] = {}
        self.nodes: list[str | None] = []
        self.projects: list[str | None] = []
        if block is not None:
            nodes, projects = header["nodes"], header["projects"]
            if len(nodes) != len(ids) or len(projects) != len(ids) or len(block) != len(ids):
                raise ValueError("the cache file's columns disagree")
            self.numbers = {
                name: array(_TYPECODES[kind], block[name].astype(block.dtype[name].newbyteorder("=")).tobytes())
                for name, kind in _NUMBERS
            }
            # One string per node and per project, as in the notebook (JSON makes one per occurrence).
            self.nodes = [sys.intern(node) if type(node) is str else None for node in nodes]
            self.projects = [sys.intern(project) if type(project) is str else None for project in projects]
        self.marks = self.numbers["mark"] if block is not None else array("Q", bytes(8 * len(ids)))  # 0: of before


_NO_FILE = _File({"ids": [], "digests": []}, None)


class _Followed:
    """One state's token (`State.derived`): a look at another state than the last (the store folded the log again)
    is a look at every note."""


def _followed(_: State) -> _Followed:
    return _Followed()


def signs(vectors: Any) -> Any:
    """Each row's component signs (1: above zero), packed into 64-bit words (uint64 (rows, dim / 64), zero-padded)."""
    import numpy as np  # hivenote[meaning]

    packed = np.packbits(np.asarray(vectors) > 0, axis=1)
    words = (packed.shape[1] + 7) // 8
    padded = np.zeros((len(packed), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return padded.view(np.uint64)


_scratch = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """A working array of this thread's own, kept for its next question: the server fixes glibc's threshold for
    mapping a big block (heap.py), so a fresh array of more than 128 KiB is a new mapping whose every page faults in
    (a question at 100k notes made ~15 MB of them: a few ms)."""
    import numpy as np  # hivenote[meaning]

    kept = getattr(_scratch, name, None)
    size = int(np.prod(shape))
    if kept is None or kept.dtype != dtype or kept.size < size:
        kept = np.empty(size, dtype=dtype)
        setattr(_scratch, name, kept)
    return kept[:size].reshape(shape)


def _cosines(vectors: Any, q: Matrix, rows: Any = None) -> Matrix:
    """Every row's int8 components (or those of `rows`) times `q` (float32): a block of rows made float32 at a time,
    then einsum, not `@`: one pass on this thread. BLAS's matrix-vector product was 2-4x slower here (100k notes:
    14-24 ms against 5.5-6.8 ms; its threads fight the server's own for two cores)."""
    import numpy as np  # hivenote[meaning]

    count = len(vectors) if rows is None else len(rows)
    out = np.empty(count, dtype=np.float32)
    block = scratch("block", (min(SCORE_ROWS, count), vectors.shape[1]), np.float32)
    gathered = scratch("gathered", block.shape, np.int8) if rows is not None else block
    for start in range(0, count, SCORE_ROWS):
        if rows is None:
            part = vectors[start : start + SCORE_ROWS]
        else:
            chunk = rows[start : start + SCORE_ROWS]
            part = np.take(vectors, chunk, axis=0, out=gathered[: len(chunk)])
        floats = block[: len(part)]
        floats[...] = part
        np.einsum("ij,j->i", floats, q, out=out[start : start + len(part)])
    return out


def _coarse(snap: _Snapshot, q: Matrix) -> Any:
    """The live rows whose signs agree with the question's most (COARSE_SHARE of them, at least COARSE_ROWS)."""
    import numpy as np  # hivenote[meaning]

    # A word of every row at a time (each word's row of the matrix is contiguous): 1.1 ms at 100k notes, where the
    # words of each row summed along the rows took 4.
    mine = signs(q[None, :])[0]
    rows = snap.signs.shape[1]
    apart = np.zeros(rows, dtype=np.uint16)
    differ, count = scratch("differ", (rows,), np.uint64), scratch("count", (rows,), np.uint8)
    for word, theirs in zip(mine, snap.signs, strict=True):
        np.bitwise_xor(theirs, word, out=differ)
        np.bitwise_count(differ, out=count)
        apart += count
    np.putmask(apart, np.logical_not(snap.alive, out=scratch("dead", (rows,), np.bool_)), np.iinfo(np.uint16).max)
    take = min(len(apart), max(COARSE_ROWS, int(snap.live * COARSE_SHARE)))
    return np.argpartition(apart, take - 1)[:take] if take < len(apart) else np.arange(len(apart))


class MeaningIndex:
    """Vectors of every live or trashed note, one row each in a matrix that grows by half again. `load` makes the
    model (called once, in the background)."""

    def __init__(self, cache: Path | None, load: Callable[[], Embedder], batch: int = BATCH) -> None:
        self.cache = cache
        self._load = load
        self.batch = batch  # notes embedded per `refresh`
        self.model: Embedder | None = None
        self.problem: str | None = None  # why it is off (model unavailable), for doctor and status
        self._pos: dict[str, int] = {}  # note id -> row
        self._ids: list[str | None] = []
        self._rows = _Rows()  # what the index keeps of each row's note
        self._free: list[int] = []
        self._matrix: Any = None  # int8 (rows, dim)
        self._scales: Any = None  # float32 (rows,): a row is its int8 times its scale
        self._alive: Any = None
        self._sum: Any = None  # of the live rows, for the mean (float64)
        self._square: Any = None  # of their outer products (float64 (dim, dim)): the spread of a question's cosines
        self._signs: Any = None  # uint64 (dim / 64, rows): each component's sign, for the coarse pass (`signs`)
        self._queue: dict[str, tuple[Note, int]] = {}  # note id -> the note and its mark, to embed
        # The notes an op touched since the last look (the state's change feed), and the state it follows (its token):
        # another state (a reload) is looked at whole.
        self._feed: set[str] = set()
        self._followed: _Followed | None = None
        self._cached = _NO_FILE  # the cache file's notes, until the first pass is done
        self._cached_rows: Any = None  # the cache file's int8 vectors, mapped until the first pass is done
        self._cached_scales: Matrix | None = None
        self._snapshot: _Snapshot | None = None
        self._dirty_cache = False
        self._written_at: float | None = None  # time.monotonic() of the last write of the cache file
        self._embedded = False  # the model embedded notes since the last pass ended (its caches hold their words)
        self._lock = threading.Lock()
        self._warm = threading.Event()

    # -- state ----------------------------------------------------------------------------------------

    @property
    def warm(self) -> bool:
        """Every note embedded once since start (later writes catch up within a step)."""
        return self._warm.is_set()

    @property
    def indexed(self) -> int:
        """Notes that have a vector."""
        return len(self._pos)

    @property
    def pending(self) -> int:
        """Notes queued to embed (new or changed since they were embedded)."""
        return len(self._queue)

    def status(self) -> dict[str, object]:
        return {
            "on": self.problem is None,
            "model": self.model.model_id if self.model else None,
            "warm": self.warm,
            "notes": self.indexed,
            "pending": self.pending,
            "problem": self.problem,
        }

    # -- building --------------------------------------------------------------------------------------

    def _model(self) -> Embedder | None:
        if self.model is None and self.problem is None:
            try:
                self.model = self._load()
            except Unavailable as exc:
                self.problem = str(exc)
                log.info("meaning search is off: %s", exc)
                return None
            self._cached, self._cached_rows, self._cached_scales = self._read_cache(self.model.model_id)
            if self._cached_rows is not None and self._cached_scales is None:
                self._dirty_cache = True  # a file of before: written again as int8 once warm
        return self.model

    def refresh(self, store: Store, budget: int | None = None) -> bool:
        """Embed up to `budget` notes that are new or changed since they were last embedded; True when none is left.
        Looks at the notebook (under the store's lock, briefly) only when it changed; embeds without the lock."""
        import numpy as np  # hivenote[meaning]

        model = self._model()
        if model is None:
            return True
        with self._lock:
            gone = self._look(store)
            for note_id in gone:
                self._remove(note_id)
            take = self.batch if budget is None else budget
            entries = [self._queue.pop(note_id) for note_id in list(itertools.islice(self._queue, take))]
            batch = [note for note, _ in entries]
            digests = [_digest(n) for n in batch]
            vectors: list[Matrix | None] = []
            fresh: list[int] = []
            for i, (note, digest) in enumerate(zip(batch, digests, strict=True)):
                row = self._pos.get(note.id)
                if row is not None and self._rows.digests[row] == digest:
                    # A change that leaves the text as it is (trash, restore): quantized again, the same row.
                    vectors.append(self._vector(row))
                elif (at := self._cached.rows.get(note.id)) is not None and self._cached.digests[at] == digest:
                    assert self._cached_rows is not None
                    file_scales = self._cached_scales  # None: a file of before, float32 vectors
                    # A copy: the file is unmapped when warm.
                    vectors.append(
                        np.array(self._cached_rows[at], dtype=np.float32)
                        if file_scales is None
                        else self._cached_rows[at] * file_scales[at]
                    )
                else:
                    vectors.append(None)
                    fresh.append(i)
            if fresh:
                mixed = model.embed([note_texts(batch[i])[0] for i in fresh])
                weight = getattr(model, "title_weight", TITLE_WEIGHT)
                if weight:
                    title = model.embed([note_texts(batch[i])[1] for i in fresh])
                    mixed = (1 - weight) * mixed + weight * title
                    mixed /= np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True), 1e-9)
                for j, i in enumerate(fresh):
                    vectors[i] = mixed[j]
                self._embedded = True
            codes, scales = quantized(np.array(vectors, dtype=np.float32).reshape(len(entries), model.dim))
            rows = []
            for j, ((note, mark), digest) in enumerate(zip(entries, digests, strict=True)):
                replacing = says_a_change(note)
                row = self._row(note.id)
                self._matrix[row], self._scales[row] = codes[j], scales[j]
                self._alive[row] = True
                self._rows.put(row, note, digest, replacing, mark)
                rows.append(row)
            self._count(np.array(rows, dtype=np.intp), codes, scales)
            done = not self._queue
            if batch or gone:
                self._dirty_cache = True
            if done:
                # Only good for the first pass over the notes.
                self._cached, self._cached_rows, self._cached_scales = _NO_FILE, None, None
                if self._embedded and (release := getattr(model, "release", None)) is not None:
                    release()  # the model's caches speed a pass, not the time between passes
                self._embedded = False
                if batch or gone or self._snapshot is None:
                    self._publish()
                self._warm.set()
                written = self._written_at
                if self._dirty_cache and (written is None or time.monotonic() - written >= WRITE_EVERY_S):
                    self._write_cache(model.model_id)
            elif self._warm.is_set() and (batch or gone):
                self._publish()
        return done

    def _look(self, store: Store) -> list[str]:
        """Queue the notes to embed, and return those to remove. The first look after a start (or at another state,
        after a reload) is at every note; later ones at the notes the state's change feed says an op touched. A note
        whose mark is the one its row or the cache file's entry was made at is not read: at 100k notes reading every
        note's view took ~1.5 s of CPU beside the first searches, and kept 100k views for good. The notes are looked
        at LOOK per hold of the store's lock (at 100k, reading them at once held it ~1 s, and a search waited as
        long)."""
        with store.reading() as state:
            followed = state.derived(_Followed, _followed)
            if followed is not self._followed:
                self._feed = set()  # a change meanwhile is in it: looked at next time
                state.note_feeds.append(self._feed)
                self._followed = followed
                ids, whole = list(state.notes), True
                self._queue = {}
            else:
                ids, whole = list(self._feed), False
                self._feed.clear()
        if not ids:
            return []
        pos, marks = self._pos, self._rows.numbers["mark"]
        in_file, file_marks = self._cached.rows, self._cached.marks
        seen: set[str] = set()
        gone: list[str] = []
        adopt: list[tuple[str, int]] = []
        for at in range(0, len(ids), LOOK):
            with store.reading() as state:
                records = state.notes
                for note_id in ids[at : at + LOOK]:
                    record = records.get(note_id)
                    mark = 0 if record is None else record.mark()
                    if mark and (row := pos.get(note_id)) is not None and marks[row] == mark:
                        seen.add(note_id)  # as embedded
                    elif mark and (i := in_file.get(note_id)) is not None and file_marks[i] == mark:
                        seen.add(note_id)  # as the cache file has it
                        adopt.append((note_id, i))
                    elif (note := state.note(note_id, keep=False)) is not None:  # a view for the queue alone
                        seen.add(note_id)
                        self._queue[note_id] = (note, mark)
                    else:
                        self._queue.pop(note_id, None)
                        if note_id in pos and not whole:
                            gone.append(note_id)
        if whole:
            self._reserve(len(seen))
            gone += [note_id for note_id in pos if note_id not in seen]
        if adopt:
            self._adopt(adopt)
        return gone

    def _adopt(self, entries: list[tuple[str, int]]) -> None:
        """Rows of the cache file as they are, in one copy (a row each and a sum over them, not a copy and a sum
        for each note)."""
        import numpy as np  # hivenote[meaning]

        assert self._cached_rows is not None
        rows = [self._row(note_id) for note_id, _ in entries]
        file, kept = self._cached, self._rows
        for row, (_, at) in zip(rows, entries, strict=True):
            kept.take(row, file, at)
        for start in range(0, len(rows), WRITE_ROWS):  # a block at a time: no second copy of every vector
            where = np.array([at for _, at in entries[start : start + WRITE_ROWS]])
            if self._cached_scales is None:  # a file of before (float32 vectors)
                block, scales = quantized(np.asarray(self._cached_rows[where], dtype=np.float32))
            else:
                block, scales = self._cached_rows[where], self._cached_scales[where]
            into = np.array(rows[start : start + WRITE_ROWS], dtype=np.intp)
            self._matrix[into], self._scales[into] = block, scales
            self._alive[into] = True
            self._count(into, block, scales)

    def _count(self, rows: Any, codes: Any, scales: Matrix) -> None:
        """Rows just given these vectors (int8 and a scale each): into the sums, and their signs."""
        import numpy as np  # hivenote[meaning]

        if not len(rows):
            return
        held = np.asarray(codes, dtype=np.int8) * scales[:, None]  # float32, as `_vector` gives each
        self._sum += held.sum(axis=0, dtype=np.float64)
        self._square = self._square + held.T @ held  # a new array: a snapshot holds the one before
        self._signs[:, rows] = signs(held).T

    def _uncount(self, row: int) -> None:
        """The row's vector out of the sums (it is about to change or go)."""
        vector = self._vector(row)
        self._sum -= vector
        self._square = self._square - vector[:, None] * vector[None, :]

    def _row(self, note_id: str) -> int:
        """The note's row: its own (whose vector leaves the sum), else a free one, else a new one (the matrix grown by
        an eighth when full: a few KB copied per note added)."""
        row = self._pos.get(note_id)
        if row is not None:
            self._uncount(row)
            return row
        if self._free:
            row = self._free.pop()
        else:
            row = len(self._ids)
            self._ids.append(None)
            self._rows.add()
            if self._matrix is None or row >= len(self._matrix):
                self._reserve(max(1024, row + row // 8))
        self._pos[note_id] = row
        self._ids[row] = note_id
        return row

    def _reserve(self, rows: int) -> None:
        """Room for `rows` notes in the matrix (the first pass makes it the notebook's size at once: growing by
        half again meant up to half of it unused, and two copies at each step)."""
        import numpy as np  # hivenote[meaning]

        have = 0 if self._matrix is None else len(self._matrix)
        if rows <= have or self.model is None:
            return
        dim = self.model.dim
        grown = np.zeros((rows, dim), dtype=np.int8)
        scales = np.zeros(rows, dtype=np.float32)
        alive = np.zeros(rows, dtype=bool)
        signed = np.zeros(((dim + 63) // 64, rows), dtype=np.uint64)
        if self._matrix is not None:
            used = min(len(self._ids), have)  # rows taken but not filled yet (`_set`, `_adopt`) have nothing to copy
            grown[:used] = self._matrix[:used]
            scales[:used] = self._scales[:used]
            alive[:used] = self._alive[:used]
            signed[:, :used] = self._signs[:, :used]
        # Readers keep the old arrays they hold.
        self._matrix, self._scales, self._alive, self._signs = grown, scales, alive, signed
        if self._sum is None:
            self._sum = np.zeros(dim, dtype=np.float64)
            self._square = np.zeros((dim, dim), dtype=np.float64)

    def _vector(self, row: int) -> Matrix:
        """The row's vector (float32), as held."""
        vector: Matrix = self._matrix[row] * self._scales[row]
        return vector

    def _remove(self, note_id: str) -> None:
        row = self._pos.pop(note_id)
        self._uncount(row)
        self._matrix[row] = 0
        self._scales[row] = 0
        self._alive[row] = False
        self._signs[:, row] = 0
        self._ids[row] = None
        self._rows.clear(row)
        self._free.append(row)

    def _publish(self) -> None:
        import numpy as np  # hivenote[meaning]

        n = len(self._ids)
        dim = self.model.dim if self.model else 0
        if self._matrix is None:
            self._snapshot = _Snapshot(
                (),
                np.zeros((0, dim), np.int8),
                np.zeros(0, np.float32),
                np.zeros(0, bool),
                np.zeros(dim, np.float32),
                np.zeros(0, np.intp),
                np.zeros(0, np.int32),
                np.zeros(0, np.int64),
                0,
                np.zeros(((dim + 63) // 64, 0), np.uint64),
                np.zeros(dim, np.float64),
                np.zeros((dim, dim), np.float64),
                False,
            )
            return
        live = len(self._pos)
        # What every note shares is taken out in proportion to how many notes say so (a handful tell little).
        mean = (self._sum / max(live, 1)) * (live / (live + CENTRE_PRIOR))
        if not getattr(self.model, "centre", True):
            mean = np.zeros_like(mean)
        kept = self._rows
        replacing = np.flatnonzero(np.frombuffer(kept.numbers["replacing"], dtype=np.uint8)[:n]).astype(np.intp)
        # Copies of two columns for those rows alone (under the lock: a view of an array blocks its growing).
        codes = np.frombuffer(kept.codes, dtype=f"i{kept.codes.itemsize}")[replacing].astype(np.int32)
        created = np.frombuffer(kept.numbers["created"], dtype=np.int64)[replacing]
        self._snapshot = _Snapshot(
            tuple(self._ids),
            self._matrix[:n],
            self._scales[:n],
            self._alive[:n].copy(),
            mean.astype(np.float32),
            replacing,
            codes,
            created,
            live,
            self._signs[:, :n],
            self._sum / max(live, 1),
            self._square,
            bool(getattr(self.model, "coarse", False)),
        )

    # -- asking ----------------------------------------------------------------------------------------

    def scores(self, query: str, k: int = CANDIDATES) -> dict[str, float] | None:
        """The `k` notes closest in meaning to `query`, with their score, or None while the index is not warm (the
        search then answers lexically). A score is the note's cosine standardised over the notebook for this query
        (how many standard deviations above the notebook's mean it is): a scale that carries from one model and one
        question to another, where a raw cosine's does not (a model whose cosines are all high or all narrow)."""
        import numpy as np  # hivenote[meaning]

        snap, model = self._snapshot, self.model
        if snap is None or model is None or not self._warm.is_set() or not len(snap.ids):
            return None
        text = question_text(query) if getattr(model, "strip_question", True) else query
        q = model.embed([text])[0] - snap.mean
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return {}
        q /= norm
        k = min(k, snap.live)
        if k <= 0:
            return {}
        # The mean and spread of this question's cosines over the notebook (standardised with them, below).
        mean = float(snap.first @ q)
        spread = max(float(q @ snap.second @ q) / max(snap.live, 1) - mean * mean, 0.0) ** 0.5
        rows = _coarse(snap, q) if snap.coarse and snap.live > EXACT_ROWS else None
        if rows is None:
            scored = _cosines(snap.vectors, q) * snap.scales
            alive = snap.alive
        else:
            scored = _cosines(snap.vectors, q, rows) * snap.scales[rows]
            alive = snap.alive[rows]
        scored -= mean
        scored /= max(spread, 1e-6)
        scored[~alive] = -np.inf
        k = min(k, len(scored))
        top = np.argpartition(-scored, k - 1)[:k] if k < len(scored) else np.arange(len(scored))
        at = top if rows is None else rows[top]
        return {
            note_id: float(scored[i])
            for i, j in zip(top.tolist(), at.tolist(), strict=True)
            if (note_id := snap.ids[j]) is not None and scored[i] > -np.inf
        }

    def replaced(self, note_ids: list[str], named: Callable[[str, str], bool] | None = None) -> dict[str, str]:
        """Of `note_ids`, those a newer note of the same project takes the place of without saying which note it
        replaces (it says in words that it changes something, and means nearly the same: SAME_DECISION, or
        NAMED_DECISION when `named(old id, new id)`, their titles naming what no other note names, asked of the
        NAMED_TRIES most alike): old id -> new id.

        The notes asked about are scored against their project's newer replacing rows (`_Snapshot.by_project`) a
        block at a time, all at once; Python looks only at the most alike. A notebook where one note in seven says
        such words has 15k of them at 100k notes: a loop over each for each note asked was ~8 ms a search, and a
        float copy of their vectors in each snapshot 15 MB and ~50 ms a write."""
        import numpy as np  # hivenote[meaning]

        snap = self._snapshot
        if snap is None or not len(snap.replacing):
            return {}
        same_decision = getattr(self.model, "same_decision", SAME_DECISION)
        named_decision = getattr(self.model, "named_decision", NAMED_DECISION)
        asked = [
            (note_id, i, *seen)
            for note_id in note_ids
            if (i := self._pos.get(note_id)) is not None and i < len(snap.ids)
            if (seen := self._code_and_age(snap, note_id, i)) is not None
        ]
        if not asked:
            return {}
        rows = np.array([i for _, i, _, _ in asked], dtype=np.intp)
        mine = (snap.vectors[rows].astype(np.float32) * snap.scales[rows][:, None]).T  # (dim, asked)
        created = np.array([made[0] for _, _, _, made in asked], dtype=np.int64)
        by_code: dict[int, list[int]] = {}
        for k, (_, _, code, _) in enumerate(asked):
            by_code.setdefault(code, []).append(k)
        # Of each block of a project's newer rows, the most alike left for each note asked of the project (a pair
        # is looked at in Python only then).
        found: list[list[tuple[float, int]]] = [[] for _ in asked]
        groups = snap.by_project()
        for code, ks in by_code.items():
            if (group := groups.get(code)) is None:
                continue
            rows_of, created_of, vectors_of, scales_of = group
            ages = created[ks]
            mine_here = mine[:, ks]
            for start in range(int(np.searchsorted(created_of, ages.min())), len(rows_of), SCORE_ROWS):
                block = rows_of[start : start + SCORE_ROWS]
                sims = vectors_of[start : start + SCORE_ROWS].astype(np.float32) @ mine_here
                sims *= scales_of[start : start + SCORE_ROWS][:, None]
                keep = sims >= named_decision
                keep &= created_of[start : start + len(block), None] >= ages
                sims[~keep] = -np.inf
                top = np.argpartition(-sims, min(LOOKED_AT, len(block)) - 1, axis=0)[:LOOKED_AT]
                for column, k in enumerate(ks):
                    found[k] += [
                        (sim, int(block[at]))
                        for at in top[:, column].tolist()
                        if (sim := float(sims[at, column])) >= named_decision
                    ]
        out: dict[str, str] = {}
        for k, (old, i, code, made) in enumerate(asked):
            tries = NAMED_TRIES
            for sim, j in sorted(found[k], reverse=True)[:LOOKED_AT]:
                if j == i or (new := snap.ids[j]) is None:
                    continue
                if (theirs := self._code_and_age(snap, new, j)) is None or theirs[0] != code or theirs[1] <= made:
                    continue
                if sim < same_decision:
                    if named is None or tries == 0:
                        break
                    tries -= 1
                    if not named(old, new):
                        continue
                out[old] = new
                break
        return out

    def _code_and_age(self, snap: _Snapshot, note_id: str, i: int) -> tuple[int, tuple[int, Revision]] | None:
        """The project's number and `newer` of the note in row `i`, read from the index's own columns without its
        lock (a copy in each snapshot was 5 MB and a few ms a write at 100k notes): None when the snapshot does not
        hold the note there, or the note left the row while they were read."""
        if snap.ids[i] != note_id or self._pos.get(note_id) != i:
            return None
        seen = self._rows.codes[i], self._rows.newer(i)
        return seen if self._pos.get(note_id) == i else None

    # -- the cache file --------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the cache file now if the index is warm and changed since it was written (a server stopping: the
        notes written since the last write, up to WRITE_EVERY_S of them, would otherwise be embedded again at the next
        start). Waits for a `refresh` under way to end."""
        with self._lock:
            if self.model is not None and self._warm.is_set() and self._dirty_cache:
                self._write_cache(self.model.model_id)

    def _read_cache(self, model_id: str) -> tuple[_File, Any, Matrix | None]:
        """The file's notes, its int8 vectors (mapped) and their scales, or nothing when it is missing, damaged, of
        another format (an older Hivenote's) or of another model."""
        import numpy as np  # hivenote[meaning]

        nothing: tuple[_File, Any, Matrix | None] = (_NO_FILE, None, None)
        if self.cache is None:
            return nothing
        try:
            with self.cache.open("rb") as fh:
                magic = fh.read(len(MAGIC))
                if magic not in (MAGIC, MAGIC_1):
                    return nothing
                header = json.loads(fh.readline())
                if not isinstance(header, dict) or header.get("model") != model_id:
                    return nothing  # another model (or not a header): everything is embedded again
                ids, digests, dim = header["ids"], header["digests"], int(header["dim"])
                offset = fh.tell()
            if self.model is None or dim != self.model.dim:
                return nothing  # rows that do not fit the model's vectors
            n, numbers = len(ids), np.dtype(list(_NUMBERS))
            if magic == MAGIC_1:  # float32 vectors, then (when it has "nodes") the numbers
                kept = n * numbers.itemsize if "nodes" in header else 0
                if self.cache.stat().st_size != offset + n * dim * 4 + kept or len(digests) != n or not ids:
                    return nothing
                vectors = np.memmap(self.cache, dtype="<f4", mode="r", offset=offset, shape=(n, dim))
                block = np.fromfile(self.cache, numbers, count=n, offset=offset + n * dim * 4) if kept else None
                return _File(header, block), vectors, None
            if self.cache.stat().st_size != offset + n * (dim + 4 + numbers.itemsize) or len(digests) != n or not ids:
                return nothing
            # Mapped, not read: its pages are the file's, and they leave with the map once the first pass is done.
            vectors = np.memmap(self.cache, dtype=np.int8, mode="r", offset=offset, shape=(n, dim))
            scales = np.fromfile(self.cache, dtype="<f4", count=n, offset=offset + n * dim).astype(np.float32)
            block = np.fromfile(self.cache, dtype=numbers, count=n, offset=offset + n * (dim + 4))
            return _File(header, block), vectors, scales
        except FileNotFoundError:  # not written yet
            return nothing
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # damaged: derived data, built again
            log.info("the meaning cache file %s could not be read: it is built again", self.cache)
            return nothing

    def _write_cache(self, model_id: str) -> None:
        import numpy as np  # hivenote[meaning]

        if self.cache is None:
            return
        rows = sorted(self._pos.values())
        kept = self._rows
        header = {
            "model": model_id,
            "dim": self.model.dim if self.model else 0,
            "ids": [self._ids[r] for r in rows],
            "digests": [f"{kept.digests[r]:016x}" for r in rows],
            "nodes": [kept.nodes[r] for r in rows],
            "projects": [kept.projects[r] for r in rows],
        }
        # Its JSON as bytes alone, the lists and the str let go at once (at 100k notes each is ~8 MB).
        head = json.dumps(header, separators=(",", ":")).encode()
        del header
        matrix, scales = self._matrix, self._scales

        def chunks() -> Iterator[bytes]:
            yield MAGIC
            yield head
            yield b"\n"
            for start in range(0, len(rows), WRITE_ROWS):  # a block at a time: no second copy of every vector
                yield np.ascontiguousarray(matrix[rows[start : start + WRITE_ROWS]], dtype=np.int8).tobytes()
            yield np.asarray(scales[rows], dtype="<f4").tobytes()
            for start in range(0, len(rows), WRITE_ROWS):  # a block at a time, as the vectors
                part = rows[start : start + WRITE_ROWS]
                numbers = np.zeros(len(part), dtype=list(_NUMBERS))
                for name, kind in _NUMBERS:  # a view of a column for the moment (an array with one can't grow)
                    numbers[name] = np.frombuffer(kept.numbers[name], dtype=np.dtype(kind).newbyteorder("="))[part]
                yield numbers.tobytes()

        self._written_at = time.monotonic()  # a failed write too: tried again after WRITE_EVERY_S, not every pass
        try:
            private_dir(self.cache.parent)
            write_whole(self.cache, chunks(), durable=False)  # derived data: a lost one is built again
            self._dirty_cache = False
        except OSError as exc:  # a read-only or full disk: the index still works, it is built again next start
            log.warning("could not write the meaning cache: %s", exc)
