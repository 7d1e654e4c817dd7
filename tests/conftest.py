"""Shared fixtures (the browser ones come from tests/support/browser.py); the `system` marker put on every test that
reaches a helper registered with tests.support.system.needs (the fast lane deselects them); and CI's rule that a
skipped test is a failure unless it is expected."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from hivenote.server.storage.store import Store
from tests.support import system
from tests.support.live import Running, serve

pytest_plugins = ["tests.support.browser"]

os.environ.setdefault("PYTHONWARNDEFAULTENCODING", "1")

_skipped: list[str] = []


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(system.MARK) is None and (needed := system.item_reason(item)):
            item.add_marker(pytest.mark.system)
            item.user_properties.append((system.MARK, needed))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    system.running = item  # registered helpers check the test that calls them is marked
    try:
        return (yield)
    finally:
        system.running = None


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and not os.environ.get("HIVENOTE_ALLOW_SKIPS"):
        print(f"\n{len(_skipped)} test(s) skipped; CI treats a skip as a failure: {', '.join(_skipped[:5])}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "data") as opened:
        yield opened


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    """A real uvicorn on 127.0.0.1 over a real store in tmp_path/data (see tests/support/live.py)."""
    with serve(tmp_path / "data") as server:
        yield server
