"""The knowledge-graph tools beside the official `@modelcontextprotocol/server-memory` (npm, over stdio) on the same
seeded graph: Hivenote over `hivenote stdio --graph` and over HTTP at /mcp/graph. One op sequence, interleaved per
call so all three targets see the same conditions. Prints per-tool p50/p99 and the ratios official/Hivenote.

    python bench/bench_graph.py [--sizes 1000,10000,100000] [--calls 100] [--targets "official,hn stdio"]
        [--baseline <folder>]

`--baseline` adds a fourth target, "base stdio": another Hivenote (its own server and bridge, on its own copy of the
graph) imported from `<folder>` first on PYTHONPATH (a folder holding a `hivenote` package, e.g. links to an older
checkout's server/, desktop/ and assets/), measured interleaved with the others: a before/after in one run.

Hivenote's two targets share one server and the client process: measured together, each small read shows ~0.5-1 ms
more than when one is measured alone against the official server (--targets), and more on a busy machine.

Needs `npm ci --prefix tests/tools` (the official server is pinned there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from hivenote.server.tokens import Tokens
from hivenote.server.web.serve import bind

ROOT = Path(__file__).resolve().parent.parent
OFFICIAL = ROOT / "tests" / "tools" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
HIVENOTE = [sys.executable, "-m", "hivenote.server.cli"]
TARGETS = ("official", "hn stdio", "hn http", "base stdio")
WRITES = (
    "create_entities",
    "add_observations",
    "create_relations",
    "delete_observations",
    "delete_relations",
    "delete_entities",
)
READS = ("search_nodes", "open_nodes")  # the pooled read row leaves read_graph out: it is not measured at every size
READ_GRAPH_MAX = 10_000  # read_graph returns the whole graph: measured only up to this size,
READ_GRAPH_EVERY = 10  # and only every tenth round (it costs seconds at 10k)
NEEDLE = "quartzfox"  # q, x and z never occur in the seed vocabulary, so only the entities seeded with it match
TYPES = ["person", "project", "service", "library", "decision", "team", "tool", "place"]
RELATION_TYPES = ["uses", "owns", "depends_on", "knows", "works_on"]
CLIENT = Implementation(name="bench", version="1")


def entity_name(i: int) -> str:
    return f"entity-{i:06d}"


def write_seed(path: Path, n: int, seed: int = 3) -> None:
    """n entities (a type, 2-4 observations; a handful carry NEEDLE) and 2n relations, in the official format."""
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghijklmnoprstuvwy") for _ in range(rnd.randint(3, 10))) for _ in range(5000)]
    needles = set(rnd.sample(range(n), k=5))
    lines = []
    for i in range(n):
        observations = [" ".join(rnd.choices(vocab, k=rnd.randint(3, 8))) for _ in range(rnd.randint(2, 4))]
        if i in needles:
            observations.append(f"mentions {NEEDLE}")
        entity = {"type": "entity", "name": entity_name(i), "entityType": rnd.choice(TYPES)}
        lines.append(json.dumps({**entity, "observations": observations}))
    for _ in range(2 * n):
        a, b = rnd.sample(range(n), k=2)
        relation = {"from": entity_name(a), "to": entity_name(b), "relationType": rnd.choice(RELATION_TYPES)}
        lines.append(json.dumps({"type": "relation", **relation}))
    path.write_text("\n".join(lines), encoding="utf-8")


def sequence(round_: int, n: int, rnd: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """One round of the op sequence: a new entity is made, touched and deleted again, so the graph stays at n."""
    tag = str(round_)
    new = f"bench-{tag}"
    old = entity_name(rnd.randrange(n))
    observation = f"bench observation {tag}"
    relation = {"from": new, "to": old, "relationType": "benchmarks"}
    ops: list[tuple[str, dict[str, Any]]] = [
        ("create_entities", {"entities": [{"name": new, "entityType": "bench", "observations": ["fresh"]}]}),
        ("add_observations", {"observations": [{"entityName": old, "contents": [observation]}]}),
        ("create_relations", {"relations": [relation]}),
        ("search_nodes", {"query": NEEDLE}),
        ("open_nodes", {"names": [entity_name(rnd.randrange(n)), entity_name(rnd.randrange(n))]}),
    ]
    if n <= READ_GRAPH_MAX and round_ % READ_GRAPH_EVERY == 0:
        ops.append(("read_graph", {}))
    ops += [
        ("delete_observations", {"deletions": [{"entityName": old, "observations": [observation]}]}),
        ("delete_relations", {"relations": [relation]}),
        ("delete_entities", {"entityNames": [new]}),
    ]
    return ops


def baseline_env(folder: str | None) -> dict[str, str]:
    """The environment of a Hivenote imported from `folder` first (`--baseline`); this one's without it."""
    if folder is None:
        return {**os.environ}
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p)}


@contextmanager
def hivenote_server(data_dir: Path, seed: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    """A fresh data dir with the seed imported and `hivenote serve` running on it; yields the port."""
    subprocess.run(
        [*HIVENOTE, "--data-dir", str(data_dir), "import", str(seed)], check=True, capture_output=True, env=env
    )
    with bind("127.0.0.1", 0) as probe:
        port: int = probe.getsockname()[1]
    log = (data_dir.parent / f"serve-{data_dir.name}.log").open("w", encoding="utf-8")
    server = subprocess.Popen(
        [*HIVENOTE, "--data-dir", str(data_dir), "serve", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"hivenote serve exited with {server.returncode}; see {log.name}")
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"hivenote serve did not answer within 120 s; see {log.name}")
            time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


class Base(NamedTuple):
    """The `--baseline` Hivenote: its data dir, port and environment."""

    data_dir: Path
    port: int
    env: dict[str, str]


@asynccontextmanager
async def clients(
    work: Path, data_dir: Path, port: int, targets: tuple[str, ...] = TARGETS, base: Base | None = None
) -> AsyncIterator[dict[str, Client]]:
    """A session per target, in TARGETS order; stderr of the stdio servers goes to files beside the data."""
    async with AsyncExitStack() as stack:
        official_err = stack.enter_context((work / "official.err").open("w", encoding="utf-8"))
        bridge_err = stack.enter_context((work / "bridge.err").open("w", encoding="utf-8"))
        official = StdioServerParameters(
            command="node", args=[str(OFFICIAL)], env={**os.environ, "MEMORY_FILE_PATH": str(work / "official.jsonl")}
        )
        bridge = StdioServerParameters(
            command=HIVENOTE[0],
            args=[*HIVENOTE[1:], "--data-dir", str(data_dir), "stdio", "--graph", "--port", str(port)],
            env={**os.environ},
        )
        token = Tokens(data_dir / "tokens.json").default()
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
        )
        transports = {
            "official": lambda: stdio_client(official, errlog=official_err),
            "hn stdio": lambda: stdio_client(bridge, errlog=bridge_err),
            "hn http": lambda: streamable_http_client(f"http://127.0.0.1:{port}/mcp/graph", http_client=http),
        }
        if base is not None:
            base_bridge = StdioServerParameters(
                command=HIVENOTE[0],
                args=[*HIVENOTE[1:], "--data-dir", str(base.data_dir), "stdio", "--graph", "--port", str(base.port)],
                env=base.env,
            )
            transports["base stdio"] = lambda: stdio_client(base_bridge, errlog=bridge_err)
        sessions = {}
        for target in (t for t in TARGETS if t in targets and t in transports):
            client = Client(transports[target](), client_info=CLIENT, mode="legacy", read_timeout_seconds=300)
            sessions[target] = await stack.enter_async_context(client)
        yield sessions


class Measured(NamedTuple):
    times: dict[str, dict[str, list[float]]]  # target -> tool -> seconds per call
    failed: dict[tuple[str, str], str]  # (target, tool) -> the JSON-RPC error it got; not called again


async def measure(
    work: Path, data_dir: Path, port: int, n: int, calls: int, targets: tuple[str, ...], base: Base | None = None
) -> Measured:
    """Each op goes to every target in turn before the next op, so all see the same conditions."""
    rnd = random.Random(11)
    out = Measured({target: {} for target in TARGETS}, {})
    async with clients(work, data_dir, port, targets, base) as sessions:
        for round_ in range(-5, calls):  # the first five rounds warm every target up and are not kept
            for name, args in sequence(round_, n, rnd):
                for target, client in sessions.items():
                    if (target, name) in out.failed:
                        continue
                    start = time.perf_counter()
                    try:
                        result = await client.call_tool(name, args)
                    except MCPError as exc:
                        out.failed[target, name] = str(exc)
                        continue
                    elapsed = time.perf_counter() - start
                    assert not result.is_error, (target, name, result)
                    if round_ >= 0:
                        out.times[target].setdefault(name, []).append(elapsed)
    return out


def run_size(n: int, calls: int, targets: tuple[str, ...] = TARGETS, baseline: str | None = None) -> Measured:
    work = Path(tempfile.mkdtemp(prefix=f"hivenote-bench-graph-{n}-"))
    try:
        seed = work / "memory.jsonl"
        write_seed(seed, n)
        shutil.copyfile(seed, work / "official.jsonl")  # the official server rewrites its file; keep the seed
        data_dir = work / "data"
        with contextlib.ExitStack() as servers:
            port = servers.enter_context(hivenote_server(data_dir, seed))
            base = None
            if baseline is not None:
                env = baseline_env(baseline)
                base_dir = work / "base"
                base = Base(base_dir, servers.enter_context(hivenote_server(base_dir, seed, env)), env)
            return anyio.run(measure, work, data_dir, port, n, calls, targets, base)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pooled(times: dict[str, list[float]], tools: tuple[str, ...]) -> list[float]:
    return [t for tool in tools for t in times.get(tool, [])]


def table(results: dict[int, Measured], calls: dict[int, int], targets: tuple[str, ...] = TARGETS) -> str:
    shown = tuple(t for t in TARGETS if t in targets)
    compared = tuple(t for t in shown if t != "official")
    head = f"{'size':>8} {'tool':<20}" + "".join(f"{t + ' p50':>15}{'p99':>8}" for t in shown)
    head += "".join(f"{'off/' + t.removeprefix('hn ').removesuffix(' stdio'):>11}" for t in compared)
    lines = ["MCP knowledge-graph tools, per call (ms); ratios are official p50 / Hivenote p50", head]
    notes: list[str] = []
    for n, measured in results.items():
        times = measured.times
        rows = [(tool, {t: times[t].get(tool, []) for t in shown}) for tool in (*WRITES, *READS, "read_graph")]
        rows.append(("= all writes", {t: pooled(times[t], WRITES) for t in shown}))
        rows.append(("= search+open", {t: pooled(times[t], READS) for t in shown}))
        for tool, per_target in rows:
            if not any(per_target.values()) and not any(k[1] == tool for k in measured.failed):
                lines.append(f"{n:>8,} {tool:<20}  skipped above {READ_GRAPH_MAX:,} entities (returns the whole graph)")
                continue
            cells = "".join(
                f"{pct(v, 0.5) * 1e3:>15.2f}{pct(v, 0.99) * 1e3:>8.2f}" if v else f"{'failed*':>15}{'':>8}"
                for v in per_target.values()
            )
            official = per_target["official"]
            ratios = "".join(
                f"{pct(official, 0.5) / pct(per_target[t], 0.5):>10.1f}x"
                if official and per_target[t]
                else f"{'-':>11}"
                for t in compared
            )
            lines.append(f"{n:>8,} {tool:<20}{cells}{ratios}")
        lines.append(
            f"{'':>8} ({calls[n]} calls per tool and target; read_graph every {READ_GRAPH_EVERY}th round: "
            f"{len(times['official'].get('read_graph', []))} calls)"
        )
        notes += [f"* {n:,} entities, {target} {tool}: {error}" for (target, tool), error in measured.failed.items()]
    return "\n".join(lines + notes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000", help="entity counts, comma-separated")
    parser.add_argument("--calls", type=int, default=100, help="measured calls per tool and target")
    parser.add_argument("--calls-above", nargs=2, type=int, metavar=("SIZE", "CALLS"), help="fewer calls above SIZE")
    parser.add_argument(
        "--targets", default=",".join(TARGETS[:3]), help=f"which of {', '.join(TARGETS)} to measure (official always)"
    )
    parser.add_argument("--baseline", help="a folder to import another Hivenote from, measured as 'base stdio'")
    args = parser.parse_args()
    targets = ("official", *(t.strip() for t in args.targets.split(",") if t.strip() != "official"))
    if args.baseline is not None and "base stdio" not in targets:
        targets = (*targets, "base stdio")
    if unknown := set(targets) - set(TARGETS):
        sys.exit(f"unknown targets {', '.join(sorted(unknown))}: choose from {', '.join(TARGETS)}")
    if not OFFICIAL.exists():
        sys.exit(f"{OFFICIAL} is missing: run `npm ci --prefix tests/tools` first")
    results: dict[int, Measured] = {}
    calls: dict[int, int] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        calls[n] = args.calls_above[1] if args.calls_above and n > args.calls_above[0] else args.calls
        started = time.monotonic()
        results[n] = run_size(n, calls[n], targets, args.baseline)
        print(f"{n:,} entities done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    print(table(results, calls, targets))


if __name__ == "__main__":
    main()
