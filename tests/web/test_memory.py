"""The server's memory once start-up work is done: start-up garbage collected, not frozen with the notebook."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from hivenote.server.storage.store import Store
from hivenote.server.web import app
from hivenote.server.web.app import _settle_memory
from tests.support.live import serve
from tests.support.wait import wait_until


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settling_collects_start_up_garbage_instead_of_freezing_it_for_good() -> None:
    gc.disable()  # so only the settling can collect the cycle
    try:
        garbage = weakref.ref(Cycle())
        assert garbage() is not None
        _settle_memory()
        assert garbage() is None
        assert gc.get_freeze_count() > 0  # the survivors are frozen
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_stopped_server_leaves_nothing_frozen_so_stop_start_does_not_grow(tmp_path: Path) -> None:
    """The tray stops and starts its server in one process: what a server froze once settled must be collectable once
    it stops, or every Stop/Start keeps the last server's cycles for good (the tray grew ~1 MB per restart)."""
    gone: list[weakref.ref[Store]] = []
    for _ in range(2):
        with serve(tmp_path / "data") as running:
            gone.append(weakref.ref(running.store))
            wait_until(lambda: gc.get_freeze_count() > 0, 30)  # settled: the notebook is frozen
            del running
        assert gc.get_freeze_count() == 0
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


def test_a_warm_up_that_never_ends_gives_the_collector_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector is held off while the search index warms; a warm-up failing at every tick must not leave the
    process without it for as long as the server runs."""

    def broken(*_: object, **__: object) -> bool:
        raise OSError("a step that fails every time")

    monkeypatch.setattr(app, "refresh_note_index", broken)
    monkeypatch.setattr(app, "COLLECTOR_HOLD_S", 3.0)
    assert gc.isenabled()
    try:
        with serve(tmp_path / "data"):
            assert not gc.isenabled()  # held off from start-up
            wait_until(gc.isenabled, 30)
    finally:
        gc.enable()
