"""The engine of the real-process fault-injection runs (test_integrity_live.py): installs (a data dir and the
`hivenote serve` process over it), what each one was told is stored, a seeded schedule of faults, and the checks
after healing. Each transport subclasses `Cluster` with how its installs find each other and its own faults.

Bookkeeping. Every note is written (created, then retitled) by one install only, with titles unique in the whole run,
so the title a note must end with is the last one its install had acknowledged, unless that write was lost for a
reason the contract allows: an own shard deleted before any other copy (another data dir's log, the bucket) held it.
That is decided when the shard is deleted, by looking for each title in every other copy's bytes."""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hivenote.server.storage.identity import read_node
from tests.support.peer_nodes import Node
from tests.support.skew import skewed
from tests.support.wait import eventually, wait_until

HEAL_S = 150  # every install running and every transport up again: converged well within this
POLL_S = 0.25
EXPORT_HEADER = re.compile(rb'^  "(exported_at|node)": [^\n]*\n', re.MULTILINE)  # who exported, and when


def hivenote(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (a child of this interpreter, so PYTHONPATH picks the checkout)."""
    return subprocess.run(
        [sys.executable, "-m", "hivenote.desktop", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )


@dataclass
class Install:
    """One data dir and the server over it; `notes` holds what it was told is stored."""

    name: str
    server: Node
    born: str = ""  # "" for an original install, else how it came to be ("copy of a", "faithful clone of a")
    notes: dict[str, list[str]] = field(default_factory=dict)  # note id -> titles acknowledged, in order
    lost_shard: bool = False  # its own shard was deleted while it was stopped, or a backup of it put back

    @property
    def data_dir(self) -> Path:
        return self.server.data_dir

    @property
    def running(self) -> bool:
        return self.server.process is not None

    def node_ids(self) -> set[str]:
        """Every node id this install wrote or writes as (node.json keeps the earlier ones)."""
        record = read_record(self.data_dir)
        return {str(record.get("node", ""))} | {str(p) for p in record.get("previous", [])} - {""}


class Cluster:
    """A seeded run of writes and faults over real servers; subclasses supply the transport."""

    transport = "?"
    initial = 3  # installs at the start
    max_installs = 5
    log_in_data_dir = True  # False: the log folder is a synced folder (the installs' settings name it)

    def __init__(self, root: Path, seed: int) -> None:
        self.root, self.seed = root, seed
        self.rng = random.Random(seed)  # the faults and their targets: the same schedule for a seed, however it runs
        self.pen = random.Random(-seed)  # what is written: depends on timing (which notes are here yet)
        self.installs: list[Install] = []
        self.lost: set[str] = set()  # titles whose only copy was in a deleted own shard
        self.written_as: dict[str, set[str]] = {}  # node id -> installs whose acknowledged writes carried it
        self.counter = 0
        self.steps: list[str] = []
        self.events: dict[str, int] = {}
        # The wider run's faults (fault_run.py): clocks set wrong both ways, kill -9 while writes are in flight, a
        # backup put back, and edits of one note's body by two installs at once.
        self.wide = False
        self.maybe: set[str] = set()  # titles of creates in flight at a kill -9: stored or not, either is right
        self.bodies: dict[str, set[str]] = {}  # note id -> every body it was given (acknowledged or in flight)
        self.edits_acked = 0  # bodies edit_together's edits were answered with
        self.lock = threading.Lock()  # the bookkeeping, written by two threads at once in edit_together

    # -- what subclasses provide ----------------------------------------------------------------------------------

    def configure(self, install: Install) -> None:
        """Set up a new install's data dir for the transport before its first start."""

    def before_copy(self, source: Install) -> None:
        """What must hold before `source`'s data dir is copied."""

    def configured_clone(self, source: Install, clone: Install) -> None:
        """After a data dir was copied: let the others reach the copy."""

    def copies_elsewhere(self, victim: Install) -> list[bytes]:
        """Every copy of shards that survives `victim` losing its own shard (other data dirs, a bucket)."""
        return [
            p.read_bytes() for i in self.installs if i is not victim for p in sorted(self.log_dir(i).glob("*.jsonl"))
        ] + [data for i in self.installs if i is not victim for data in self.kept_aside(i)]

    def kept_aside(self, install: Install) -> list[bytes]:
        """Copies of shards an install keeps outside its log folder (a synced folder's held copies), which a shard
        deleted from the log folder does not take with it."""
        return []

    def prepare(self) -> None:
        """After the first installs are configured, before their servers start (a sync tool, say)."""

    def faults(self) -> list[str]:
        """The fault kinds of this transport; each one happens at least once in a run."""
        wide = ["skew-ahead", "skew-behind", "kill-mid-write", "backup", "edit-together"] if self.wide else []
        return ["kill", "restart", "compact", "copy", "partition", *wide]

    def fault(self, kind: str) -> None:
        raise AssertionError(f"unknown fault {kind}")

    def heal_transport(self) -> None:
        """Bring the transport itself back (a bucket, a sync tool)."""

    # -- installs -------------------------------------------------------------------------------------------------

    def log_dir(self, install: Install) -> Path:
        if self.log_in_data_dir:
            return install.data_dir / "log"
        from hivenote.server.settings import load_settings

        return load_settings(environ={}, data_dir=install.data_dir).log_path

    def add(self, born: str = "", data_dir: Path | None = None) -> Install:
        name = "abcdefgh"[len(self.installs)]
        install = Install(name, Node(data_dir or self.root / name), born=born)
        self.installs.append(install)
        return install

    def say(self, what: str) -> None:
        line = f"[{self.transport} seed {self.seed}] {len(self.steps):02d} {what}"
        self.steps.append(line)
        print(line, flush=True)

    def start(self, *installs: Install) -> None:
        for install in installs:
            install.server.start()
        for install in installs:
            install.server.wait_ready()

    def stop(self, install: Install, sig: signal.Signals = signal.SIGTERM) -> None:
        code = install.server.stop(sig)
        if sig == signal.SIGTERM:
            assert code == 0, (
                f"{install.name}: hivenote serve exited with {code} on SIGTERM:\n{install.server.log_tail()}"
            )

    def running(self) -> list[Install]:
        return [i for i in self.installs if i.running]

    def stopped(self) -> list[Install]:
        return [i for i in self.installs if not i.running]

    def close(self) -> None:
        """Stop every server this run started (killed if one hangs)."""
        for install in self.installs:
            with contextlib.suppress(Exception):
                install.server.stop(signal.SIGKILL)

    # -- writes ---------------------------------------------------------------------------------------------------

    def _acked(self, install: Install, answer: dict[str, Any], key: str) -> None:
        node = str(answer[key]["node"])
        self.written_as.setdefault(node, set()).add(install.name)

    def next_count(self) -> int:
        with self.lock:
            self.counter += 1
            return self.counter

    def write(self, install: Install) -> None:
        """A new note, or a new title for one of this install's notes; recorded once the server acknowledged it."""
        self.next_count()
        alive = [n for n, titles in install.notes.items() if any(t not in self.lost for t in titles)]
        if alive and self.pen.random() < 0.45:
            note_id = self.pen.choice(sorted(alive))
            title = f"{install.name}:{self.counter}:retitles {note_id[-6:]}"
            try:
                answer = install.server.call("PATCH", f"/api/notes/{note_id}", {"title": title})
            except urllib.error.HTTPError as error:
                error.close()
                # Its create came back from a copy elsewhere, not folded here yet (a lost own shard): not acknowledged.
                assert error.code == 404, f"{install.name}: PATCH {note_id} answered {error.code}"
                self.say(f"write {install.name}: {note_id} not here yet (404), nothing acknowledged")
                return
            install.notes[note_id].append(title)
            self._acked(install, answer, "updated_by")
        else:
            title = f"{install.name}:{self.counter}:new"
            answer = install.server.call("POST", "/api/notes", {"kind": "fact", "title": title, "body": "b"})["note"]
            install.notes[str(answer["id"])] = [title]
            self._acked(install, answer, "created_by")

    def writes(self, count: int, among: list[Install] | None = None) -> None:
        among = among if among is not None else self.running()
        for _ in range(count):
            if among:
                self.write(self.pen.choice(among))

    # -- faults common to every transport -------------------------------------------------------------------------

    def kill(self) -> None:
        """kill -9 a running server (it stays down until a later step or the heal starts it)."""
        victim = self.rng.choice(self.running())
        self.stop(victim, signal.SIGKILL)
        self.say(f"kill -9 {victim.name}")

    def restart(self) -> None:
        victim = self.rng.choice(self.stopped())
        self.start(victim)
        self.say(f"start {victim.name} ({victim.server.node})")

    def compact(self) -> None:
        """`hivenote compact` on a stopped install (one whose notes were retitled, if any), while another is away
        (stopped, so it holds the shard as it was before); then more writes before it comes back."""
        retitled = [i for i in self.installs if any(len(titles) > 1 for titles in i.notes.values())]
        victim = self.pen.choice(retitled or self.installs)
        others = [i for i in self.running() if i is not victim]
        away = [self.rng.choice(others)] if others and self.rng.random() < 0.7 else []
        for install in [victim, *away]:
            if install.running:
                self.stop(install)
        self.go_away(victim)
        done = hivenote("--data-dir", str(victim.data_dir), "compact")
        assert done.returncode == 0, f"compact on {victim.name}: {done.stdout}{done.stderr}"
        self.start(victim)
        self.writes(3, [victim])
        self.say(
            f"compact {victim.name} ({victim.server.node}) while {', '.join(i.name for i in away) or 'nobody'} "
            f"away: {done.stdout.strip().splitlines()[0]}"
        )
        self.come_back(victim)

    def go_away(self, victim: Install) -> None:
        """More of the others away while `victim` compacts (a transport may stop its sync tool)."""

    def come_back(self, victim: Install) -> None:
        """Undo `go_away`."""

    def clone(self, faithful: bool) -> None:
        """A stopped install's data dir copied and started as another process (same host fingerprint); faithful:
        its node.json claim made to match the copy's inodes, as a cloned VM disk would."""
        source = self.rng.choice(self.installs)
        self.before_copy(source)
        if source.running:
            self.stop(source)
        clone = self.add(born=f"{'faithful clone' if faithful else 'copy'} of {source.name}")
        shutil.copytree(source.data_dir, clone.data_dir, symlinks=True)
        if faithful:
            fake_vm_clone(clone.data_dir)
        self.configured_clone(source, clone)
        self.start(source, clone)
        self.writes(2, [source, clone])
        self.say(f"{clone.born}: {clone.name} on port {clone.server.port} ({clone.server.node})")

    def lose(self, reachable: bool) -> None:
        """An install's own shard deleted while it is stopped; it starts again with the other copies reachable, or
        cut off from them (and writes before they are back)."""
        victim = self.rng.choice(self.installs)
        if victim.running:
            self.stop(victim)
        others = [i for i in self.installs if i is not victim]
        if reachable and not [i for i in others if i.running]:
            self.start(self.rng.choice(others))
        self.lose_shard(victim)
        away = [] if reachable else self.cut_off(victim)
        self.start(victim)
        self.writes(2, [victim])
        self.say(f"{victim.name} started {'with' if reachable else 'cut off from'} the others as {victim.server.node}")
        if not reachable:
            self.reconnect(away)

    def cut_off(self, victim: Install) -> list[Install]:
        """Make every other copy unreachable for `victim`; by default every other server stops."""
        away = [i for i in self.running() if i is not victim]
        for install in away:
            self.stop(install)
        return away

    def reconnect(self, away: list[Install]) -> None:
        self.start(*away)

    def lose_shard(self, victim: Install) -> None:
        """Delete a stopped install's own shard, deciding which acknowledged titles survive only there (lost)."""
        assert not victim.running
        node = read_node(victim.data_dir)
        shard = self.log_dir(victim) / f"{node}.jsonl"
        if not shard.exists():
            return
        data = shard.read_bytes()
        elsewhere = (
            self.copies_elsewhere(victim)
            + [p.read_bytes() for p in self.log_dir(victim).glob("*.jsonl") if p.name != shard.name]
            + self.kept_aside(victim)
        )
        gone = {
            title
            for install in self.installs
            for titles in install.notes.values()
            for title in titles
            if json.dumps(title).encode() in data and not any(json.dumps(title).encode() in b for b in elsewhere)
        }
        self.lost |= gone
        shard.unlink()
        victim.lost_shard = True
        self.say(f"deleted {victim.name}'s own shard {shard.name} ({len(gone)} titles held nowhere else)")

    # -- the wider run's faults (fault_run.py) -------------------------------------------------------------------

    def skew(self, ahead: bool) -> None:
        """A running install restarted with its wall clock a day ahead or 20 minutes behind (libfaketime); it writes
        and edits notes with the others, then runs with its clock right again and writes more: its own later writes
        must still win, and everyone must agree on what the concurrent edits left."""
        victim = self.rng.choice(self.running())
        wrong = "+1d" if ahead else "-20m"
        self.stop(victim)
        victim.server.env = skewed(wrong)
        self.start(victim)
        self.writes(3, [victim])
        self.edit_together(victim)
        self.stop(victim)
        victim.server.env = None
        self.start(victim)
        self.writes(2, [victim])
        self.say(f"{victim.name} ran with its clock {wrong}, then right again")

    def kill_mid_write(self) -> None:
        """kill -9 a server while creates are in flight to it (with a bucket: while it uploads them). Every create it
        answered must survive; the one in flight at the kill may or may not."""
        victim = self.rng.choice(self.running())
        want = self.rng.randint(1, 4)
        answered = threading.Event()
        done = threading.Event()

        def pound() -> None:
            count = 0
            while not done.is_set():
                title = f"{victim.name}:{self.next_count()}:inflight"
                with self.lock:
                    self.maybe.add(title)
                try:
                    made = victim.server.call("POST", "/api/notes", {"kind": "fact", "title": title, "body": "b"})
                except OSError:  # killed: refused, reset, or closed before it answered
                    return
                with self.lock:
                    self.maybe.discard(title)
                    victim.notes[str(made["note"]["id"])] = [title]
                    self._acked(victim, made["note"], "created_by")
                count += 1
                if count >= want:
                    answered.set()

        writer = threading.Thread(target=pound, name="kill-mid-write", daemon=True)
        writer.start()
        wait_until(lambda: answered.is_set() or not writer.is_alive(), 60, "creates answered before the kill")
        self.stop(victim, signal.SIGKILL)
        done.set()
        writer.join(60)
        assert not writer.is_alive(), "a create to a killed server never returned"
        self.say(f"kill -9 {victim.name} with a create in flight, after {want} answered")

    def backup(self) -> None:
        """A backup of an install (its data dir, and its own shard where a synced folder keeps it) taken while it is
        stopped; it writes on, stops, and the backup is put back in place: the writes made since are excused only if
        no other copy held them when the backup was put back."""
        victim = self.rng.choice(self.installs)
        if victim.running:
            self.stop(victim)
        saved = self.root / "backups" / f"{victim.name}-{len(self.steps)}"
        shutil.copytree(victim.data_dir, saved, symlinks=True)
        node = read_node(victim.data_dir)
        shard = self.log_dir(victim) / f"{node}.jsonl"
        outside = None if self.log_in_data_dir else (shard.read_bytes() if shard.exists() else b"")
        self.start(victim)
        self.writes(3, [victim])
        self.writes(2)
        self.stop(victim)
        current = b"".join(p.read_bytes() for p in sorted(self.log_dir(victim).glob("*.jsonl")))
        older = outside if outside is not None else b""
        if outside is None:
            older = b"".join(p.read_bytes() for p in sorted((saved / "log").glob("*.jsonl")))
        elsewhere = self.copies_elsewhere(victim)
        gone = {
            title
            for titles in victim.notes.values()
            for title in titles
            if json.dumps(title).encode() in current
            and json.dumps(title).encode() not in older
            and not any(json.dumps(title).encode() in b for b in elsewhere)
        }
        self.lost |= gone
        shutil.rmtree(victim.data_dir)
        shutil.copytree(saved, victim.data_dir, symlinks=True)
        shutil.rmtree(saved)
        if outside is not None:
            temp = shard.with_name(f".{shard.name}.restore.tmp")
            temp.write_bytes(outside)
            temp.replace(shard)
        victim.lost_shard = True  # its own shard went back in time: a fork or a new node id is explained
        self.start(victim)
        self.writes(2, [victim])
        self.say(f"backup of {victim.name} put back ({len(gone)} titles written since held nowhere else)")

    def edit_together(self, among: Install | None = None) -> None:
        """Two running installs give one note (written by any install, here on both) a new body at the same time;
        each answered body is a candidate, and every install must end with the same one."""
        running = self.running()
        if len(running) < 2:
            return
        first = among if among is not None and among.running else self.rng.choice(running)
        second = self.rng.choice([i for i in running if i is not first])
        ids = sorted(set(self.served(first)) & set(self.served(second)) & set(self.expected()))
        if not ids:
            return
        note_id = self.pen.choice(ids)
        answers: list[str] = []

        def edit(install: Install) -> None:
            body = f"{install.name}:{self.next_count()}:body"
            with self.lock:
                self.bodies.setdefault(note_id, set()).add(body)  # in flight: it may win even if never answered
            try:
                answer = install.server.call("PATCH", f"/api/notes/{note_id}", {"body": body})
            except urllib.error.HTTPError as error:
                error.close()
                answers.append(f"{install.name} {error.code}")
                return
            with self.lock:
                self.edits_acked += 1
                self._acked(install, answer, "updated_by")
            answers.append(f"{install.name} ok")

        editors = [threading.Thread(target=edit, args=(i,), daemon=True) for i in (first, second)]
        for editor in editors:
            editor.start()
        for editor in editors:
            editor.join(60)
        self.say(f"{first.name} and {second.name} edited {note_id} at once: {', '.join(sorted(answers))}")

    # -- the run --------------------------------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        for _ in range(self.initial):
            self.configure(self.add())
        self.prepare()
        self.start(*self.installs)
        self.say("started " + ", ".join(f"{i.name}={i.server.node}" for i in self.installs))
        self.writes(4)
        plan = self.faults()
        repeatable = [kind for kind in plan if kind not in ("copy", "vm-clone")]  # one of each: installs stay few
        plan += [self.rng.choice(repeatable) for _ in range(max(0, steps // 2 - len(plan)))]
        self.rng.shuffle(plan)
        for kind in plan:
            if not self.running():
                self.restart()
            self.writes(self.rng.randint(1, 3))
            if kind in ("copy", "vm-clone") and len(self.installs) >= self.max_installs:
                kind = "kill"
            self.events[kind] = self.events.get(kind, 0) + 1
            if kind == "kill":
                self.kill()
            elif kind == "restart":
                if self.stopped():
                    self.restart()
            elif kind == "compact":
                self.compact()
            elif kind in ("copy", "vm-clone"):
                self.clone(faithful=kind == "vm-clone")
            elif kind in ("lose", "lose-offline"):
                self.lose(reachable=kind == "lose")
            elif kind in ("skew-ahead", "skew-behind"):
                self.skew(ahead=kind == "skew-ahead")
            elif kind == "kill-mid-write":
                self.kill_mid_write()
            elif kind == "backup":
                self.backup()
            elif kind == "edit-together":
                self.edit_together()
            else:
                self.fault(kind)
            if self.stopped() and self.rng.random() < 0.4:
                self.restart()

    def heal(self) -> None:
        self.heal_transport()
        if self.stopped():
            self.start(*self.stopped())
        self.say("healed: every install running " + ", ".join(f"{i.name}={i.server.node}" for i in self.installs))

    # -- the checks -----------------------------------------------------------------------------------------------

    def expected(self) -> dict[str, str]:
        """note id -> the title it must show: the last acknowledged one that was not lost."""
        found = {}
        for install in self.installs:
            for note_id, titles in install.notes.items():
                kept = [t for t in titles if t not in self.lost]
                if kept:
                    found[note_id] = kept[-1]
        return found

    def allowed(self) -> dict[str, set[str]]:
        """note id -> every title it may show: the one `expected` says, or one acknowledged after it that was lost.
        A lost write is excused, not forbidden: its only copy was deleted, yet a sync tool may have carried it on
        before the deletion did, and then it is rightly there (a note may be absent when all its titles were lost)."""
        found: dict[str, set[str]] = {}
        for install in self.installs:
            for note_id, titles in install.notes.items():
                last = max((i for i, t in enumerate(titles) if t not in self.lost), default=-1)
                found[note_id] = set(titles[max(last, 0) :])
        return found

    def served(self, install: Install) -> dict[str, str]:
        """note id -> title, as the install's server exports the notebook over REST."""
        return {n: title for n, (title, _) in self.served_notes(install).items()}

    def served_notes(self, install: Install) -> dict[str, tuple[str, str]]:
        """note id -> (title, body), as the install's server exports the notebook over REST."""
        notebook = install.server.call("GET", "/api/export?format=notebook")
        return {n["id"]: (n["title"], n["body"]) for n in notebook["notes"]}

    def differences(self) -> list[str]:
        expected, allowed, problems = self.expected(), self.allowed(), []
        for install in self.installs:
            assert install.server.healthy()  # fails if the server exited by itself
            notes = self.served_notes(install)
            held = {n: title for n, (title, _) in notes.items()}
            missing = sorted(set(expected) - set(held))
            wrong = sorted(n for n in allowed if n in held and held[n] not in allowed[n])
            extra = sorted(n for n in set(held) - set(allowed) if held[n] not in self.maybe)
            bodies = sorted(
                n for n, (_, body) in notes.items() if body != "b" and body not in self.bodies.get(n, set())
            )
            titles: dict[str, list[str]] = {}
            for n, title in held.items():
                titles.setdefault(title, []).append(n)
            twice = sorted((title, ids) for title, ids in titles.items() if len(ids) > 1)
            if missing or wrong or extra or bodies or twice:
                problems.append(
                    f"{install.name} ({install.server.node}): {len(missing)} acknowledged notes missing "
                    f"{[(n, expected[n]) for n in missing][:4]}, {len(wrong)} with another title "
                    f"{[(n, held[n], expected.get(n, 'absent')) for n in wrong][:4]}, {len(extra)} unexpected "
                    f"{[(n, held[n]) for n in extra][:4]}, "
                    f"{len(bodies)} with a body never written {[(n, notes[n][1]) for n in bodies][:4]}, "
                    f"{len(twice)} titles on two notes (a duplicate) {twice[:4]}"
                )
        return problems

    def wait_converged(self) -> tuple[float, list[str]]:
        """Seconds until every install serves what it must (or the deadline), and what still differs then."""
        started, problems = time.monotonic(), self.differences()

        def converged() -> bool:
            nonlocal problems
            problems = self.differences()
            return not problems

        eventually(lambda: not problems or converged(), HEAL_S, interval=POLL_S)
        took = time.monotonic() - started
        return took, [f"not converged {HEAL_S} s after healing:", *problems] if problems else []

    def exports(self) -> dict[str, bytes]:
        """`hivenote export -` of each install, without the two lines naming the exporter and the time."""
        found = {}
        for install in self.installs:
            done = hivenote("--data-dir", str(install.data_dir), "export", "--format", "notebook", "-")
            assert done.returncode == 0, f"export on {install.name}: {done.stderr}"
            found[install.name] = EXPORT_HEADER.sub(b"", done.stdout.encode("utf-8"))
        return found

    def integrity(self, install: Install) -> dict[str, Any] | None:
        status = install.server.call("GET", "/api/status")
        return next((t for t in status["sync"]["transports"] if t["name"] == "integrity"), None)

    def forked_positions(self, install: Install) -> dict[str, int]:
        """node -> how many of its positions the install's log files hold with two different contents (a
        `seq.keep` placeholder is compaction's stand-in for a line, not a second content)."""
        contents: dict[tuple[str, int], set[bytes]] = {}
        for path in sorted(self.log_dir(install).glob("*.jsonl")):
            if path.name.startswith("."):
                continue
            for line in path.read_bytes().splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    op = json.loads(line)
                    if op["op"] != "seq.keep":
                        contents.setdefault((str(op["node"]), int(op["seq"])), set()).add(line)
        forked: dict[str, int] = {}
        for (node, _), lines in contents.items():
            if len(lines) > 1:
                forked[node] = forked.get(node, 0) + 1
        return forked

    def check_identity(self) -> list[str]:
        """Forks and moves to a new node id: each one reported, and each one reported explained by something this
        run did (a copied or cloned data dir, a deleted own shard, two installs that wrote as one node)."""
        shared = {node for node, writers in self.written_as.items() if len(writers) > 1}
        problems = []
        for install in self.installs:
            entry = self.integrity(install)
            reported = {f["node"] for f in (entry or {}).get("detail", {}).get("forks", [])}
            forked = self.forked_positions(install)
            unreported = sorted(set(forked) - reported)
            if unreported:
                problems.append(
                    f"{install.name}: its log holds two contents at positions of {unreported} "
                    f"({[forked[n] for n in unreported]} positions) but its sync status reports no fork "
                    f"(integrity entry: {entry and entry['error']})"
                )
            unexplained = sorted(reported - shared - self.rewound())
            if unexplained:
                problems.append(f"{install.name}: reports forks of {unexplained}, which no two installs wrote as")
            branched = self.branches(install) - shared - self.rewound()
            if branched:
                problems.append(
                    f"{install.name}: holds branch files (another history) of {sorted(branched)}, though no two "
                    f"installs wrote as them and no shard of theirs was deleted or put back from a backup"
                )
            moved = bool(read_record(install.data_dir).get("previous"))
            cause = install.born or install.lost_shard or bool(install.node_ids() & shared)
            if (moved or entry is not None) and not cause and not reported:
                problems.append(
                    f"{install.name}: {'moved to a new node id' if moved else 'reports an integrity problem'} "
                    f"with no copy, clone or lost shard behind it: {entry and entry['error']}"
                )
        return problems

    def branches(self, install: Install) -> set[str]:
        """The nodes whose branch files (`<node>~<hex>.jsonl`, another history kept) the install's log holds."""
        from hivenote.server.sync.replica import writer_of

        return {writer_of(p.stem) for p in self.log_dir(install).glob("*~*.jsonl") if not p.name.startswith(".")}

    def rewound(self) -> set[str]:
        """Node ids of installs whose own shard was deleted or put back from a backup (two histories may exist)."""
        return {node for i in self.installs if i.lost_shard for node in i.node_ids()}

    def explain(self) -> str:
        lines = [f"seed {self.seed}; schedule:", *self.steps, f"lost titles: {sorted(self.lost)}"]
        for install in self.installs:
            files = sorted(p.name for p in self.log_dir(install).iterdir()) if self.log_dir(install).exists() else []
            lines.append(
                f"{install.name} ({install.born or 'original'}; node ids {sorted(install.node_ids())}): {files}"
            )
        for install in self.installs:  # a server that ended by itself says why in its log
            process = install.server.process
            if process is not None and process.poll() is not None:
                lines.append(
                    f"{install.name}'s server exited by itself ({process.returncode}):\n{install.server.log_tail()}"
                )
        return "\n".join(lines)


def read_record(data_dir: Path) -> dict[str, Any]:
    """node.json ({} when missing): the node id, and the earlier ones in `previous`."""
    try:
        record = json.loads((data_dir / "node.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return record if isinstance(record, dict) else {}


def fake_vm_clone(data_dir: Path) -> None:
    """Make a copied data dir's node.json claim its own inodes, as a cloned VM disk's would (nothing can tell the
    copy from the original then, until their writes meet). Before claims existed (node.json held none), a copy
    already passed for the original: nothing to do."""
    try:
        from hivenote.server.storage.identity import record_shard
    except ImportError:  # a checkout from before the claims
        return
    node = read_node(data_dir)
    shard = data_dir / "log" / f"{node}.jsonl"
    record_shard(data_dir, node, shard, shard.stat().st_size if shard.exists() else 0)


@contextlib.contextmanager
def reported(cluster: Cluster) -> Iterator[Cluster]:
    """Stop every server at the end; a failure names the seed and the schedule that led to it."""
    try:
        yield cluster
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n\n{cluster.explain()}") from None
    finally:
        cluster.close()


def run_checks(cluster: Cluster) -> dict[str, Any]:
    """After healing: every acknowledged write everywhere, identical exports, every fork reported and explained;
    every server then stops cleanly. All of it is checked before failing, so a failure says everything that broke."""
    took, problems = cluster.wait_converged()
    exports = cluster.exports()
    groups: dict[bytes, list[str]] = {}
    for name, data in exports.items():
        groups.setdefault(data, []).append(name)
    if len(groups) > 1:
        problems.append(f"`hivenote export` differs between installs: {sorted(groups.values())}")
    problems += cluster.check_identity()
    assert not problems, "\n".join(problems)
    for install in cluster.installs:
        cluster.stop(install)
    notes = len(cluster.expected())
    return {"converged_s": round(took, 2), "notes": notes, "excused": len(cluster.lost), "faults": cluster.events}
