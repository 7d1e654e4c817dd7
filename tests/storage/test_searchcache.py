"""`cache/search.bin`: the warm search index kept for the next start, taken back warm at once for the very ops it came
from and for the notes whose ops are the same after other writes (an outdated file is removed once read); a damaged,
truncated, foreign, other-byte-order or missing file is ignored and searches answer as without it."""

from __future__ import annotations

import marshal
import os
import stat
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from hivenote.server.core.search import note_index, refresh_note_index, search_notes
from hivenote.server.notebook import Notebook
from hivenote.server.storage.searchcache import MAGIC, SearchCache
from hivenote.server.storage.store import Store
from tests.support.notes import write_log

NOTES = 2500  # more than a query's share of indexing (COLD_INDEX): the index stays cold while searched
QUERIES = ["deploy", "postgres redis", "café", "auth token", "kubernetes zzz", "zzqx"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A notebook whose warm index was saved, as a server does once warm."""
    data = tmp_path / "data"
    write_log(data, NOTES)
    with Store(data) as store:
        refresh_note_index(store.state)
        cache = SearchCache(store)
        assert cache.save()
        assert not cache.save()  # nothing changed: not written again
    return data


def answers(store: Store) -> list[object]:
    return [search_notes(store.state, query, limit=20) for query in QUERIES]


def warm_answers(data: Path) -> list[object]:
    with Store(data, readonly=True) as store:
        refresh_note_index(store.state)
        return answers(store)


def test_the_next_start_takes_the_saved_index_warm_and_answers_as_one_built_again(data: Path) -> None:
    path = data / "cache" / "search.bin"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    with Store(data, readonly=True) as store:
        assert SearchCache(store).load()
        assert not note_index(store.state).pending  # warm: not a note to index
        got = answers(store)
        assert note_index(store.state).scan is None  # no note's text was built
        read = sum(1 for record in store.state.notes.values() if record.view is not False)
        assert read < NOTES / 4  # only the notes the queries matched were read
    assert got == warm_answers(data)


def flip(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x20
    path.write_bytes(bytes(blob))


def truncate(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 100)


def foreign(path: Path) -> None:
    path.write_bytes(b"hivenote-search-0\n" + path.read_bytes()[len(MAGIC) :])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def other_byte_order(path: Path) -> None:
    """The file as a machine of the other byte order would have written it (a data dir copied across): its postings
    would read as other numbers."""
    blob = path.read_bytes()
    at = len(MAGIC) + 4
    size = int.from_bytes(blob[at : at + 8], "big")
    header = marshal.loads(blob[at + 8 : at + 8 + size])
    assert header["byteorder"] == sys.byteorder
    other = marshal.dumps(header | {"byteorder": "big" if sys.byteorder == "little" else "little"})
    body = len(other).to_bytes(8, "big") + other + blob[at + 8 + size :]
    path.write_bytes(MAGIC + zlib.crc32(body).to_bytes(4, "big") + body)


@pytest.mark.parametrize("damage", [flip, truncate, foreign, empty, other_byte_order, os.unlink])
def test_a_damaged_or_missing_file_is_ignored(data: Path, damage: Callable[[Path], None]) -> None:
    damage(data / "cache" / "search.bin")
    with Store(data, readonly=True) as store:
        assert not SearchCache(store).load()
        assert len(note_index(store.state).pending) == NOTES  # nothing taken: the index warms as without the file
        got = answers(store)
    assert got == warm_answers(data)


def test_a_file_saved_before_the_last_writes_is_taken_for_the_notes_they_left_removed_and_written_again(
    data: Path,
) -> None:
    """A start after writes the file does not hold (another machine's, a CLI's while no server ran, a crash before
    the stop saved it) takes the index for every note they did not change and indexes the others again. The file goes
    at once all the same: it may hold the text of a note purged since."""
    with Store(data) as store:
        Notebook(store).remember(kind="fact", title="deploy on fridays", body="never")
    with Store(data) as store:
        cache = SearchCache(store)
        assert cache.load()
        assert len(note_index(store.state).pending) == 1  # the new note alone
        assert not (data / "cache" / "search.bin").exists()
        got = answers(store)
        refresh_note_index(store.state)
        assert cache.save()  # the file now holds what the next start folds
    assert got == warm_answers(data)
    with Store(data, readonly=True) as store:
        assert SearchCache(store).load()
        assert not note_index(store.state).pending
