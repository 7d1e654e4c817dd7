"""Time windows (`since` / `until`) against today's unfiltered list and search, in the same run. Prints a table; not a
test.

    python bench/bench_window.py [--notes 100000] [--queries 100]

The log is tests/support/notes.py's: N realistic notes written one second apart (the newest last), read as the
server reads it (`Notebook.list` / `Notebook.search` over a store, the search index warm). Each row is the p50 / p99
of a call: the plain list and search, then the same calls with a window that holds the newest 1%, 10% or all of the
notes (since), the older half (until), or a slice in the middle (since and until). `Notebook.window` reads the
window from an ISO date-time, as every surface does.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hivenote.server.core.listing import NO_FILTERS, Filters
from hivenote.server.core.search import refresh_note_index
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store

if not __package__:  # run as a script (python bench/bench_window.py): the project root, for tests.support
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.notes import WORDS as WORDS
from tests.support.notes import write_log as write_log

BASE = 1_760_000_000_000  # write_log's first note is at BASE + 1 s, the i-th at BASE + i s


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def timed(call: Callable[[], object], runs: int) -> tuple[float, float]:
    call()  # the first call makes what later ones reuse (the recency order, a kept filtered list)
    spent = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        spent.append((time.perf_counter() - t) * 1000)
    spent.sort()
    return statistics.median(spent), spent[min(len(spent) - 1, int(len(spent) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    n = args.notes

    def at(share: float) -> int:
        """The time of the note at `share` of the log."""
        return BASE + int(n * share) * 1000

    windows = {
        "none (today's list and search)": (None, None),
        "since: the newest 1%": (iso(at(0.99)), None),
        "since: the newest 10%": (iso(at(0.90)), None),
        "since: every note": (iso(BASE), None),
        "until: the older half": (None, iso(at(0.5))),
        "since and until: 10% in the middle": (iso(at(0.45)), iso(at(0.55))),
    }
    rnd = random.Random(5)
    queries = [" ".join(rnd.sample(WORDS[:400], k=rnd.randint(1, 2))) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        write_log(Path(tmp), n)
        with Store(Path(tmp), readonly=True) as store:
            refresh_note_index(store.state)
            notebook = Notebook(store)
            print(f"{n:,} notes; p50 / p99 in ms")
            print(f"| window | list (20 newest) | search ({len(queries)} typed queries, each) |")
            print("|---|---:|---:|")
            for name, (since, until) in windows.items():
                filters = replace(NO_FILTERS, window=notebook.window(since, until))
                listed = timed(lambda f=filters: notebook.list(f, limit=20), 50)  # type: ignore[misc]
                spent = []
                for query in queries:
                    t = time.perf_counter()
                    notebook.search(query, filters)
                    spent.append((time.perf_counter() - t) * 1000)
                spent.sort()
                searched = statistics.median(spent), spent[int(len(spent) * 0.99)]
                print(
                    f"| {name} | {listed[0]:.2f} / {listed[1]:.2f} | {searched[0]:.2f} / {searched[1]:.2f} |",
                    flush=True,
                )
            kind = Filters(kind="decision")
            listed = timed(lambda: notebook.list(kind, limit=20), 50)
            spent = []
            for query in queries:
                t = time.perf_counter()
                notebook.search(query, kind)
                spent.append((time.perf_counter() - t) * 1000)
            spent.sort()
            print(
                f"| (for scale: kind=decision, no window) | {listed[0]:.2f} / {listed[1]:.2f} "
                f"| {statistics.median(spent):.2f} / {spent[int(len(spent) * 0.99)]:.2f} |"
            )


if __name__ == "__main__":
    main()
