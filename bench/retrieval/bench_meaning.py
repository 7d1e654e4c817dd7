"""Meaning search at scale: index build time (the background work after start), the memory it adds, and search
latency with meaning on, for typed words (exact matches: the lexical path) and for questions no note matches
word for word (the near list: lexical partial matches fused with the meaning index). Prints a plain table.

Run: python bench/retrieval/bench_meaning.py [--changing SHARE | --english] [note counts...]   (default: 10000
100000). Not a test. The notes are random words over a fixed vocabulary (tests/support/notes.py), which no real
notebook is: with --changing, that share of them (0.15: about as many as in bench/retrieval's notebook) end with
words saying they change something, which the index compares with the notes a search lists ("replaces" without a
link); with --english, each note is the title and body of a note of bench/retrieval's notebook and the body of
another, plus a few random words (English, with its common words and their many notes), and the questions are that
notebook's own (zero, one shared word, superseded).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so tests.support imports

from bench.retrieval.notes import NOTES
from bench.retrieval.questions import QUESTIONS as QUESTIONS_ASKED
from hivenote.server.core.model import Author, Op
from hivenote.server.core.search import refresh_note_index
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import load_default
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from tests.support.notes import VOCAB, WORDS, note_fields, write_log

QUESTIONS = 40
CHANGES = [
    "Replaces the older setup.",
    "We no longer do it the old way.",
    "Dropped the previous tool.",
    "Moves from X.",
]


def write_notes(data: Path, notes: Iterable[dict[str, Any]]) -> None:
    """A log of these notes' fields, one op each (written directly, as write_log does)."""
    (data / "log").mkdir(parents=True, exist_ok=True)
    by = Author(agent="cursor", client="cursor-vscode 1.7")
    with open(data / "log" / "seed-0001.jsonl", "wb") as fh:
        for i, fields in enumerate(notes, start=1):
            data_ = {"id": f"01SEED{i:020d}", "fields": fields}
            fh.write(Op("seed-0001", i, 1_760_000_000_000 + i * 1000, 0, "note.set", data_, by).encode())


def changing_notes(n: int, share: float) -> Iterator[dict[str, Any]]:
    """write_log's notes, `share` of them ending with words that say they change something."""
    rnd = random.Random(1)
    for _ in range(n):
        fields = dict(note_fields(rnd))
        if rnd.random() < share:
            fields["body"] = f"{fields['body']} {rnd.choice(CHANGES)}"
        yield fields


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(ask: Callable[[str], object], queries: list[str]) -> list[float]:
    """ms per query of `ask` (a notebook's search, or the meaning index's own share: `MeaningIndex.scores`)."""
    out = []
    for query in queries:
        t = time.perf_counter()
        ask(query)
        out.append((time.perf_counter() - t) * 1000)
    return out


def english_notes(n: int) -> Iterator[dict[str, Any]]:
    """Notes made of bench/retrieval's notes: one's title and body and another's body, and a few random words."""
    rnd = random.Random(2)
    for _ in range(n):
        one, other = rnd.choice(NOTES), rnd.choice(NOTES)
        yield {
            "kind": one.kind,
            "title": f"{one.title} {rnd.choice(VOCAB)}",
            "body": f"{one.body} {other.body} {' '.join(rnd.choices(VOCAB, k=3))}",
            "tags": list(one.tags),
            "project": one.project,
        }


def run(n: int, changing: float = 0.0, english: bool = False) -> dict[str, float]:
    rnd = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        if english:
            write_notes(data, english_notes(n))
        elif changing:
            write_notes(data, changing_notes(n, changing))
        else:
            write_log(data, n)
        with Store(data, readonly=True) as store:
            with store.reading() as state:
                refresh_note_index(state)
            before = rss_mb()
            model = load_default()  # numpy, tokenizers and the model: the first of the runs pays for them
            loaded = rss_mb()
            index = MeaningIndex(data / "cache" / "meaning.bin", lambda: model)
            t = time.perf_counter()
            while not index.refresh(store):
                pass
            build = time.perf_counter() - t
            added = rss_mb() - before
            by_index = rss_mb() - loaded
            words = [rnd.choice(WORDS) for _ in range(200)]
            questions = [f"how do we {' '.join(rnd.choices(WORDS, k=4))} here?" for _ in range(QUESTIONS)]
            if english:
                words = [rnd.choice(sorted({w for n in NOTES for w in n.title.split()})) for _ in range(200)]
                questions = [q.text for q in QUESTIONS_ASKED if q.category in ("zero", "one", "newer")]
            lexical = Notebook(store)
            meaning = Notebook(store, meaning=index)
            timed(meaning.search, questions[:5])  # warm caches
            t = time.perf_counter()
            again = MeaningIndex(data / "cache" / "meaning.bin", lambda: model)
            while not again.refresh(store):
                pass
            cached = time.perf_counter() - t
            publish = []
            for _ in range(5):  # what the index does after each write, for searches to see it
                t = time.perf_counter()
                with index._lock:
                    index._publish()
                publish.append((time.perf_counter() - t) * 1000)
            return {
                "notes": n,
                "build s": build,
                "from cache s": cached,
                "added RSS MB": added,
                "by the index MB": by_index,
                "words p50 ms (off)": statistics.median(timed(lexical.search, words)),
                "words p50 ms (on)": statistics.median(timed(meaning.search, words)),
                "question p50 ms (off)": statistics.median(timed(lexical.search, questions)),
                "question p50 ms (on)": statistics.median(timed(meaning.search, questions)),
                "question p99 ms (on)": pct(timed(meaning.search, questions), 0.99),
                "of it, scores() p50 ms": statistics.median(timed(index.scores, questions)),
                "publish p50 ms": statistics.median(publish),
            }


def main() -> None:
    args = sys.argv[1:]
    changing = float(args.pop(args.index("--changing") + 1)) if "--changing" in args else 0.0
    counts = [int(a) for a in args if not a.startswith("--")] or [10_000, 100_000]
    rows = [run(n, changing, "--english" in args) for n in counts]
    for key in rows[0]:
        print(f"{key:24s}" + "".join(f"{row[key]:>12.1f}" for row in rows))


if __name__ == "__main__":
    main()
