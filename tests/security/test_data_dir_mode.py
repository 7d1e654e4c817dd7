"""The data folder holds every note, the tokens and the peer book: whichever command creates it first creates it
for this user only (0700), even under the usual umask 022 that leaves new folders readable by every account."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hivenote.desktop.instance import Instance
from hivenote.server.auth import Tokens
from hivenote.server.settings import save_setting
from hivenote.server.store import Store
from hivenote.server.sync.peerbook import editing


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def open_store(data: Path) -> None:
    with Store(data):
        pass


def first_token(data: Path) -> None:
    Tokens(data / "tokens.json").default()


def a_setting(data: Path) -> None:
    save_setting(data, "port", 7790)


def a_peer_book(data: Path) -> None:
    with editing(data):
        pass


def the_tray_instance(data: Path) -> None:
    instance = Instance(data)
    assert instance.acquire(lambda _: None)
    instance.release()


@pytest.mark.parametrize("create", [open_store, first_token, a_setting, a_peer_book, the_tray_instance])
def test_whichever_command_creates_the_data_folder_makes_it_private(
    tmp_path: Path, create: Callable[[Path], None]
) -> None:
    data = tmp_path / "profile" / "hivenote"
    create(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(tmp_path.joinpath("profile").stat().st_mode) == 0o755  # parents are not ours to close


def test_an_existing_folder_keeps_its_mode(tmp_path: Path) -> None:
    data = tmp_path / "shared-on-purpose"
    data.mkdir(mode=0o750)
    open_store(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o750
