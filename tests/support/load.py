"""A load driver: many concurrent MCP clients (the real SDK client over streamable HTTP, each with its own session and
clientInfo name) against a real `hivenote serve` process doing a mixed notebook workload; afterwards the server is
stopped and the log folded again to check every acknowledged write is there. tests/reliability/test_load.py runs it
small and asserts; bench/bench_load.py runs it for a minute and prints the figures.

The clients run as a few processes (`python -m tests.support.load URL TOKEN END SEEDED NAME...`) with many async
clients each, so the client side is not one interpreter's bottleneck.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from tests.support.live import free_port, mcp_session
from tests.support.notes import WORDS, note_fields, write_log
from tests.support.proc import cpu_s, rss_mb, settle
from tests.support.system import SERVE, needs
from tests.support.wait import wait_started

ROOT = Path(__file__).resolve().parents[2]  # the client processes import this module from the project root

# The mixed workload, in percent of calls.
MIX = (
    ("brain_remember", 30),
    ("brain_search", 40),
    ("brain_get", 15),
    ("brain_list", 10),
    ("brain_update", 3),
    ("brain_forget", 2),
)
TOOLS = [name for name, _ in MIX]
# Every client's first calls, however slow the machine: each tool is called and each client writes before the
# clock may end its run.
OPENING: tuple[str, ...] = ("brain_remember", "brain_search", "brain_remember", "brain_get", "brain_remember")
OPENING += ("brain_list", "brain_update", "brain_forget")  # update and forget once three notes are its own
WEIGHTS = [weight for _, weight in MIX]
START_S = 120  # a server over a big notebook takes a while to fold it


@dataclass
class Tally:
    """What the clients of one process did and saw. Each client updates and forgets only notes it wrote itself,
    one call at a time, so the last acknowledged title of each note is exact."""

    times: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in TOOLS})
    errors: Counter[str] = field(default_factory=Counter)
    titles: dict[str, str] = field(default_factory=dict)  # every acknowledged note -> its last acknowledged title
    forgotten: list[str] = field(default_factory=list)
    cpu_s: float = 0.0
    first: float = float("inf")  # time.monotonic() (one clock for every process) of the first session ready
    last: float = 0.0  # and of the last answer

    def merge(self, other: Tally) -> None:
        for name, values in other.times.items():
            self.times[name].extend(values)
        self.errors.update(other.errors)
        self.titles.update(other.titles)
        self.forgotten.extend(other.forgotten)
        self.cpu_s += other.cpu_s
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)

    @property
    def wall_s(self) -> float:
        return self.last - self.first


def _call(rnd: random.Random, own: list[str], seeded: int, tool: str = "") -> tuple[str, dict[str, Any]]:
    tool = tool or rnd.choices(TOOLS, WEIGHTS)[0]
    if tool in ("brain_update", "brain_forget") and len(own) < 3:
        tool = "brain_remember"
    if tool == "brain_remember":
        return tool, dict(note_fields(rnd))
    if tool == "brain_search":
        return tool, {"query": " ".join(rnd.choices(WORDS, k=rnd.choice((1, 1, 2))))}
    if tool == "brain_list":
        return tool, rnd.choice(({}, {"project": "shop-api"}, {"kind": "decision", "limit": 10}))
    if tool == "brain_get":
        if own and (not seeded or rnd.random() < 0.5):
            return tool, {"id": rnd.choice(own)}
        if seeded:
            return tool, {"id": f"01SEED{rnd.randint(1, seeded):020d}"}
        return "brain_list", {}
    if tool == "brain_update":
        return tool, {"id": rnd.choice(own), "title": note_fields(rnd)["title"]}
    return tool, {"id": own.pop(rnd.randrange(len(own)))}


async def one_client(url: str, token: str, name: str, seed: int, end: float, seeded: int, tally: Tally) -> None:
    rnd = random.Random(seed)
    own: list[str] = []  # this client's notes, not forgotten
    try:
        async with mcp_session(f"{url}/mcp", token, name) as client:
            tally.first = min(tally.first, time.monotonic())
            opening = list(OPENING)
            while opening or time.monotonic() < end:
                tool, args = _call(rnd, own, seeded, opening.pop(0) if opening else "")
                t = time.perf_counter()
                try:
                    result = await client.call_tool(tool, args)
                except Exception as exc:  # recorded and counted: the run fails on any
                    tally.errors[f"{tool}: {type(exc).__name__}: {exc}"] += 1
                    continue
                elapsed = time.perf_counter() - t
                if result.is_error:
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    tally.errors[f"{tool}: {text}"] += 1
                    continue
                tally.times[tool].append(elapsed)
                data = result.structured_content or {}
                if tool == "brain_remember":
                    note = data["note"]
                    own.append(note["id"])
                    tally.titles[note["id"]] = note["title"]
                elif tool == "brain_update":
                    tally.titles[args["id"]] = data["title"]
                elif tool == "brain_forget":
                    tally.forgotten.append(args["id"])
    except Exception as exc:  # a session that could not start or broke: counted as an error
        tally.errors[f"session: {type(exc).__name__}: {exc}"] += 1


async def run_clients(url: str, token: str, names: list[str], end: float, seeded: int) -> Tally:
    """Many clients at once in this process's event loop, calling until `end` (time.monotonic())."""
    tally = Tally()
    cpu = time.process_time()
    async with anyio.create_task_group() as tasks:
        for name in names:
            tasks.start_soon(one_client, url, token, name, zlib.crc32(name.encode()), end, seeded, tally)
    tally.cpu_s, tally.last = time.process_time() - cpu, time.monotonic()
    return tally


def start_server(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`hivenote serve` as its own process on 127.0.0.1; returns it once /api/health answers, and its URL."""
    port = free_port()
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"{url}/api/health", timeout=2):
            return True

    try:
        wait_started(process, answers, START_S, log)
    except AssertionError:
        process.kill()
        raise
    return process, url


@dataclass
class Report:
    tally: Tally
    lost: list[str]  # acknowledged writes the log does not hold as acknowledged
    server_rss_mb: float
    server_cpu_s: float
    elapsed_s: float  # from starting the client processes to their end (CPU figures are over this)
    client_processes: int
    notes_after: int

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.tally.times.values()) + sum(self.tally.errors.values())


def check_writes(data_dir: Path, tally: Tally) -> tuple[list[str], int]:
    """Fold the log afresh: every acknowledged note with its last acknowledged title, every forgotten one
    in the trash. Returns what is not so (one line each) and the number of notes."""
    lost = []
    forgotten = set(tally.forgotten)
    with Store(data_dir, readonly=True) as store:
        state = store.state
        for note_id, title in tally.titles.items():
            note = state.note(note_id)
            if note is None:
                lost.append(f"{note_id}: missing")
            elif note.trashed != (note_id in forgotten):
                lost.append(f"{note_id}: trashed={note.trashed}, expected {note_id in forgotten}")
            elif note.title != title:
                lost.append(f"{note_id}: title {note.title!r}, last acknowledged {title!r}")
        return lost, len(state.notes)


@needs(SERVE)
def run_load(data_dir: Path, *, clients: int, seconds: float, processes: int, notes: int = 0) -> Report:
    """Start a server over `data_dir` (seeded with `notes` notes), run `clients` clients split over `processes`
    processes for `seconds`, stop the server and check every acknowledged write."""
    if notes:
        write_log(data_dir, notes)
    data_dir.mkdir(parents=True, exist_ok=True)
    process, url = start_server(data_dir, data_dir.parent / "server.log")
    try:
        settle(process.pid, window=1.0, busy=0.1, limit=120)
        token = Tokens(data_dir / "tokens.json").default()
        cpu, started = cpu_s(process.pid), time.monotonic()
        children = []
        end = time.monotonic() + seconds  # the clients' start-up (imports, sessions) is part of it
        for p in range(processes):
            names = [f"load-{p}-{i}" for i in range(p, clients, processes)]
            argv = [sys.executable, "-m", __name__, url, token, repr(end), str(notes), *names]
            children.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT))
        tally = Tally()
        for child in children:
            out, err = child.communicate(timeout=seconds + 120)
            if child.returncode != 0:
                raise RuntimeError(f"a client process failed:\n{err.decode(errors='replace')}")
            tally.merge(_tally_from_json(json.loads(out)))
        server_cpu, elapsed = cpu_s(process.pid) - cpu, time.monotonic() - started
        rss = rss_mb(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    lost, count = check_writes(data_dir, tally)
    return Report(tally, lost, rss, server_cpu, elapsed, processes, count)


def _tally_from_json(raw: dict[str, Any]) -> Tally:
    fields = ("times", "titles", "forgotten", "cpu_s", "first", "last")
    return Tally(errors=Counter(raw["errors"]), **{name: raw[name] for name in fields})


def client_process(argv: list[str]) -> None:
    """One client process: run its clients, print the tally as JSON."""
    url, token, end, seeded, *names = argv
    tally = anyio.run(run_clients, url, token, names, float(end), int(seeded))
    json.dump(tally.__dict__, sys.stdout)


if __name__ == "__main__":
    client_process(sys.argv[1:])
