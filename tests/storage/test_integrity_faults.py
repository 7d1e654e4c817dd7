"""Fault injection, in process: machines (real data dirs and stores) write, restart, lose their shard, get cloned
(a copied data dir, or a clone faithful down to its inode claims, as a cloned VM is), compact, and exchange their
log folders the way a sync tool does (newer copies replace older ones, a clash becomes a conflict copy). After every
step and after healing: every write a machine acknowledged is visible wherever its bytes arrived, no (node, seq) is
ever folded with two contents without a recorded fork, and machines that hold the same files hold the same notebook.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.identity import read_node, record_shard
from hivenote.server.storage.store import Store

ME = Author("cursor", "Cursor", "")
MAX_MACHINES = 4


def _is_prefix(short: bytes, long: bytes) -> bool:
    return long.startswith(short)


class Machines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="hivenote-faults-"))
        self.stores: list[Store] = []
        self.acked: dict[int, set[str]] = {}  # machine -> titles it was told are stored (and still holds)
        self.everything: set[str] = set()  # every acknowledged title of which some copy survives
        self.count = 0
        for _ in range(2):
            self._new_machine()

    def _new_machine(self, source: int | None = None, faithful: bool = False) -> None:
        index = len(self.stores)
        data = self.root / f"m{index}"
        if source is not None:
            self.stores[source].close()
            shutil.copytree(self.root / f"m{source}", data, ignore=shutil.ignore_patterns("*.lock"))
            if faithful:  # a cloned VM: even the inode claims hold, so only a fork can tell
                node = read_node(data)
                shard = data / "log" / f"{node}.jsonl"
                record_shard(data, node, shard, shard.stat().st_size if shard.exists() else 0)
            self.stores[source] = Store(self.root / f"m{source}").open()
        self.stores.append(Store(data).open())
        self.acked[index] = set(self.acked.get(source, set())) if source is not None else set()

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.root, ignore_errors=True)

    machines = st.integers(0, MAX_MACHINES - 1)

    @rule(m=machines)
    def write(self, m: int) -> None:
        if m >= len(self.stores):
            return
        self.count += 1
        title = f"note {self.count} on m{m}"
        Notebook(self.stores[m]).remember(kind="fact", title=title, body="b", by=ME)
        self.acked[m].add(title)
        self.everything.add(title)

    @rule(m=machines)
    def restart(self, m: int) -> None:
        if m < len(self.stores):
            self.stores[m].close()
            self.stores[m] = Store(self.root / f"m{m}").open()

    @rule(m=machines)
    def lose_own_shard(self, m: int) -> None:
        """Deleted while stopped; what it held lives on only where a sync already carried it."""
        if m >= len(self.stores):
            return
        store = self.stores[m]
        shard = store.shard_path
        store.close()
        assert shard is not None
        elsewhere = set().union(set(), *(self._titles(i) for i in range(len(self.stores)) if i != m))
        shard.unlink(missing_ok=True)
        self.stores[m] = Store(self.root / f"m{m}").open()
        self.acked[m] = self._titles(m)  # a copy of its old shard comes back with the next sync
        self.everything -= {t for t in self.acked[m] | set(self.everything) if t not in elsewhere | self.acked[m]}

    @precondition(lambda self: len(self.stores) < MAX_MACHINES)
    @rule(m=machines, faithful=st.booleans())
    def clone(self, m: int, faithful: bool) -> None:
        if m < len(self.stores):
            self._new_machine(m, faithful)

    @rule(m=machines)
    def compact(self, m: int) -> None:
        if m < len(self.stores):
            self.stores[m].compact()

    @rule(a=machines, b=machines)
    def sync(self, a: int, b: int) -> None:
        if a != b and a < len(self.stores) and b < len(self.stores):
            self._copy(a, b)

    def _copy(self, a: int, b: int) -> None:
        """What a sync tool does from a's log folder into b's: a file b lacks arrives, a longer copy of the same
        bytes replaces b's, a clash is kept as a conflict copy; b's own shard is never overwritten (b holds it
        open and only b writes it; a clash with it becomes a conflict copy as well)."""
        src, dst = self.stores[a].log_dir, self.stores[b].log_dir
        own = f"{self.stores[b].node}.jsonl"
        for path in sorted(src.glob("*.jsonl")):
            theirs = path.read_bytes()
            target = dst / path.name
            ours = target.read_bytes() if target.exists() else None
            if ours is None and path.name != own:
                self._place(target, theirs)
            elif ours is not None and ours != theirs and not _is_prefix(theirs, ours):
                if _is_prefix(ours, theirs) and path.name != own:
                    self._place(target, theirs)
                else:
                    stem = path.name.removesuffix(".jsonl")
                    tag = hashlib.sha256(theirs).hexdigest()[:8].upper()
                    self._place(dst / f"{stem}.sync-conflict-20261201-000000-{tag}.jsonl", theirs)
        self.stores[b].refresh()
        self.stores[b].watch()

    @staticmethod
    def _place(target: Path, data: bytes) -> None:
        tmp = target.with_name(f".{target.name}.syncing.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)

    def _titles(self, m: int) -> set[str]:
        with self.stores[m].reading() as state:
            return {n.title for n in state.iter_notes()}

    @invariant()
    def every_acknowledged_write_is_visible_where_it_was_made(self) -> None:
        for m in range(len(self.stores)):
            self.stores[m].refresh()
            missing = self.acked[m] - self._titles(m)
            assert not missing, f"m{m} lost {missing}"

    @invariant()
    def no_two_contents_share_a_position_without_a_recorded_fork(self) -> None:
        for store in self.stores:
            with store.reading() as state:
                for node, seq in state.forked:
                    assert node in state.forks and state.forks[node].first_seq <= seq

    def heal_and_check(self) -> None:
        for _ in range(2):
            for a in range(len(self.stores)):
                for b in range(len(self.stores)):
                    if a != b:
                        self._copy(a, b)
        everything = self.everything
        snapshots = []
        for m, store in enumerate(self.stores):
            store.refresh()
            assert everything <= self._titles(m), f"m{m} misses {everything - self._titles(m)}"
            with store.reading() as state:
                snapshots.append(state.snapshot())
        assert all(s == snapshots[0] for s in snapshots), "machines holding the same files disagree"

    @rule()
    def heal(self) -> None:
        self.heal_and_check()


Machines.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestMachines = Machines.TestCase
