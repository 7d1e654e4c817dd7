"""Load: many concurrent MCP clients (the real SDK client over streamable HTTP, each with its own session and
clientInfo name) against a real `hivenote serve` process, doing a mixed notebook workload; afterwards the server is
stopped and the log folded again to check every acknowledged write is there. Not a test: prints figures
(tests/reliability/test_load.py runs the same driver, smaller, and asserts).

    python bench/bench_load.py [--clients 50] [--seconds 60] [--processes 5] [--notes 10000]

The clients run as a few processes with many async clients each, so the client side is not one interpreter's
bottleneck; the client and server CPU are printed so a reader can see which side was saturated.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens

if TYPE_CHECKING:  # run as a script (or imported by the tests), the project root is put on sys.path
    from bench.bench_core import WORDS, note_fields, write_log
    from bench.proc import cpu_s, rss_mb, settle
    from tests.support.live import mcp_session
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_core import WORDS, note_fields, write_log
    from bench.proc import cpu_s, rss_mb, settle
    from tests.support.live import mcp_session

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


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`hivenote serve` as its own process on 127.0.0.1; returns it once /api/health answers, and its URL."""
    port = _free_port()
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2):
                return process, url
        except (urllib.error.URLError, OSError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"the server did not start:\n{log.read_text(encoding='utf-8')}") from None
            time.sleep(0.05)


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
            argv = [sys.executable, __file__, "--client", url, token, repr(end), str(notes), *names]
            children.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
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


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def print_report(report: Report, clients: int, notes: int) -> None:
    tally = report.tally
    wall = tally.wall_s
    print(f"{clients} MCP clients in {report.client_processes} processes, {wall:.1f} s, {notes:,} seeded notes")
    print(f"{'tool':<16}{'calls':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for name in TOOLS:
        v = [x * 1e3 for x in tally.times[name]]
        print(f"{name:<16}{len(v):>8}{pct(v, 0.5):>9.1f}{pct(v, 0.95):>9.1f}{pct(v, 0.99):>9.1f}{max(v or [0]):>9.1f}")
    every = [x * 1e3 for v in tally.times.values() for x in v]
    print(f"{'all':<16}{len(every):>8}{pct(every, 0.5):>9.1f}{pct(every, 0.95):>9.1f}{pct(every, 0.99):>9.1f}", end="")
    print(f"{max(every or [0]):>9.1f}")
    print(f"total calls {report.calls}, throughput {report.calls / wall:.0f} calls/s")
    print(f"errors {sum(tally.errors.values())}")
    for text, count in tally.errors.most_common():
        print(f"  {count} x {text[:300]}")
    writes = len(tally.titles)
    print(f"acknowledged notes {writes} ({len(tally.forgotten)} forgotten), lost writes {len(report.lost)}")
    for line in report.lost[:20]:
        print(f"  {line}")
    print(f"notes in the log afterwards {report.notes_after:,}; server RSS at the end {report.server_rss_mb:.0f} MB")
    cores = os.cpu_count() or 1
    busy = report.elapsed_s
    print(
        f"CPU over the run ({busy:.1f} s with the clients' start-up): server {report.server_cpu_s / busy:.2f} cores, "
        f"clients {tally.cpu_s / busy:.2f} cores (of {cores})"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":  # one client process: run its clients, print the tally
        url, token, end, seeded, *names = sys.argv[2:]
        tally = anyio.run(run_clients, url, token, names, float(end), int(seeded))
        json.dump(tally.__dict__, sys.stdout)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hivenote-load-") as tmp:
        report = run_load(
            Path(tmp) / "data", clients=args.clients, seconds=args.seconds, processes=args.processes, notes=args.notes
        )
    print_report(report, args.clients, args.notes)
    if report.tally.errors or report.lost:
        sys.exit(1)


if __name__ == "__main__":
    main()
