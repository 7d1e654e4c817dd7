"""`hivenote serve`'s memory at a given notebook (RSS and PSS once start-up work is done) and the latency of searches
made while it warms its search index (the first seconds after start, when an autostarted tray meets agents opening
their first chats), and once more after the list, the status counts and a question in an agent's own words (what a
dashboard and an agent's first chat add: "listed MB", and the list's time), and after a project's list and every note
paged through 200 at a time (a dashboard scrolled to the end, an export by pages: "paged MB", and the time of the
two). Variants run interleaved, so a before/after comparison sees the same machine load.

    python bench/footprint_serve.py --notes 10000,100000 [--ops 1000000] [--runs 3]
        [--variant before=<PYTHONPATH>] [--variant after=<PYTHONPATH>] [--cold] [--elsewhere N]

Each notebook is built once; each variant gets its own copy, started once untimed and left to finish its start-up
work (so the measured starts use the op cache and the search index it leaves, as every start but the first does;
`--cold` measures that first start instead; `--elsewhere N` has another machine write N notes, half of them edits of
notes the notebook holds, before each measured start, as a synced notebook finds after a night). A variant is a
PYTHONPATH under which `hivenote.server` imports (for instance a folder holding `hivenote/server` as a link to a
worktree of an older commit); without `--variant` the installed Hivenote is measured. Settings come from the
environment as usual (`HIVENOTE_MEANING=false` measures the notebook without meaning search).

    python bench/footprint_serve.py --graph 1000000 [--runs 3] [--variant ...]

`--graph OPS` measures a knowledge graph instead: an official memory.jsonl of OPS ops' shape (a tenth entities, 22%
relations, the rest observations, as agents using the official graph tools write them; seeded) imported through
`hivenote import`, then per variant an empty server's start, a first start (the log only, no op cache) and a restart
(with the op cache the first start left), each to its first answered graph search (`/api/graph/search`), and the
settled RSS of both starts. The notes' rows are skipped (`--notes ""`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from hivenote.server.core.model import Author, Op

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from bench.bench_core import note_fields, write_log
    from bench.bench_scale import write_mixed_log
    from bench.proc import rss_mb, settle
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_core import note_fields, write_log
    from bench.bench_scale import write_mixed_log
    from bench.proc import rss_mb, settle

WARM_WORDS = ("deploy", "postgres", "kubernetes", "auth", "redis", "token", "prisma", "drizzle")
WARM_WINDOW_S = 10.0
QUESTION = "how do we deploy the thing to kubernetes with the new auth token"


def pss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8").splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no Pss")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, token: str | None = None, timeout: float = 60) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except OSError:
        return 0, b""


def token_of(data: Path) -> str:
    token = json.loads((data / "tokens.json").read_text(encoding="utf-8"))["default"]
    assert isinstance(token, str)
    return token


class Run:
    def __init__(self, data: Path, pythonpath: str | None) -> None:
        env = dict(os.environ)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.port = free_port()
        self.argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "serve", "--port"]
        self.argv.append(str(self.port))
        self.started = time.monotonic()
        self.process = subprocess.Popen(self.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        self.data = data

    def wait_up(self) -> float:
        deadline = self.started + 600
        while get(f"{self.base}/api/health", timeout=5)[0] != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return time.monotonic() - self.started

    def search(self, word: str) -> float:
        """Seconds until the answer (a search that times out counts as the time it was given)."""
        t = time.perf_counter()
        status, _ = get(f"{self.base}/api/notes?q={urllib.parse.quote(word)}", token_of(self.data), timeout=120)
        if status != 200 and self.process.poll() is not None:
            raise RuntimeError(f"the server ended (exit {self.process.returncode})")
        return time.perf_counter() - t

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


GRAPH_WORDS = 3000  # the observations' vocabulary (seeded): an agent's facts about people, services, decisions
GRAPH_TYPES = ("person", "project", "service", "library", "decision", "team", "tool", "place", "bug", "meeting")
GRAPH_RELATIONS = ("uses", "owns", "depends_on", "knows", "works_on", "decided", "blocks", "mentions")
GRAPH_NEEDLE = "quartzfox"  # q, x and z are not in the vocabulary: the search matches the few entities seeded with it


def write_memory_jsonl(path: Path, ops: int, seed: int = 34) -> dict[str, int]:
    """An official memory.jsonl of `ops` ops' shape: ops/10 entities, 22% relations, the rest observations (2-12 per
    entity, a sentence of 4-14 words each)."""
    rnd = random.Random(seed)
    vocab = [
        "".join(rnd.choice("abcdefghijklmnoprstuvwy") for _ in range(rnd.randint(3, 10))) for _ in range(GRAPH_WORDS)
    ]
    entities = max(ops // 10, 2)
    relations = ops * 22 // 100
    observations = ops - entities - relations
    per = [1] * entities  # at least one each, the rest spread unevenly
    for _ in range(observations - entities):
        per[rnd.randrange(entities)] += 1
    needles = set(rnd.sample(range(entities), k=min(5, entities)))
    with path.open("w", encoding="utf-8") as out:
        for i in range(entities):
            texts = [" ".join(rnd.choices(vocab, k=rnd.randint(4, 14))) for _ in range(per[i])]
            if i in needles:
                texts[-1] += f" {GRAPH_NEEDLE}"
            entity = {"type": "entity", "name": f"entity-{i:06d}", "entityType": rnd.choice(GRAPH_TYPES)}
            out.write(json.dumps({**entity, "observations": texts}) + "\n")
        for _ in range(relations):
            a, b = rnd.sample(range(entities), k=2)
            relation = {"from": f"entity-{a:06d}", "to": f"entity-{b:06d}", "relationType": rnd.choice(GRAPH_RELATIONS)}
            out.write(json.dumps({"type": "relation", **relation}) + "\n")
    return {"entities": entities, "observations": observations, "relations": relations}


def import_graph(data: Path, ops: int) -> dict[str, int]:
    """A notebook holding the graph, written through `hivenote import` as a user would."""
    source = data.parent / f"memory-{ops}.jsonl"
    shape = write_memory_jsonl(source, ops)
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "import", "--format", "memory-jsonl"]
    subprocess.run([*argv, str(source)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    source.unlink()
    return shape


def first_graph_search(data: Path, pythonpath: str | None) -> dict[str, float]:
    """Seconds from `hivenote serve`'s start to its first answered graph search, and its RSS once settled."""
    run = Run(data, pythonpath)
    try:
        run.wait_up()
        token, query = token_of(data), urllib.parse.quote(GRAPH_NEEDLE)
        while True:
            status, body = get(f"{run.base}/api/graph/search?q={query}", token, timeout=300)
            if status == 200:
                break
            if run.process.poll() is not None or time.monotonic() - run.started > 600:
                raise RuntimeError(f"no graph search answered (status {status})")
        searched = time.monotonic() - run.started
        found = json.loads(body)["total"]
        settle(run.process.pid, limit=600)
        return {"search s": searched, "RSS": rss_mb(run.process.pid), "found": found}
    finally:
        run.stop()


def measure_graph(root: Path, ops: int, variants: dict[str, str], runs: int) -> None:
    book = root / f"graph{ops}"
    book.mkdir()
    shape = import_graph(book / "data", ops)
    print(f"graph of {ops:,} ops: {shape}", flush=True)
    rows: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for run in range(runs):
        for name, path in variants.items():
            empty = root / f"empty.{name}.{run}"
            copy = root / f"graph.{name}.{run}"
            shutil.copytree(book / "data", copy)
            shutil.rmtree(copy / "cache", ignore_errors=True)
            got = rows[name]
            got.setdefault("empty s", []).append(first_graph_search(empty, path)["search s"])
            first = first_graph_search(copy, path)
            got.setdefault("first s", []).append(first["search s"])
            got.setdefault("first RSS", []).append(first["RSS"])
            again = first_graph_search(copy, path)
            got.setdefault("restart s", []).append(again["search s"])
            got.setdefault("restart RSS", []).append(again["RSS"])
            assert first["found"] == again["found"] == min(5, shape["entities"]), (first, again)
            shutil.rmtree(copy)
            shutil.rmtree(empty)
    print(f"{'variant':<12}{'empty s':>9}{'first s':>9}{'restart s':>11}{'first RSS':>11}{'restart RSS':>13}")
    for name, got in rows.items():
        med = {k: statistics.median(v) for k, v in got.items()}
        print(
            f"{name:<12}{med['empty s']:>9.2f}{med['first s']:>9.2f}{med['restart s']:>11.2f}"
            f"{med['first RSS']:>11.0f}{med['restart RSS']:>13.0f}",
            flush=True,
        )


def write_elsewhere(data: Path, n: int, run: int) -> None:
    """Another machine's shard of `n` notes (every other one an edit of a note the notebook holds), as the synced folder
    brings it while this one is off. A new machine each run, so every start meets ops its last run did not fold."""
    rnd = random.Random(run)
    node = f"else-{run:04d}"
    held = sorted(p.name for p in (data / "log").glob("seed-*.jsonl"))
    assert held, "a notebook of bench_core's kind"
    lines = []
    for i in range(1, n + 1):
        note_id = f"01SEED{rnd.randrange(1, 10_000):020d}" if i % 2 else f"01ELSE{run:04d}{i:016d}"
        data_ = {"id": note_id, "fields": dict(note_fields(rnd))}
        lines.append(Op(node, i, 1_900_000_000_000 + i, 0, "note.set", data_, Author(agent="codex")).encode())
    (data / "log" / f"{node}.jsonl").write_bytes(b"".join(lines))


def measure(data: Path, pythonpath: str | None) -> dict[str, float]:
    run = Run(data, pythonpath)
    try:
        up = run.wait_up()
        warm: list[float] = []
        i = 0
        while time.monotonic() - run.started < up + WARM_WINDOW_S:
            warm.append(run.search(WARM_WORDS[i % len(WARM_WORDS)]))
            i += 1
            time.sleep(0.2)
        for word in WARM_WORDS:
            run.search(word)
        settle(run.process.pid, limit=600)
        rss, pss = rss_mb(run.process.pid), pss_mb(run.process.pid)
        # Then what a dashboard and an agent's first chat add: the list, the status counts, a question in words.
        token = token_of(run.data)
        t = time.perf_counter()
        listed = get(f"{run.base}/api/notes", token, timeout=120)[0]
        list_s = time.perf_counter() - t
        status = get(f"{run.base}/api/status", token, timeout=120)[0]
        asked = get(f"{run.base}/api/notes?q={urllib.parse.quote(QUESTION)}", token, timeout=120)[0]
        day = [listed, status, asked]
        if day != [200, 200, 200]:
            raise RuntimeError(f"the list, status or question failed: {day}")
        settle(run.process.pid, limit=600)
        listed_rss = rss_mb(run.process.pid)
        # Then a dashboard's day with a big notebook: a project's list, and every note paged through (scrolled to
        # the end, or an export by pages).
        t = time.perf_counter()
        filtered = get(f"{run.base}/api/notes?project=web&limit=50", token, timeout=120)[0]
        paged, offset = 0, 0
        while True:
            code, body = get(f"{run.base}/api/notes?limit=200&offset={offset}", token, timeout=120)
            if filtered != 200 or code != 200:
                raise RuntimeError(f"a project's list or a page failed: {filtered}, {code}")
            page = len(json.loads(body)["results"])
            if not page:
                break
            paged, offset = paged + page, offset + page
        pages_s = time.perf_counter() - t
        settle(run.process.pid, limit=600)
        return {
            "up s": up,
            "warm max ms": max(warm) * 1e3,
            "warm p50 ms": statistics.median(warm) * 1e3,
            "RSS": rss,
            "PSS": pss,
            "RSS listed": listed_rss,
            "list ms": list_s * 1e3,
            "RSS paged": rss_mb(run.process.pid),
            "paged s": pages_s,
        }
    finally:
        run.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", default="10000,100000")
    parser.add_argument("--ops", type=int, default=0, help="also a mixed log of this many ops (100k notes)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variant", action="append", default=[], help="name=PYTHONPATH (repeatable)")
    parser.add_argument("--cold", action="store_true", help="measure the first start (no op cache)")
    parser.add_argument("--elsewhere", type=int, default=0, help="another machine's notes before each start")
    parser.add_argument("--dir", help="where to build the notebooks")
    parser.add_argument("--graph", type=int, default=0, help="measure a knowledge graph of this many ops instead")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) or {"installed": ""}
    root = Path(tempfile.mkdtemp(prefix="hivenote-footprint-", dir=args.dir))
    if args.graph:
        try:
            measure_graph(root, args.graph, variants, args.runs)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    books: dict[str, Path] = {}
    for n in (int(s) for s in args.notes.split(",") if s):
        write_log(books.setdefault(f"{n:,} notes", root / f"n{n}"), n)
    if args.ops:
        write_mixed_log(books.setdefault(f"{args.ops:,} ops", root / f"ops{args.ops}"), args.ops, 100_000)
    try:
        print(
            f"{'notebook':<16}{'variant':<12}{'RSS MB':>8}{'PSS MB':>8}{'up s':>7}{'warm p50':>10}{'warm max':>10}"
            f"{'listed MB':>11}{'list ms':>9}{'paged MB':>10}{'paged s':>9}"
        )
        for label, book in books.items():
            copies = {}
            for name in variants:
                copies[name] = root / f"{book.name}.{name}"
                shutil.copytree(book, copies[name])
            results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            for run in range(args.runs):
                for name, path in variants.items():
                    if args.cold:
                        shutil.rmtree(copies[name] / "cache", ignore_errors=True)
                    elif not (copies[name] / "cache").exists():
                        # Leaves the op cache and the search index, as every start but the first finds them: it runs
                        # until its start-up work is done (the search index warm), as a tray does.
                        first = Run(copies[name], path)
                        first.wait_up()
                        settle(first.process.pid, limit=600)
                        first.stop()
                    if args.elsewhere:
                        write_elsewhere(copies[name], args.elsewhere, run)
                    results[name].append(measure(copies[name], path))
            for name, rows in results.items():
                med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                print(
                    f"{label:<16}{name:<12}{med['RSS']:>8.0f}{med['PSS']:>8.0f}{med['up s']:>7.2f}"
                    f"{med['warm p50 ms']:>10.1f}{med['warm max ms']:>10.1f}{med['RSS listed']:>11.0f}"
                    f"{med['list ms']:>9.0f}{med['RSS paged']:>10.0f}{med['paged s']:>9.1f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
