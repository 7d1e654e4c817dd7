"""The tray's server supervisor on real sockets, a real store and a real uvicorn: start, stop, restart on the same
port, the error states (port in use, data dir locked, server died) and agents online with an injected clock."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.desktop.supervisor import Status, Supervisor, agents_online
from hivenote.server.agents import AgentTracker
from hivenote.server.core.model import Author
from hivenote.server.storage.store import Store, lock_holder
from tests.support.disks import vanish
from tests.support.live import free_port, health, taken_port
from tests.support.wait import wait_until

pytestmark = pytest.mark.system  # the tray's supervisor starting and stopping real servers

WAIT_S = 30


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


class Recorder:
    """on_change callback that remembers each state it was called in."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None
        self.states: list[str] = []

    def __call__(self) -> None:
        assert self.supervisor is not None
        self.states.append(self.supervisor.status().server)


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def supervised(tmp_path: Path, port: int) -> Iterator[tuple[Supervisor, Recorder, Clock]]:
    clock = Clock()
    recorder = Recorder()
    supervisor = Supervisor(tmp_path / "data", {"port": port}, tracker=AgentTracker(now_ms=clock), on_change=recorder)
    recorder.supervisor = supervisor
    yield supervisor, recorder, clock
    supervisor.shutdown()


def run(done: threading.Event) -> None:
    assert done.wait(WAIT_S), "the supervisor did not finish the command"


def test_start_stop_start_on_the_same_port(supervised: tuple[Supervisor, Recorder, Clock], port: int) -> None:
    supervisor, recorder, _ = supervised
    assert supervisor.status().server == "stopped"
    run(supervisor.start())
    assert supervisor.status() == Status("running", f"127.0.0.1:{port}")
    assert health(port) == 200
    assert lock_holder(supervisor.data_dir) is not None
    run(supervisor.stop())
    assert supervisor.status().server == "stopped"
    assert health(port) is None
    assert lock_holder(supervisor.data_dir) is None  # the store is closed: `hivenote compact` may run now
    run(supervisor.share_on_lan(False))  # a restart on loopback, as the tray's toggle makes it
    assert supervisor.status().server == "running"
    assert health(port) == 200
    run(supervisor.share_on_lan(False))
    assert health(port) == 200
    assert recorder.states == [
        "starting",
        "running",
        "stopped",
        "starting",
        "running",
        "stopped",
        "starting",
        "running",
    ]


def test_start_twice_is_one_server(supervised: tuple[Supervisor, Recorder, Clock], port: int) -> None:
    supervisor, recorder, _ = supervised
    run(supervisor.start())
    run(supervisor.start())
    assert recorder.states == ["starting", "running"]


def test_port_in_use_is_an_error_state_then_recovers(supervised: tuple[Supervisor, Recorder, Clock], port: int) -> None:
    supervisor, _, _ = supervised
    with taken_port(port):
        run(supervisor.start())
        status = supervisor.status()
        assert status.server == "error"
        assert f"port {port}" in status.message and "already in use" in status.message
        assert "error" in status.title and "already in use" in status.title
        assert lock_holder(supervisor.data_dir) is None  # nothing was left half-started
    run(supervisor.start())
    assert supervisor.status().server == "running"
    assert health(port) == 200


def test_data_dir_held_by_another_process_is_an_error_and_frees_the_port(
    supervised: tuple[Supervisor, Recorder, Clock], port: int
) -> None:
    supervisor, _, _ = supervised
    with Store(supervisor.data_dir):
        run(supervisor.start())
        status = supervisor.status()
        assert status.server == "error"
        assert "holds this data dir" in status.message and "starts when it stops" in status.message
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # the pre-bound socket was closed again
    run(supervisor.start())
    assert supervisor.status().server == "running"


def test_a_server_that_dies_becomes_the_error_state(supervised: tuple[Supervisor, Recorder, Clock]) -> None:
    supervisor, recorder, _ = supervised
    run(supervisor.start())
    server = supervisor._server
    assert server is not None
    server.server.should_exit = True  # uvicorn ends by itself, as on an unexpected exit
    server.thread.join(WAIT_S)
    supervisor.check_alive()
    run(supervisor.stop())  # queued after the "died" command, so it has been handled
    assert "error" in recorder.states
    assert recorder.states[recorder.states.index("error") - 1] == "stopped"


def test_agents_online_follow_the_two_minute_window(supervised: tuple[Supervisor, Recorder, Clock]) -> None:
    supervisor, _, clock = supervised
    run(supervisor.start())
    tracker = supervisor.tracker
    tracker.record(Author(agent="cursor", client="Cursor 1.7"), "brain_search")
    clock.now += 30_000
    tracker.record(Author(agent="claude-code", client="claude-code 2.0"), "brain_remember")
    tracker.record(Author(agent="dashboard", client="hivenote-dashboard"))  # a person, not an agent
    tracker.record(Author(agent="codex", client="codex", person="alice"))
    status = supervisor.status()
    assert [(a.name, a.last_seen) for a in status.agents] == [
        ("Claude Code", "just now"),
        ("Codex (alice)", "just now"),
        ("Cursor", "just now"),
    ]  # newest first; equal times keep the order they were first seen in
    assert status.title.startswith("Hivenote — running · 3 agents online: ")
    clock.now += 91_000  # Cursor: 121 s ago
    assert [(a.name, a.last_seen) for a in supervisor.status().agents] == [
        ("Claude Code", "1 minute ago"),
        ("Codex (alice)", "1 minute ago"),
    ]
    clock.now += 120_000
    status = supervisor.status()
    assert status.agents == ()
    assert status.title == "Hivenote — running · no agents online"


def test_agents_of_one_product_are_one_entry_with_the_latest_time() -> None:
    clock = Clock()
    tracker = AgentTracker(now_ms=clock)
    tracker.record(Author(agent="cursor", client="Cursor 1.7"))
    clock.now += 70_000
    tracker.record(Author(agent="cursor", client="Cursor 1.8"))
    clock.now += 10_000
    assert [(a.name, a.last_seen) for a in agents_online(tracker, owner="")] == [("Cursor", "just now")]


def test_share_on_lan_saves_the_setting_and_restarts_on_the_same_port(
    supervised: tuple[Supervisor, Recorder, Clock], port: int
) -> None:
    supervisor, _, _ = supervised
    run(supervisor.start())
    run(supervisor.share_on_lan(True))
    status = supervisor.status()
    assert status.server == "running" and status.sharing
    assert json.loads((supervisor.data_dir / "settings.json").read_text(encoding="utf-8")) == {"host": "0.0.0.0"}
    assert health(port) in (200, 401)  # the guard now wants a token on the LAN address; loopback still answers
    assert "shared on LAN" in status.title
    run(supervisor.share_on_lan(False))
    status = supervisor.status()
    assert status.server == "running" and not status.sharing
    assert json.loads((supervisor.data_dir / "settings.json").read_text(encoding="utf-8")) == {}


def test_a_failing_sync_transport_shows_in_the_status(supervised: tuple[Supervisor, Recorder, Clock]) -> None:
    supervisor, _, _ = supervised
    run(supervisor.start())
    sync = supervisor._sync
    assert sync is not None and supervisor.status().sync_problems == ()
    sync.failed(
        "peer http://laptop:7788", "cannot reach http://laptop:7788: connection refused", kind="peer", target="x"
    )
    status = supervisor.status()
    assert status.sync_problems == ("peer http://laptop:7788: cannot reach http://laptop:7788: connection refused",)
    assert status.title.endswith(
        "· sync problem: peer http://laptop:7788: cannot reach http://laptop:7788: connection refused"
    )
    sync.ok("peer http://laptop:7788", kind="peer", target="x")
    assert supervisor.status().sync_problems == ()


def test_a_log_folder_that_vanishes_shows_in_the_status_until_it_is_back(
    supervised: tuple[Supervisor, Recorder, Clock], tmp_path: Path
) -> None:
    supervisor, _, _ = supervised
    drive = tmp_path / "drive"
    (drive / "hivenote").mkdir(parents=True)
    supervisor.data_dir.mkdir(parents=True)
    settings = {"log_dir": str(drive / "hivenote")}
    (supervisor.data_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    run(supervisor.start())
    assert supervisor.status().storage_problem == ""
    # Unplugged: a file takes the drive's place in the same step, so the store's follow loop cannot make the folder
    # again and put its shard back before the status is read (it did, now and then, on a loaded machine).
    vanish(drive, leave_file=True)
    wait_until(lambda: supervisor.status().storage_problem != "", WAIT_S)
    status = supervisor.status()
    assert status.server == "running" and status.warning
    assert f"The log folder {drive / 'hivenote'} is gone" in status.title
    drive.unlink()
    (drive / "hivenote").mkdir(parents=True)  # plugged back in
    wait_until(lambda: supervisor.status().storage_problem == "", WAIT_S)
    assert any(drive.glob("hivenote/*.jsonl"))  # this machine's shard was put back
