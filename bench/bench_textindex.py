"""Benchmark of hivenote.server.core.textindex.SubstringIndex against a naive scan; prints a plain table.

Run: python bench/bench_textindex.py [doc counts...]   (default: 10000 100000). Not a test.
"""

from __future__ import annotations

import gc
import itertools
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence

from hivenote.server.core.textindex import SubstringIndex

SEED = 20240601
WORDS_PER_DOC = 40
VOCAB_SIZE = 5000
TERMS_PER_CLASS = 40
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["qu", "th", "sh", "ch", "str", "ing"]


def make_vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCAB_SIZE:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def make_docs(n: int, vocab: list[str], rng: random.Random) -> dict[int, str]:
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like, like real prose
    cum = list(itertools.accumulate(weights))
    docs: dict[int, str] = {}
    for key in range(n):
        words = rng.choices(vocab, cum_weights=cum, k=WORDS_PER_DOC)
        # A unique id and a number per document, as notes carry ids, dates and figures.
        words.append(f"note-{key:07d}")
        words.append(str(rng.randint(0, 10**6)))
        rng.shuffle(words)
        docs[key] = " ".join(words)
    return docs


def doc_frequency(docs: dict[int, str], vocab: list[str]) -> dict[str, int]:
    df = dict.fromkeys(vocab, 0)
    for text in docs.values():
        for tok in set(text.split()):
            if tok in df:
                df[tok] += 1
    return df


def pick_terms(docs: dict[int, str], vocab: list[str], rng: random.Random) -> dict[str, list[str]]:
    n = len(docs)
    df = doc_frequency(docs, vocab)
    rare = sorted((w for w in vocab if df[w] > 0 and len(w) >= 5), key=lambda w: (df[w], w))[:200]
    medium = [w for w in vocab if n // 200 <= df[w] <= n // 20]
    common = [w for w in vocab if df[w] >= n // 5]
    prefixes = sorted({w[:4] for w in medium if len(w) >= 6})
    ids = [f"note-{rng.randrange(n):07d}" for _ in range(TERMS_PER_CLASS)]
    short = [*"aeiostxz7", "qu", "th", "ba", "zo", "42", "in", "ke", "ru"]

    def sample(pool: list[str]) -> list[str]:
        return rng.sample(pool, min(TERMS_PER_CLASS, len(pool)))

    return {
        "rare word": sample(rare),
        "medium word": sample(medium),
        "common word": sample(common),
        "word prefix (4 ch)": sample(prefixes),
        "unique id": ids,
        "short 1-2 ch": short,
    }


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


def time_each(fn: Callable[[str], object], terms: Sequence[str]) -> list[float]:
    # Start every pass from a collected heap so one pass does not pay for the previous pass's garbage.
    gc.collect()
    out: list[float] = []
    for term in terms:
        t0 = time.perf_counter()
        fn(term)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def cold(index: SubstringIndex[int], query: Callable[[str], object]) -> Callable[[str], object]:
    """The query with the scan cache emptied first, so each call pays for its own vocabulary scan."""

    def run(term: str) -> object:
        index._scan_cache.clear()
        return query(term)

    return run


def build(docs: dict[int, str]) -> SubstringIndex[int]:
    index: SubstringIndex[int] = SubstringIndex()
    for key, text in docs.items():
        index.set(key, text)
    return index


def run(n: int) -> None:
    rng = random.Random(SEED + n)
    vocab = make_vocabulary(rng)
    docs = make_docs(n, vocab, rng)
    text_bytes = sum(sys.getsizeof(t) for t in docs.values())

    gc.collect()
    tracemalloc.start()
    index = build(docs)
    mem_now, mem_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    gc.collect()

    t0 = time.perf_counter()
    index = build(docs)
    build_s = time.perf_counter() - t0
    vocab_tokens = len(index._post)

    def naive(term: str) -> list[int]:
        return [k for k, t in docs.items() if term in t]

    print(f"\n== {n:,} docs, {WORDS_PER_DOC}+2 tokens each, {vocab_tokens:,} distinct tokens ==")
    print(f"build: {build_s:.2f} s ({build_s / n * 1e6:.1f} us/doc)")
    print(
        f"index memory (tracemalloc, texts excluded): {mem_now / 2**20:.1f} MiB retained, "
        f"{mem_peak / 2**20:.1f} MiB peak; texts themselves: {text_bytes / 2**20:.1f} MiB"
    )
    header = (
        f"{'term class':<20}{'terms':>6}{'hits p50':>10}{'cand p50':>10}{'cand p99':>10}"
        f"{'est p50':>9}{'est+cand':>10}{'naive p50':>11}{'naive p99':>11}{'speedup':>9}"
    )
    print(header)
    print("-" * len(header))
    for label, terms in pick_terms(docs, vocab, rng).items():
        for term in terms:
            if index.candidates(term) != set(naive(term)):
                raise SystemExit(f"mismatch for {term!r}")
        cand = time_each(cold(index, index.candidates), terms)
        est = time_each(cold(index, index.count_estimate), terms)
        # What a query planner does: estimate, then fetch the same term (the second call reuses the scan).
        both = time_each(cold(index, lambda t: (index.count_estimate(t), index.candidates(t))), terms)
        slow = time_each(naive, terms)
        hits = statistics.median(len(index.candidates(t)) for t in terms)
        c50, c99 = percentiles(cand)
        n50, n99 = percentiles(slow)
        e50, _ = percentiles(est)
        b50, _ = percentiles(both)
        print(
            f"{label:<20}{len(terms):>6}{hits:>10.0f}{c50:>10.3f}{c99:>10.3f}{e50:>9.3f}{b50:>10.3f}"
            f"{n50:>11.3f}{n99:>11.3f}{n50 / c50:>8.1f}x"
        )
    print("(ms; cand = candidates(), est = count_estimate(), naive = [k for k, t in texts.items() if term in t])")

    # Churn: rewrite a fifth of the documents so postings carry stale entries, then query again.
    churn = rng.sample(sorted(docs), n // 5)
    fresh = make_docs(len(churn), vocab, rng)
    t0 = time.perf_counter()
    for key, text in zip(churn, fresh.values(), strict=True):
        docs[key] = text
        index.set(key, text)
    churn_s = time.perf_counter() - t0
    terms = pick_terms(docs, vocab, rng)["medium word"]
    for term in terms:
        if index.candidates(term) != set(naive(term)):
            raise SystemExit(f"mismatch after churn for {term!r}")
    cand = time_each(cold(index, index.candidates), terms)
    tok = time_each(lambda term: index.numbers_with_tokens([term]), terms)
    print(
        f"after replacing {len(churn):,} docs ({churn_s / len(churn) * 1e6:.1f} us each): medium word "
        f"candidates p50 {percentiles(cand)[0]:.3f} ms, whole-token postings p50 {percentiles(tok)[0]:.3f} ms"
    )


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [10_000, 100_000]
    print(f"Python {sys.version.split()[0]}")
    for n in sizes:
        run(n)


if __name__ == "__main__":
    main(sys.argv[1:])
