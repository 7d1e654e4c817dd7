"""Clock skew between real machines (issue: a machine a day ahead won every last-writer-wins for a day, even over its
own later edits once its clock was fixed; it dragged the others' clocks an hour ahead; and only the machines whose
clock was right said anything). Two real `hivenote serve` processes pulling from each other; one runs a day ahead
under libfaketime, as a machine with a wrong clock does."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivenote.server.sync.folder import use_folder
from hivenote.server.sync.peer import add_peer, list_peers
from hivenote.server.sync.status import SyncStatus
from hivenote.server.tokens import new_token
from tests.support.peer_nodes import Node, running
from tests.support.skew import skewed
from tests.support.wait import wait_until

DAY_MS = 86_400_000


@dataclass
class SkewedNode(Node):
    """`hivenote serve` with its wall clock a day ahead (`skewed`)."""

    ahead: str = ""

    def start(self) -> None:
        if not self.ahead:
            return super().start()
        assert self.process is None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.token  # noqa: B018 - created before the server starts
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(self.data_dir), "serve"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*argv, "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=skewed(self.ahead),
            )
        return None


def test_a_skewed_process_has_its_wall_clock_ahead_and_its_timed_waits_end() -> None:
    """The harness itself: a thread joined for 0.05 s (as `hivenote serve` waits for its server to start) returns."""
    probe = (
        "import threading, time\n"
        "t = threading.Thread(target=threading.Event().wait, args=(5,)); t.start()\n"
        "began = time.monotonic(); t.join(0.05); print(time.monotonic() - began, time.time())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=skewed("+1d"), capture_output=True, encoding="utf-8", timeout=30, check=False
    )
    waited, wall = (float(x) for x in done.stdout.split())
    assert waited < 1.0
    assert wall - time.time() > DAY_MS / 1000 - 120


def transport(node: Node, name: str) -> dict[str, Any] | None:
    transports = node.call("GET", "/api/status")["sync"]["transports"]
    return next((t for t in transports if t["name"] == name), None)


def clock_entry(node: Node, says: str) -> dict[str, Any]:
    """The node's `clock` entry once it is failing and its error says `says`: one read of the status, waited for
    (reading it again after the wait would look at another moment)."""
    seen: list[dict[str, Any] | None] = [None]

    def said() -> bool:
        seen[0] = transport(node, "clock")
        return seen[0] is not None and seen[0]["failing"] is True and says in seen[0]["error"]

    wait_until(said, what=lambda: f"{node.node}'s clock entry saying {says!r}, it is {seen[0]}")
    assert seen[0] is not None
    return seen[0]


def knows_itself(node: Node) -> bool:
    """The node learned its own URL by gossip (its peer lists it back) and found it is itself."""
    return any(peer.is_self for peer in list_peers(node.data_dir))


def test_a_failing_entry_always_says_why_even_when_the_clock_stepped_back() -> None:
    """The wall clock of a machine whose clock is set right steps back: a success after that is still the last
    word (a failing entry with the message a success cleared would say nothing)."""
    now = [1_000_000]
    status = SyncStatus(now_ms=lambda: now[0])
    status.failed("clock", "this machine's clock is a day ahead", kind="clock", target="n")
    now[0] -= DAY_MS  # the clock is fixed
    status.ok("clock", kind="clock", target="n")
    (entry,) = status.snapshot()
    assert entry["failing"] is False and entry["error"] == ""
    assert status.problems() == []
    status.failed("clock", "again", kind="clock", target="n")
    (entry,) = status.snapshot()
    assert entry["failing"] is True and entry["error"] == "again"


def note(node: Node, note_id: str) -> dict[str, Any]:
    return dict(node.call("GET", f"/api/notes/{note_id}"))


def test_a_machine_a_day_ahead_is_told_on_itself_drags_nobody_and_its_fixed_clock_still_wins_its_own_edits(
    tmp_path: Path,
) -> None:
    a, b = SkewedNode(tmp_path / "a", ahead="+1d"), SkewedNode(tmp_path / "b")
    token = new_token()
    add_peer(a.data_dir, b.url, token)
    add_peer(b.data_dir, a.url, token)
    with running(a, b):
        note_id = a.remember("written while a day ahead")
        wait_until(lambda: "written while a day ahead" in b.titles(), what="b holding a's note")

        # Each learns its own URL from the other (gossip) and finds it is itself: its own clock is no measurement.
        wait_until(lambda: knows_itself(a) and knows_itself(b), what="a and b each knowing its own URL as itself")
        # The skewed machine says so itself (it measured b's clock through b's HTTP Date). With only two clocks,
        # either may be the wrong one, and both say so; a third machine or the bucket settles which.
        for node, side in ((a, "ahead of"), (b, "behind")):
            clock = clock_entry(node, "one of the two is wrong")
            assert "this machine's clock is" in clock["error"] and side in clock["error"]
            assert "timedatectl set-ntp true" in clock["error"]

        # b saw a's stamp a day ahead and was not dragged: what b writes now is stamped with the real time.
        b_note = note(b, b.remember("written on b afterwards"))
        assert b_note["updated"] < time.time_ns() // 1_000_000 + 60_000
        assert b.call("GET", "/api/status")["clock_skew_ms"][a.node] > DAY_MS - 120_000

        assert a.stop() == 0
        a.ahead = ""  # its clock is fixed
        a.start()
        a.wait_ready()
        a.call("PATCH", f"/api/notes/{note_id}", {"title": "edited after the clock was fixed"})
        # Its own later edit wins over its own earlier one (its stamps follow its own log), here and on b.
        assert note(a, note_id)["title"] == "edited after the clock was fixed"
        wait_until(
            lambda: note(b, note_id)["title"] == "edited after the clock was fixed", what=lambda: str(note(b, note_id))
        )
        # And it still says its log runs ahead of its clock until real time catches up.
        clock_entry(a, "wrote stamps")


def test_with_a_synced_folder_a_machine_a_day_ahead_is_told_on_itself_by_the_receipts(tmp_path: Path) -> None:
    """Issue: with a synced folder (no HTTP between the machines) a machine whose clock was a day ahead said nothing.
    The receipt that answers a write measures the other machine's clock. One folder shared by both stands in for
    what a sync tool delivers."""
    shared = tmp_path / "Sync"
    a, b = SkewedNode(tmp_path / "a", ahead="+1d"), SkewedNode(tmp_path / "b")
    for node in (a, b):
        node.data_dir.mkdir(parents=True)
        use_folder(node.data_dir, shared)
    with running(a, b):
        a.remember("written on a")
        b.remember("written on b")
        for node, side in ((a, "ahead of"), (b, "behind")):
            clock = clock_entry(node, "one of the two is wrong")
            assert "this machine's clock is" in clock["error"] and side in clock["error"]
        assert b.node in transport(a, "clock")["error"]  # type: ignore[index]
