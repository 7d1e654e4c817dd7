"""Scale curve of the core: append, search, cold start (parsing the log, and with the op cache) and that start's
peak RSS at 1k to 100k notes, plus the cold start of a 1,000,000-op log of mixed ops. Prints a table with the
growth factor per 10x, so growth faster than linear stands out. Not a test.

    python bench/bench_scale.py [--sizes 1000,3000,10000,30000,100000] [--ops 1000000] [--dir /disk/to/measure]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hivenote.server.core.model import Author, Op
from hivenote.server.core.search import refresh_note_index, search_notes
from hivenote.server.storage.store import Store

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from bench.bench_core import WORDS, bench_append, bench_cold, note_fields, pct, queries, write_log
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.bench_core import WORDS, bench_append, bench_cold, note_fields, pct, queries, write_log

NODES = ("seed-0001", "seed-0002", "seed-0003")  # three machines' shards
AUTHORS = (
    Author("cursor", "cursor-vscode 1.7"),
    Author("claude-code", "claude-code 2.0"),
    Author("codex", "codex 0.5"),
)


def write_mixed_log(data_dir: Path, ops: int, notes: int, seed: int = 2) -> dict[str, int]:
    """A log of `ops` ops over three shards: `notes` notes written, then updated (title or body), re-tagged,
    forgotten and a few restored, in stamp order. Written directly (fsync'd appends would take hours)."""
    rnd = random.Random(seed)
    log = data_dir / "log"
    log.mkdir(parents=True, exist_ok=True)
    handles = {node: open(log / f"{node}.jsonl", "wb") for node in NODES}  # noqa: SIM115 - closed below
    seqs = dict.fromkeys(NODES, 0)
    counts = {"created": 0, "updated": 0, "tagged": 0, "forgotten": 0, "restored": 0}
    wall = 1_760_000_000_000
    trashed: set[int] = set()
    try:
        for i in range(ops):
            node = NODES[i % 3]
            seqs[node] += 1
            wall += rnd.randint(1, 2000)
            if i < notes:
                kind, data = "note.set", {"id": f"01SEED{i:020d}", "fields": dict(note_fields(rnd))}
                counts["created"] += 1
            else:
                n = rnd.randrange(notes)
                note_id = f"01SEED{n:020d}"
                roll = rnd.random()
                if roll < 0.60:
                    fresh = note_fields(rnd)
                    change = {"title": fresh["title"]} if rnd.random() < 0.5 else {"body": fresh["body"]}
                    kind, data = "note.set", {"id": note_id, "fields": change}
                    counts["updated"] += 1
                elif roll < 0.85:
                    tags = rnd.sample(WORDS[:200], k=rnd.randint(1, 4))
                    kind, data = "note.set", {"id": note_id, "fields": {"tags": tags}}
                    counts["tagged"] += 1
                elif roll < 0.95 or not trashed:
                    kind, data = "note.trash", {"id": note_id}
                    trashed.add(n)
                    counts["forgotten"] += 1
                else:
                    kind, data = "note.restore", {"id": f"01SEED{trashed.pop():020d}"}
                    counts["restored"] += 1
            op = Op(node, seqs[node], wall, 0, kind, data, AUTHORS[i % 3])
            handles[node].write(op.encode())
    finally:
        for fh in handles.values():
            fh.close()
    return counts


def bench_search_p(data_dir: Path, n_queries: int) -> tuple[float, float]:
    with Store(data_dir, readonly=True) as store:
        state = store.state
        refresh_note_index(state)
        times = []
        for q in queries(random.Random(5), n_queries):
            t = time.perf_counter()
            search_notes(state, q)
            times.append(time.perf_counter() - t)
    return pct(times, 0.5), pct(times, 0.99)


def growth(values: dict[int, float], n: int) -> str:
    """value(n) / value(n / 10), when both were measured."""
    lo = n // 10
    if lo in values and n in values and values[lo] > 0:
        return f"{values[n] / values[lo]:.1f}x"
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    parser.add_argument("--ops", type=int, default=1_000_000, help="ops in the mixed log (0: skip it)")
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--dir", help="where to put the data (the disk being measured)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="hivenote-scale-", dir=args.dir))
    print(f"Hivenote scale curve - Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, data on {root}")
    rows: dict[str, dict[int, float]] = {
        k: {}
        for k in (
            "append p50 ms",
            "append / bare fsync p50",
            "search p50 ms",
            "search p99 ms",
            "cold start s (log)",
            "peak RSS MB (log)",
            "cold start s (op cache)",
            "peak RSS MB (op cache)",
        )
    }
    for n in sizes:
        data = root / f"n{n}"
        write_log(data, n)
        cold_s, cold_rss, cached_s, cached_rss = bench_cold(data, runs=3)
        rows["cold start s (log)"][n] = cold_s
        rows["peak RSS MB (log)"][n] = cold_rss
        rows["cold start s (op cache)"][n] = cached_s
        rows["peak RSS MB (op cache)"][n] = cached_rss
        p50, p99 = bench_search_p(data, args.queries)
        rows["search p50 ms"][n] = p50 * 1e3
        rows["search p99 ms"][n] = p99 * 1e3
        ours, bare = bench_append(data, args.appends)
        rows["append p50 ms"][n] = pct(ours, 0.5) * 1e3
        rows["append / bare fsync p50"][n] = pct(ours, 0.5) / pct(bare, 0.5)
    width = max(len(k) for k in rows)
    tens = [n for n in sizes if n // 10 in sizes]
    print(
        f"\n{'notes':<{width}}"
        + "".join(f"{n:>10,}" for n in sizes)
        + "".join(f"{f'{n // 10:,}->{n:,}':>16}" for n in tens)
    )
    for key, values in rows.items():
        cells = "".join(f"{values[n]:>10.2f}" for n in sizes)
        print(f"{key:<{width}}" + cells + "".join(f"{growth(values, n):>16}" for n in tens))
    if args.ops:
        notes = max(sizes)
        data = root / "mixed"
        t = time.perf_counter()
        counts = write_mixed_log(data, args.ops, notes)
        size = sum(f.stat().st_size for f in (data / "log").iterdir()) / 1e6
        built = time.perf_counter() - t
        cold_s, cold_rss, cached_s, cached_rss = bench_cold(data, runs=3)
        mix = ", ".join(f"{v:,} {k}" for k, v in counts.items())
        print(f"\n{args.ops:,}-op log over {len(NODES)} shards ({size:.0f} MB, built in {built:.0f} s): {mix}")
        print(f"{'':<{width}}{f'{args.ops:,} ops':>12}{'per op us':>11}{f'vs {notes:,} ops':>16}")
        base = {"cold start s (log)": cold_s, "cold start s (op cache)": cached_s}
        for key, value in base.items():
            ratio = value / rows[key][notes] if notes in rows[key] else float("nan")
            print(f"{key:<{width}}{value:>12.2f}{value / args.ops * 1e6:>11.2f}{ratio:>15.1f}x")
        for key, value in {"peak RSS MB (log)": cold_rss, "peak RSS MB (op cache)": cached_rss}.items():
            ratio = value / rows[key][notes] if notes in rows[key] else float("nan")
            print(f"{key:<{width}}{value:>12.0f}{'':>11}{ratio:>15.1f}x")


if __name__ == "__main__":
    main()
