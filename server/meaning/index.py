"""The meaning index: one vector per note, derived data like the op cache. Built in the background after start and
after writes (`refresh`, a batch at a time, never holding the store's lock while it embeds), cached in
`cache/meaning.bin` (outside `log/`: never synced, never exported; rebuilt when the model changes), and asked by
the search (`scores`) only once warm: until then search answers lexically.

A note's vector mixes its whole text and its title (the title says what the note is about). Scores are cosines
against the notebook's mean vector taken out (what every note shares says nothing about any one of them).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.model import Note
from ..storage.files import private_dir, write_whole
from .model import Embedder, Unavailable, question_text

if TYPE_CHECKING:
    from ..storage.store import Store
    from .model import Matrix

log = logging.getLogger(__name__)

BATCH = 512  # notes embedded per step (a few ms each step)
TITLE_WEIGHT = 0.3
CENTRE_PRIOR = 30  # notes' worth of a zero mean the notebook's mean is shrunk towards
CANDIDATES = 30  # meaning matches handed to the fusion
SAME_DECISION = 0.6  # cosine at which a newer note that says it replaces something is taken to replace an older one
MAGIC = b"HNMEAN1\n"
# Words by which a newer note says it takes an older one's place ("moves from Celery to Dramatiq", "instead of").
REPLACING = re.compile(
    r"\b(replac\w*|supersed\w*|instead of|no longer"
    r"|(move[sd]?|moving|switch\w*|migrat\w*)\b[\w\s,]{0,40}?\b(from|to|away)"
    r"|stop(ped)? using|deprecat\w*|now (go|use)\w*|raised to|shortened to|becomes)\b",
    re.IGNORECASE,
)


def note_texts(note: Note) -> tuple[str, str]:
    """(whole text, title) as embedded."""
    whole = f"{note.title}. {note.body} {' '.join(note.tags)} {note.project or ''}"
    return whole, note.title


def _digest(note: Note) -> str:
    whole, _ = note_texts(note)
    return hashlib.blake2b(whole.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class _Snapshot:
    """What a search reads: replaced whole, never changed in place, so queries need no lock."""

    ids: tuple[str, ...]
    vectors: Matrix  # (n, dim), unit rows
    mean: Matrix  # (dim,)
    replacing: Matrix  # rows (indexes) of notes that say they replace something
    projects: tuple[str | None, ...]
    created: tuple[int, ...]


class MeaningIndex:
    """Vectors of every live or trashed note. `load` makes the model (called once, in the background)."""

    def __init__(self, cache: Path | None, load: Callable[[], Embedder]) -> None:
        self.cache = cache
        self._load = load
        self.model: Embedder | None = None
        self.problem: str | None = None  # why it is off (model unavailable), for doctor and status
        # id -> (revision, digest, vector, project, created, says it replaces something)
        self._rows: dict[str, tuple[object, str, Matrix, str | None, int, bool]] = {}
        self._queue: list[Note] = []
        self._seen_version = -1
        self._cached: dict[str, tuple[str, Matrix]] = {}  # read from the cache file, not yet checked against notes
        self._snapshot: _Snapshot | None = None
        self._dirty_cache = False
        self._lock = threading.Lock()
        self._warm = threading.Event()

    # -- state ----------------------------------------------------------------------------------------

    @property
    def warm(self) -> bool:
        """Every note embedded once since start (later writes catch up within a step)."""
        return self._warm.is_set()

    def wait_warm(self, timeout: float) -> bool:
        return self._warm.wait(timeout)

    def status(self) -> dict[str, object]:
        return {
            "on": self.problem is None,
            "model": self.model.model_id if self.model else None,
            "warm": self.warm,
            "notes": len(self._rows),
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
            self._cached = self._read_cache(self.model.model_id)
        return self.model

    def refresh(self, store: Store, budget: int = BATCH) -> bool:
        """Embed up to `budget` notes that are new or changed since they were last embedded; True when none is left.
        Looks at the notebook (under the store's lock, briefly) only when it changed; embeds without the lock."""
        import numpy as np  # hivenote[meaning]

        model = self._model()
        if model is None:
            return True
        with self._lock:
            gone: list[str] = []
            with store.reading() as state:
                version = state.notes_version
                if version != self._seen_version:
                    rows = self._rows
                    live = {}
                    for note in state.iter_notes():
                        live[note.id] = note
                    self._queue = [n for n in live.values() if (r := rows.get(n.id)) is None or r[0] != n.revision]
                    gone = [note_id for note_id in rows if note_id not in live]
                    self._seen_version = version
            for note_id in gone:
                del self._rows[note_id]
            batch, self._queue = self._queue[:budget], self._queue[budget:]
            digests = {n.id: _digest(n) for n in batch}
            fresh = [
                n
                for n in batch
                if ((r := self._rows.get(n.id)) is None or r[1] != digests[n.id])
                and ((c := self._cached.get(n.id)) is None or c[0] != digests[n.id])
            ]
            vectors: dict[str, Matrix] = {}
            if fresh:
                whole = model.embed([note_texts(n)[0] for n in fresh])
                title = model.embed([note_texts(n)[1] for n in fresh])
                mixed = (1 - TITLE_WEIGHT) * whole + TITLE_WEIGHT * title
                mixed /= np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True), 1e-9)
                vectors = dict(zip((n.id for n in fresh), mixed, strict=True))
            for note in batch:
                vector = vectors.get(note.id)
                if vector is None:
                    row = self._rows.get(note.id)
                    vector = row[2] if row is not None and row[1] == digests[note.id] else self._cached[note.id][1]
                self._rows[note.id] = (
                    note.revision,
                    digests[note.id],
                    vector,
                    note.project,
                    note.created,
                    REPLACING.search(f"{note.title} {note.body}") is not None,
                )
            done = not self._queue
            if batch or gone:
                self._dirty_cache = True
                self._publish()
            if done:
                self._cached = {}  # only good for the first pass over the notes
                self._warm.set()
                if self._dirty_cache:
                    self._write_cache(model.model_id)
        return done

    def _publish(self) -> None:
        import numpy as np  # hivenote[meaning]

        ids = tuple(self._rows)
        rows = list(self._rows.values())
        dim = self.model.dim if self.model else 0
        vectors = np.stack([r[2] for r in rows]).astype(np.float32) if rows else np.zeros((0, dim), np.float32)
        # What every note shares is taken out in proportion to how many notes say so (a handful tell little).
        mean = vectors.mean(axis=0) * (len(rows) / (len(rows) + CENTRE_PRIOR)) if rows else np.zeros(dim, np.float32)
        self._snapshot = _Snapshot(
            ids,
            vectors,
            mean.astype(np.float32),
            np.array([i for i, r in enumerate(rows) if r[5]], dtype=np.intp),
            tuple(r[3] for r in rows),
            tuple(r[4] for r in rows),
        )

    # -- asking ----------------------------------------------------------------------------------------

    def scores(self, query: str, k: int = CANDIDATES) -> dict[str, float] | None:
        """The `k` notes closest in meaning to `query`, with their score (a centred cosine, about -1..1), or None
        while the index is not warm (the search then answers lexically)."""
        import numpy as np  # hivenote[meaning]

        snap, model = self._snapshot, self.model
        if snap is None or model is None or not self._warm.is_set() or not snap.ids:
            return None
        q = model.embed([question_text(query)])[0] - snap.mean
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return {}
        centred = snap.vectors @ (q / norm) - float(snap.mean @ (q / norm))
        k = min(k, len(snap.ids))
        top = np.argpartition(-centred, k - 1)[:k] if k < len(snap.ids) else np.arange(len(snap.ids))
        return {snap.ids[i]: float(centred[i]) for i in top}

    def replaced(self, note_ids: list[str]) -> dict[str, str]:
        """Of `note_ids`, those a newer note of the same project takes the place of without saying which note it
        replaces (it says in words that it replaces or moves away from something, and means nearly the same):
        old id -> new id."""

        snap = self._snapshot
        if snap is None or not len(snap.replacing):
            return {}
        where = {note_id: i for i, note_id in enumerate(snap.ids)}
        out: dict[str, str] = {}
        cand = snap.replacing
        cand_vectors = snap.vectors[cand]
        for note_id in note_ids:
            i = where.get(note_id)
            if i is None:
                continue
            sims = cand_vectors @ snap.vectors[i]
            best, best_sim = -1, SAME_DECISION
            for j, sim in zip(cand.tolist(), sims.tolist(), strict=True):
                newer = snap.created[j] > snap.created[i]
                if j != i and newer and sim >= best_sim and snap.projects[j] == snap.projects[i]:
                    best, best_sim = j, sim
            if best >= 0:
                out[note_id] = snap.ids[best]
        return out

    # -- the cache file --------------------------------------------------------------------------------

    def _read_cache(self, model_id: str) -> dict[str, tuple[str, Matrix]]:
        import numpy as np  # hivenote[meaning]

        if self.cache is None:
            return {}
        try:
            with self.cache.open("rb") as fh:
                if fh.read(len(MAGIC)) != MAGIC:
                    return {}
                header = json.loads(fh.readline())
                if header.get("model") != model_id:
                    return {}  # another model: everything is embedded again
                ids, digests, dim = header["ids"], header["digests"], int(header["dim"])
                data = np.frombuffer(fh.read(), dtype=np.float32)
            if len(data) != len(ids) * dim or len(digests) != len(ids):
                return {}
            vectors = data.reshape(len(ids), dim)
            return {note_id: (digest, vectors[i]) for i, (note_id, digest) in enumerate(zip(ids, digests, strict=True))}
        except (OSError, ValueError, KeyError, TypeError):  # missing or damaged: derived data, built again
            return {}

    def _write_cache(self, model_id: str) -> None:
        import numpy as np  # hivenote[meaning]

        if self.cache is None:
            return
        rows = list(self._rows.items())
        header = {
            "model": model_id,
            "dim": self.model.dim if self.model else 0,
            "ids": [note_id for note_id, _ in rows],
            "digests": [r[1] for _, r in rows],
        }
        head = MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n"
        vectors = np.stack([r[2] for _, r in rows]).astype(np.float32).tobytes() if rows else b""
        try:
            private_dir(self.cache.parent)
            write_whole(self.cache, (head, vectors), durable=False)  # derived data: a lost one is built again
            self._dirty_cache = False
        except OSError as exc:  # a read-only or full disk: the index still works, it is built again next start
            log.warning("could not write the meaning cache: %s", exc)
