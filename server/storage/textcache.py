"""The search index's texts kept outside `log/` for the next start (`cache/search.bin`), so a search made while a
fresh server warms its index reads them instead of building every note's text first (at 100k notes the first search
after a start took ~2 s doing that, `note_text` plus every note's view).

Derived data only, like the op cache: never synced, never exported, written whole through a temp file and renamed
(0600), and used only for a notebook holding the very ops it was saved from (`State.ops_key`): a missing, damaged,
truncated or outdated file is ignored, and the server answers as it would without it (an outdated one is removed: it
may hold the text of a note purged since). Written once the index is warm and again when the server stops, each time
only when the notebook's ops changed since the file was written.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import marshal
import zlib
from array import array
from pathlib import Path
from typing import Final

from ..core.search import adopt_texts, refresh_note_index, saved_texts
from .files import private_dir, write_whole
from .gcpause import collector_paused
from .store import SEARCH_TEXTS, Store

log = logging.getLogger(__name__)

MAGIC: Final = b"hivenote-texts-1\n"  # 1: core/search.py's note_text as of this format; bump when it changes
_DIGEST: Final = 4

# ops key, ids, their UTF-8 texts in a row, where each ends, the notes in the trash, the replaces links
Saved = tuple[bytes, list[str], bytes, "array[int]", list[str], dict[str, str]]


def _digest(payload: bytes | memoryview) -> bytes:
    # CRC-32, not the op cache's BLAKE2b: it finds a torn or damaged file as surely (this is no defence against a
    # forger, who could write the notes themselves), in 8 ms instead of 40 ms at 100k notes (37 MB), before the first
    # request is answered.
    return zlib.crc32(payload).to_bytes(_DIGEST, "big")


def load(path: Path) -> Saved | None:
    """The saved texts, or None when the file is missing, damaged, truncated or of another format."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    start = len(MAGIC) + _DIGEST
    payload = memoryview(blob)[start:]
    if not blob.startswith(MAGIC) or _digest(payload) != blob[len(MAGIC) : start]:
        return None
    try:
        with collector_paused():  # 100k id strings at once
            key, joined, lengths, texts, trash, links = marshal.loads(payload)
            ids = joined.split("\n") if joined else []
            trashed = trash.split("\n") if trash else []
            sizes = array("Q")
            sizes.frombytes(lengths)
    except (ValueError, TypeError, EOFError, AttributeError):
        return None
    ends = array("Q", itertools.accumulate(sizes))
    if not (
        type(key) is bytes
        and type(texts) is bytes
        and len(ends) == len(ids)
        and (ends[-1] if ends else 0) == len(texts)
        and type(links) is dict
        and all(type(k) is str and type(v) is str for k, v in links.items())
    ):
        return None
    return key, ids, texts, ends, trashed, links


def save(path: Path, key: bytes, ids: list[str], texts: list[str], trashed: list[str], links: dict[str, str]) -> None:
    """Write the file whole (a temp file beside it, renamed over; 0600, in a 0700 folder: it holds every note's
    text). Not fsynced, as the op cache is not: a file a crash tore is refused by its check, and the next start does
    without it."""
    encoded = [text.encode() for text in texts]
    sizes = array("Q", map(len, encoded))
    payload = marshal.dumps((key, "\n".join(ids), sizes.tobytes(), b"".join(encoded), "\n".join(trashed), links))
    private_dir(path.parent)
    write_whole(path, (MAGIC, _digest(payload), payload), durable=False)


class TextCache:
    """A server's `cache/search.bin`: read once at start, written when the index is warm and when the server stops,
    each time only when the notebook's ops differ from those of the file (the key read or written last)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = store.data_dir / "cache" / SEARCH_TEXTS
        self.key: bytes | None = None  # the ops key of what the file holds, as far as this server knows

    def load(self) -> bool:
        """Read the file and hand its texts to the store's state when they were saved for the very ops it holds
        (before any search builds a stand-in of its own). Returns whether they were taken."""
        saved = load(self.path)
        if saved is None:
            return False
        self.key = saved[0]
        with self.store.reading() as state, collector_paused():
            current = state.ops_key()
            adopted = adopt_texts(state, *saved)
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
        """Write the warm index's texts when the file does not hold them already, after indexing up to `catch_up`
        notes written since it was warm (a server stopping: not a whole warm-up). Returns whether it wrote."""
        if self.store.readonly:
            return False
        with self.store.reading() as state:
            if catch_up:
                refresh_note_index(state, budget=catch_up)
            snapshot = saved_texts(state)  # the index's own strings: the file is made outside the lock
            stale = snapshot is None and self.key is not None and self.key != state.ops_key()
        if stale:  # not warm, and the notebook changed since the file was written
            self._drop()
        if snapshot is None or snapshot[0] == self.key:
            return False
        try:
            save(self.path, *snapshot)
        except OSError as exc:  # derived data: the next start does without it
            log.info("search texts not saved (%s)", exc)
            return False
        self.key = snapshot[0]
        return True
