"""Benchmarks of the notebook core, each beside its baseline in the same run. Prints a table; not a test.

    python bench/bench_core.py [--sizes 1000,10000,100000] [--dir /path/on/the/disk/to/measure] [--meaning]

- append: Notebook.remember (validate, duplicate hint, encode, append, fsync) vs a bare append+fsync loop of
  lines of the same size on the same disk;
- search: p50/p99 of typed queries vs a naive full scan with the same matching rule;
- cold start: a fresh process folding a log of N ops (time and peak RSS), parsing the log, then with the op
  cache a previous run left;
- concurrency: 8 threads remembering at once (acknowledged writes per second, fsyncs shared);
- with --meaning (needs hivenote[meaning]): the meaning index built as the server does in the background (time),
  then search p50/p99 with meaning on, for typed queries (exact matches) and for questions no note matches word
  for word (the near list: partial word matches fused with the meaning scores), each beside the meaning index's
  own share of it (`MeaningIndex.scores` alone, the floor) and the same questions with meaning off.
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
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hivenote.server.core.search import fold_text, refresh_note_index, search_notes
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store

if not __package__:  # run as a script (python bench/bench_core.py): the project root, for tests.support
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.notes import WORDS as WORDS
from tests.support.notes import note_fields as note_fields
from tests.support.notes import write_log as write_log


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_append(data_dir: Path, count: int) -> tuple[list[float], list[float]]:
    """Interleaved, so both see the same disk: one remember, then one bare append+fsync of a line as long."""
    rnd = random.Random(3)
    ours: list[float] = []
    bare: list[float] = []
    with Store(data_dir) as store, open(data_dir / "bare.jsonl", "ab") as raw:
        notebook = Notebook(store)
        refresh_note_index(store.state)  # the server warms the index at start; the duplicate hint uses it
        assert store.shard_path is not None
        for _ in range(count):
            fields = note_fields(rnd)
            size = store.shard_path.stat().st_size
            t = time.perf_counter()
            notebook.remember(**fields)
            ours.append(time.perf_counter() - t)
            line = b"x" * (store.shard_path.stat().st_size - size - 1) + b"\n"
            t = time.perf_counter()
            raw.write(line)
            raw.flush()
            os.fsync(raw.fileno())
            bare.append(time.perf_counter() - t)
    return ours, bare


def queries(rnd: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        word = rnd.choice(WORDS)
        shape = rnd.random()
        if shape < 0.4:
            out.append(word)
        elif shape < 0.7:
            out.append(f"{word} {rnd.choice(WORDS)}")
        else:  # someone typing: a prefix of a word
            out.append(word[: max(2, rnd.randint(2, len(word)))])
    return out


def questions(rnd: random.Random, n: int) -> list[str]:
    """Questions an agent asks in its own words: a few of the notebook's words among question words, which no note
    holds all of (so the search answers with the near list)."""
    return [f"how do we {' '.join(rnd.choices(WORDS, k=4))} here?" for _ in range(n)]


def timed(call: Callable[[str], object], qs: list[str]) -> list[float]:
    out = []
    for q in qs:
        t = time.perf_counter()
        call(q)
        out.append(time.perf_counter() - t)
    return out


def bench_meaning(data_dir: Path, n_queries: int) -> dict[str, float]:
    """Search with meaning on (ms, p50/p99), each beside its baseline, interleaved query by query so both see the
    same load; the index build's seconds first."""
    from hivenote.server.meaning.index import MeaningIndex  # hivenote[meaning]
    from hivenote.server.meaning.model import load_default

    shutil.rmtree(data_dir / "cache", ignore_errors=True)  # built from scratch, not from a previous run's file
    with Store(data_dir, readonly=True) as store:
        state = store.state
        refresh_note_index(state)
        model = load_default()
        index = MeaningIndex(None, lambda: model)
        t = time.perf_counter()
        while not index.refresh(store):
            pass
        build = time.perf_counter() - t
        typed = queries(random.Random(5), n_queries)
        asked = questions(random.Random(6), n_queries)
        for q in asked[:5]:  # warm the word caches
            search_notes(state, q, meaning=index)
        on_typed, on_asked, floor, off_asked = [], [], [], []
        near = 0
        for i, (word, question) in enumerate(zip(typed, asked, strict=True)):
            on_typed += timed(lambda q: search_notes(state, q, meaning=index), [word])
            t = time.perf_counter()
            result = search_notes(state, question, meaning=index)
            on_asked.append(time.perf_counter() - t)
            near += not result.total
            floor += timed(index.scores, [question])
            if i % 10 == 0:  # a tenth of them, as the naive scan: words only, a question can take seconds
                off_asked += timed(lambda q: search_notes(state, q), [question])
    ms = 1000.0
    return {
        "meaning index build s": build,
        "meaning: typed p50 ms": pct(on_typed, 0.5) * ms,
        "meaning: typed p99 ms": pct(on_typed, 0.99) * ms,
        "meaning: question p50 ms": pct(on_asked, 0.5) * ms,
        "meaning: question p99 ms": pct(on_asked, 0.99) * ms,
        "meaning: scores alone p50 ms": pct(floor, 0.5) * ms,
        "meaning: scores alone p99 ms": pct(floor, 0.99) * ms,
        "meaning: question/scores p50": pct(on_asked, 0.5) / pct(floor, 0.5),
        "question, meaning off p50 ms": pct(off_asked, 0.5) * ms,
        "questions answered near %": 100.0 * near / len(asked),
    }


def bench_search(data_dir: Path, n_queries: int) -> tuple[list[float], list[float]]:
    with Store(data_dir, readonly=True) as store:
        state = store.state
        refresh_note_index(state)  # what the server does right after it starts
        qs = queries(random.Random(5), n_queries)
        ours = []
        for q in qs:
            t = time.perf_counter()
            search_notes(state, q)
            ours.append(time.perf_counter() - t)
        notes = list(state.iter_notes())
        naive = []
        for q in qs[: max(5, n_queries // 10)]:
            terms = fold_text(q).split()
            t = time.perf_counter()
            hits = []
            for note in notes:
                text = fold_text(" ".join((note.title, note.body, " ".join(note.tags), note.project or "", note.kind)))
                if all(term in text for term in terms):
                    hits.append(note)
            hits.sort(key=lambda note: note.updated, reverse=True)
            naive.append(time.perf_counter() - t)
    return ours, naive


COLD = """
import resource, sys, time
t = time.perf_counter()
from hivenote.server.storage.store import Store
with Store(sys.argv[1], readonly=True) as store:
    elapsed = time.perf_counter() - t
    n = len(store.state.notes)
print(elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, n)
"""


def _cold_run(data_dir: Path) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", COLD, str(data_dir)], capture_output=True, encoding="utf-8", check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def bench_cold(data_dir: Path, runs: int = 5) -> tuple[float, float, float, float]:
    """(seconds, peak RSS MB) of a fresh process folding the log: first with no op cache, then with the
    cache the first run left (the median of `runs`)."""
    shutil.rmtree(data_dir / "cache", ignore_errors=True)
    log_s, log_rss = _cold_run(data_dir)
    cached = [_cold_run(data_dir) for _ in range(runs)]
    return log_s, log_rss, statistics.median(c[0] for c in cached), statistics.median(c[1] for c in cached)


def bench_concurrent(data_dir: Path, writers: int = 8, per_writer: int = 150) -> tuple[float, int, int]:
    with Store(data_dir) as store:
        notebook = Notebook(store)
        refresh_note_index(store.state)
        fsyncs = store.fsyncs

        def work(seed: int) -> None:
            rnd = random.Random(seed)
            for _ in range(per_writer):
                notebook.remember(**note_fields(rnd))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t
        return writers * per_writer / elapsed, writers * per_writer, store.fsyncs - fsyncs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--dir", help="where to put the data (the disk being measured)")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--meaning", action="store_true", help="also search with meaning on (hivenote[meaning])")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="hivenote-bench-", dir=args.dir))
    print(f"Hivenote core benchmark — Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, data on {root}")
    ms = 1000.0
    rows = []
    for n in sizes:
        data = root / f"n{n}"
        write_log(data, n)
        cold_s, cold_rss, cached_s, cached_rss = bench_cold(data)
        ours_s, naive_s = bench_search(data, args.queries)
        with_meaning = bench_meaning(data, args.queries) if args.meaning else {}
        ours_a, bare_a = bench_append(data, args.appends)
        rows.append(
            {
                "notes": n,
                "append p50 ms": pct(ours_a, 0.5) * ms,
                "append p99 ms": pct(ours_a, 0.99) * ms,
                "bare fsync p50 ms": pct(bare_a, 0.5) * ms,
                "bare fsync p99 ms": pct(bare_a, 0.99) * ms,
                "append/bare p50": pct(ours_a, 0.5) / pct(bare_a, 0.5),
                "search p50 ms": pct(ours_s, 0.5) * ms,
                "search p99 ms": pct(ours_s, 0.99) * ms,
                "naive scan p50 ms": pct(naive_s, 0.5) * ms,
                "naive/search p50": pct(naive_s, 0.5) / pct(ours_s, 0.5),
                "cold start s (log only)": cold_s,
                "cold RSS MB (log only)": cold_rss,
                "cold start s (op cache)": cached_s,
                "cold RSS MB (op cache)": cached_rss,
                **with_meaning,
            }
        )
    width = max(len(k) for k in rows[0])
    print()
    print(f"{'':<{width}}" + "".join(f"{r['notes']:>12,}" for r in rows))
    for key in rows[0]:
        if key == "notes":
            continue
        print(f"{key:<{width}}" + "".join(f"{r[key]:>12.2f}" for r in rows))
    rate, total, fsyncs = bench_concurrent(root / f"n{sizes[0]}")
    print(f"\n8 concurrent writers: {rate:,.0f} acknowledged writes/s ({total} writes, {fsyncs} fsyncs)")
    print(json.dumps({"rows": rows, "concurrent_writes_per_s": rate}), file=sys.stderr)


if __name__ == "__main__":
    main()
