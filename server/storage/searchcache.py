"""The warm search index kept outside `log/` for the next start (`cache/search.bin`), so a server starting on the
notebook it last served has a warm index from its first request instead of indexing every note again (at 100k notes
7.6 s of CPU on a quiet box, during which searches read a stand-in: 90-250 ms for a common word, 2 s for the first).

Derived data only, like the op cache: never synced, never exported, written whole through a temp file and renamed
(0600). Taken whole by a notebook holding the very ops it was saved from (`State.ops_key`), and note by note by one
whose ops changed since (another machine's, a CLI's, a crash before the stop saved it): a note whose mark
(`NoteRecord.mark`) is the saved one is taken as it is, the others are indexed again (`adopt_index`). An outdated file
is removed once read (it may hold the text of a note purged since); a missing, damaged, truncated or foreign one is
ignored, and the server warms its index as it would without it. Written once the index is warm and again when the
server stops, each time only when the notebook's ops changed since the file was written.

The file: MAGIC, a CRC-32 of the rest, the header's length (8 bytes) and the header (marshal: the byte order, the ops
key, the index's small parts and each big part's length), then the big parts as they are: the texts in UTF-8, the
postings (4-byte numbers, this machine's byte order) and the duplicate hint's entries. The big parts are written from
their own buffers and read as views of the file's, so neither side makes another whole copy of them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import marshal
import sys
import zlib
from array import array
from pathlib import Path
from typing import Final

from ..core.search import SavedIndex, adopt_index, refresh_note_index, saved_index
from ..core.textindex import Dumped
from .files import private_dir, write_whole
from .gcpause import collector_paused
from .layout import Layout
from .store import SEARCH_INDEX, Store

log = logging.getLogger(__name__)

# 3: each note's recency beside its mark (2: the whole index; 1 held only its texts). Bump when core/search.py's
# note_text or the index's layout changes.
MAGIC: Final = b"hivenote-search-3\n"
_DIGEST: Final = 4
_LENGTH: Final = 8
_TEXT_BATCH: Final = 4096  # texts encoded and written a batch at a time: no second whole copy of them


def _encoded(texts: list[str]) -> tuple[array[int], list[bytes]]:
    """Each text's length in UTF-8, and the texts encoded, a batch to a buffer."""
    sizes = array("Q")
    batches = []
    for i in range(0, len(texts), _TEXT_BATCH):
        batch = [text.encode() for text in texts[i : i + _TEXT_BATCH]]
        sizes.extend(map(len, batch))
        batches.append(b"".join(batch))
    return sizes, batches


def _numbers(typecode: str, raw: object) -> array[int]:
    if type(raw) is not bytes:
        raise TypeError("not an array's bytes")
    numbers = array(typecode)
    numbers.frombytes(raw)
    return numbers


def save(path: Path, saved: SavedIndex) -> None:
    """Write the file whole (a temp file beside it, renamed over; 0600, in a 0700 folder: it holds every note's
    text). Not fsynced, as the op cache is not: a file a crash tore is refused by its check, and the next start does
    without it."""
    keys, texts, tokens, counts, flat, dirty, free = saved.texts
    sizes, encoded = _encoded(texts)
    hint = saved.title_words
    header = marshal.dumps(
        {
            "byteorder": sys.byteorder,
            "key": saved.key,
            "keys": ["" if key is None else key for key in keys],  # a note id is never empty
            "sizes": sizes.tobytes(),  # each text's length in UTF-8
            "tokens": tokens,
            "counts": counts.tobytes(),
            "dirty": dirty,
            "free": array("I", free).tobytes(),
            "marks": saved.marks.tobytes(),
            "recent": saved.recent.tobytes(),
            "trashed": saved.trashed.tobytes(),
            "words": list(hint),
            "word_sizes": array("Q", map(len, hint.values())).tobytes(),
            "codes": [(kind, project, code) for (kind, project), code in saved.title_codes.items()],
            "links": saved.links,
        }
    )
    body: list[bytes] = [
        len(header).to_bytes(_LENGTH, "big"),
        header,
        *encoded,
        flat.tobytes(),
        *map(bytes, hint.values()),
    ]
    crc = 0
    for part in body:
        crc = zlib.crc32(part, crc)
    private_dir(path.parent)
    write_whole(path, (MAGIC, crc.to_bytes(_DIGEST, "big"), *body), durable=False)


def load(path: Path) -> SavedIndex | None:
    """The saved index, or None when the file is missing, damaged, truncated, of another format or another machine's
    byte order."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    start = len(MAGIC) + _DIGEST
    view = memoryview(blob)
    if not blob.startswith(MAGIC) or zlib.crc32(view[start:]).to_bytes(_DIGEST, "big") != blob[len(MAGIC) : start]:
        return None
    try:
        with collector_paused():  # 100k id and text strings at once
            return _parsed(view, start)
    except (ValueError, TypeError, EOFError, IndexError, KeyError):
        return None


def _parsed(view: memoryview, at: int) -> SavedIndex | None:
    size = int.from_bytes(view[at : at + _LENGTH], "big")
    at += _LENGTH
    header = marshal.loads(view[at : at + size])
    at += size
    key, keys, links, dirty = header["key"], header["keys"], header["links"], header["dirty"]
    if header["byteorder"] != sys.byteorder or type(key) is not bytes or type(keys) is not list:
        return None
    if type(links) is not dict or not all(type(k) is str and type(v) is str for k, v in links.items()):
        return None
    if type(dirty) is not dict:
        return None
    sizes, counts, words = _numbers("Q", header["sizes"]), _numbers("I", header["counts"]), header["words"]
    word_sizes = _numbers("Q", header["word_sizes"])
    if len(sizes) != len(keys) or len(word_sizes) != len(words):
        return None
    texts = [
        str(view[start:end], "utf-8") for start, end in itertools.pairwise(itertools.accumulate(sizes, initial=at))
    ]
    at += sum(sizes)
    flat = array("I")
    end = at + flat.itemsize * sum(counts)
    flat.frombytes(view[at:end])
    at = end
    title_words: dict[str, bytearray] = {}
    for word, length in zip(words, word_sizes, strict=True):
        title_words[word] = bytearray(view[at : at + length])
        at += length
    if at != len(view):
        return None
    return SavedIndex(
        key,
        Dumped(
            [key or None for key in keys],
            texts,
            header["tokens"],
            counts,
            flat,
            dirty,
            _numbers("I", header["free"]).tolist(),
        ),
        _numbers("Q", header["marks"]),
        _numbers("Q", header["recent"]),
        _numbers("I", header["trashed"]),
        title_words,
        {(kind, project): code for kind, project, code in header["codes"]},
        links,
    )


class SearchCache:
    """A server's `cache/search.bin`: read once at start, written when the index is warm and when the server stops,
    each time only when the notebook's ops differ from those of the file (the key read or written last)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = Layout(store.data_dir).cache / SEARCH_INDEX
        self.key: bytes | None = None  # the ops key of what the file holds, as far as this server knows

    def load(self) -> bool:
        """Read the file and make its index the store's state's (whole for the very ops it was saved from, else for the
        notes whose ops are the same), before any search builds a stand-in of its own. Returns whether it was taken."""
        saved = load(self.path)
        if saved is None:
            return False
        self.key = saved.key
        with self.store.reading() as state, collector_paused():
            current = state.ops_key()
            adopted = adopt_index(state, saved)
        if self.key != current:
            self._drop()
        return adopted

    def _drop(self) -> None:
        """Remove a file saved for other ops: it is of no use to this notebook, and it may hold the text of a note
        purged since (until the index is warm and saves the notebook as it is)."""
        if self.store.readonly:
            return
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)
        self.key = None

    def save(self, catch_up: int = 0) -> bool:
        """Write the warm index when the file does not hold it already, after indexing up to `catch_up` notes written
        since it was warm (a server stopping: not a whole warm-up). Returns whether it wrote."""
        if self.store.readonly:
            return False
        with self.store.reading() as state:
            if catch_up:
                refresh_note_index(state, budget=catch_up)
            snapshot = saved_index(
                state
            )  # the index's own strings and a copy of its postings: written outside the lock
            stale = snapshot is None and self.key is not None and self.key != state.ops_key()
        if stale:  # not warm, and the notebook changed since the file was written
            self._drop()
        if snapshot is None or snapshot.key == self.key:
            return False
        try:
            save(self.path, snapshot)
        except OSError as exc:  # derived data: the next start does without it
            log.info("search index not saved (%s)", exc)
            return False
        self.key = snapshot.key
        return True
