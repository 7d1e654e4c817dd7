"""Where the answer to each question of a category ranks by meaning alone (the index's centred cosines over every
note) and in the shipped search (words, then meaning), with what sits above it: a miss whose answer is in the
meaning top 5 but not in the search's is lost in the fusion; one whose answer is not in the meaning top 5 either is
lost in the vectors. Not a test.

Run: python bench/retrieval/diagnose.py [category]   (default: zero; also fresh, one, ...)
  columns: m# and h# the answer's rank by meaning alone and in the search; sim its centred cosine; lex the share
  of the question's words it holds (as the fusion counts them); then the search's top 5 as key(meaning/lex).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so bench.retrieval imports

from bench.retrieval.run import Book, questions
from hivenote.server.core import search
from hivenote.server.core.listing import NO_FILTERS


def main() -> None:
    category = sys.argv[1] if len(sys.argv) > 1 else "zero"
    book = Book(False, True)
    assert book.index is not None
    kinds: Counter[str] = Counter()
    print(f"{'ans':9s} {'m#':>3s} {'h#':>4s} {'sim':>5s} {'lex':>4s} {'lost':6s} question | search's top 5")
    for q in questions(category):
        scores = book.index.scores(q.text, k=len(book.ids)) or {}
        by_meaning = [book.keys[i] for i in sorted(scores, key=lambda i: -scores[i])]
        m_rank = min((by_meaning.index(a) for a in q.answers if a in by_meaning), default=len(book.ids))
        with book.store.reading() as state:
            terms = [t for t in search._WORD.findall(search.fold_text(q.text)) if len(t) > 2]
            terms = [t for t in terms if t not in search.QUERY_NOISE]
            index = search._texts(state)
            lexical = search._near_scored(state, index, terms, NO_FILTERS, search.NEAR_POOL) if terms else {}
        hits, near = book.rank(q.text)
        got = hits + [k for k in near if k not in hits]
        h_rank = next((i for i, k in enumerate(got) if k in q.answers), None)
        found = h_rank is not None and h_rank < 5
        lost = "" if found else ("fusion" if m_rank < 5 else "vector")
        kinds[lost or "found"] += 1
        sim = max(scores.get(book.ids[a], float("nan")) for a in q.answers)
        lex = max(lexical.get(book.ids[a], 0.0) for a in q.answers)
        top = " ".join(f"{k}({scores.get(book.ids[k], 0):.2f}/{lexical.get(book.ids[k], 0):.2f})" for k in got[:5])
        shown = "-" if h_rank is None else str(h_rank + 1)
        print(f"{q.answers[0]:9s} {m_rank + 1:3d} {shown:>4s} {sim:5.2f} {lex:4.2f} {lost:6s} {q.text} | {top}")
    print(", ".join(f"{kind}: {n}" for kind, n in kinds.most_common()))
    book.close()


if __name__ == "__main__":
    main()
