"""`cache/search.bin`: the warm index's texts kept for the next start, read back only for the very ops they came from;
a damaged, truncated, foreign or outdated file is ignored and searches answer as without it."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from hivenote.server.core.search import _Saved, _texts, note_index, refresh_note_index, search_notes
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.storage.textcache import MAGIC, TextCache
from tests.support.notes import write_log

NOTES = 2500  # more than a query's share of indexing (COLD_INDEX): the index stays cold while searched
QUERIES = ["deploy", "postgres redis", "café", "auth token", "kubernetes zzz", "zzqx"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A notebook whose warm index saved its texts, as a server does once warm."""
    data = tmp_path / "data"
    write_log(data, NOTES)
    with Store(data) as store:
        refresh_note_index(store.state)
        cache = TextCache(store)
        assert cache.save()
        assert not cache.save()  # nothing changed: not written again
    return data


def answers(store: Store) -> list[object]:
    return [search_notes(store.state, query, limit=20) for query in QUERIES]


def warm_answers(data: Path) -> list[object]:
    with Store(data, readonly=True) as store:
        refresh_note_index(store.state)
        return answers(store)


def test_the_next_start_searches_the_saved_texts_while_its_index_warms(data: Path) -> None:
    path = data / "cache" / "search.bin"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    with Store(data, readonly=True) as store:
        assert TextCache(store).load()
        assert isinstance(_texts(store.state), _Saved)
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
    path.write_bytes(b"hivenote-texts-0\n" + path.read_bytes()[len(MAGIC) :])


def empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [flip, truncate, foreign, empty, os.unlink])
def test_a_damaged_or_missing_file_is_ignored(data: Path, damage: Callable[[Path], None]) -> None:
    damage(data / "cache" / "search.bin")
    with Store(data, readonly=True) as store:
        assert not TextCache(store).load()
        assert note_index(store.state).saved is None
        got = answers(store)
    assert got == warm_answers(data)


def test_a_file_saved_before_the_last_writes_is_ignored_removed_and_written_again(data: Path) -> None:
    """A file saved for other ops is of no use, and it may hold a note purged since: it goes at once."""
    with Store(data) as store:
        Notebook(store).remember(kind="fact", title="deploy on fridays", body="never")
    with Store(data) as store:
        cache = TextCache(store)
        assert not cache.load()  # saved for other ops
        assert not (data / "cache" / "search.bin").exists()
        got = answers(store)
        refresh_note_index(store.state)
        assert cache.save()  # the file now holds what the next start folds
    assert got == warm_answers(data)
    with Store(data, readonly=True) as store:
        assert TextCache(store).load()
