"""Variants of the meaning index, each tried alone against the shipped one on the evaluation set: R@5 / MRR per
category through the shipped search (words, then meaning), as run.py measures it. Not a test; the README's rows of
variants come from it. None is shipped: none lifts the zero-overlap questions, and most lower another category.

Run: python bench/retrieval/variants.py [name ...]   (default: all)

- sif-tf: token vectors weighted a/(a + p), p the token's share of the notebook's tokens (SIF, a = 1e-3);
- sif-df: the same with p the share of the notebook's notes holding the token (a = 0.1);
- idf: weighted by log((N + 1) / df) over the notebook's N notes;
- pc1, pc3: the first 1 or 3 principal components of the centred note vectors removed from notes and question;
- sif+pc1: SIF weights and the first component removed (the SIF paper's whole recipe);
- abtt3: the table's own mean and first 3 components removed from every token vector (all-but-the-top);
- title0, title50: the title's share of a note's vector 0 or 0.5 (shipped: 0.3);
- no-noise: the question words dropped from the notes as from the question;
- words: a word's tokens averaged first, then the words (a word split in five pieces counts once);
- prf: the question moved towards its three best notes (pseudo-relevance feedback, 0.3 of their mean).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so bench.retrieval imports

from bench.retrieval.notes import NOTES
from bench.retrieval.run import CATEGORIES, Book, evaluate
from hivenote.server.meaning import index as meaning_index
from hivenote.server.meaning.index import CANDIDATES, MeaningIndex
from hivenote.server.meaning.model import StaticModel, load_default, question_text

Vector = Any  # a numpy float32 array


class Weighted:
    """The shipped model with each token's vector scaled by `weights[token]`, or other changes to a text's vector."""

    def __init__(self, model: StaticModel, name: str, weights: Vector | None = None) -> None:
        self.inner, self.weights, self.model_id, self.dim = model, weights, name, model.dim
        self.table: Vector | None = None  # another table (all-but-the-top), else the model's rows
        self.by_word = self.drop_noise = False

    def _rows(self, ids: Vector) -> Vector:
        if self.table is not None:
            return self.table[ids]
        rows, slots = self.inner._float_rows(ids)
        return rows[slots]

    def _ids(self, text: str) -> Vector:
        return np.frombuffer(self.inner.token_ids([text])[0], dtype=self.inner._id_type)

    def embed(self, texts: list[str]) -> Vector:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if self.drop_noise:
                text = question_text(text)
            if self.by_word:
                parts = [ids for word in text.split() if len(ids := self._ids(word))]
                vector = sum((self._rows(ids).mean(axis=0) for ids in parts), np.zeros(self.dim, np.float32))
            else:
                ids = self._ids(text)
                if not len(ids):
                    continue
                rows = self._rows(ids)
                vector = (rows * self.weights[ids][:, None]).sum(axis=0) if self.weights is not None else rows.sum(0)
            norm = float(np.linalg.norm(vector))
            if norm > 0:
                out[row] = vector / norm
        return out


class Projected(MeaningIndex):
    """The shipped index, asked differently: the first `components` principal components of the centred note
    vectors taken out of notes and question, or the question moved towards its best notes (`feedback`)."""

    def __init__(self, model: Any, components: int = 0, feedback: float = 0.0) -> None:
        super().__init__(None, lambda: model)
        self.components, self.feedback = components, feedback

    def scores(self, query: str, k: int = CANDIDATES) -> dict[str, float] | None:
        snap, model = self._snapshot, self.model
        if snap is None or model is None or not self.warm or not len(snap.ids):
            return None
        notes = snap.vectors - snap.mean
        q = model.embed([question_text(query)])[0] - snap.mean
        if self.components:
            _, _, vt = np.linalg.svd(notes[snap.alive], full_matrices=False)
            top = vt[: self.components]
            notes = notes - (notes @ top.T) @ top
            q = q - (top @ q) @ top
        notes = notes / np.maximum(np.linalg.norm(notes, axis=1, keepdims=True), 1e-9)
        q = q / max(float(np.linalg.norm(q)), 1e-9)
        sims = notes @ q
        if self.feedback:
            best = np.argsort(-np.where(snap.alive, sims, -np.inf))[:3]
            q = q + self.feedback * notes[best].mean(axis=0)
            sims = notes @ (q / float(np.linalg.norm(q)))
        sims[~snap.alive] = -np.inf
        order = np.argsort(-sims)[:k]
        return {note_id: float(sims[i]) for i in order.tolist() if (note_id := snap.ids[i]) is not None}


def counts(model: StaticModel) -> tuple[Counter[int], Counter[int], int]:
    """Token counts over the notebook's notes: occurrences, notes holding each, and the number of notes."""
    tf: Counter[int] = Counter()
    df: Counter[int] = Counter()
    texts = [f"{n.title}. {n.body} {' '.join(n.tags)} {n.project or ''}" for n in NOTES]
    for packed in model.token_ids(texts):
        ids = np.frombuffer(packed, dtype=model._id_type).tolist()
        tf.update(ids)
        df.update(set(ids))
    return tf, df, len(texts)


@contextmanager
def title_weight(weight: float) -> Iterator[None]:
    shipped = meaning_index.TITLE_WEIGHT
    meaning_index.TITLE_WEIGHT = weight
    try:
        yield
    finally:
        meaning_index.TITLE_WEIGHT = shipped


def variants(model: StaticModel) -> dict[str, Callable[[], MeaningIndex]]:
    tf, df, n = counts(model)
    total, vocab = sum(tf.values()), model.table.rows

    def weights(of: Callable[[int], float], default: float) -> Vector:
        out = np.full(vocab, default, dtype=np.float32)
        for token in tf:
            out[token] = of(token)
        return out

    sif_tf = weights(lambda t: 1e-3 / (1e-3 + tf[t] / total), 1.0)
    sif_df = weights(lambda t: 0.1 / (0.1 + df[t] / n), 1.0)
    idf = weights(lambda t: math.log((n + 1) / df[t]), math.log(n + 1))

    def plain(name: str, **changes: Any) -> Callable[[], MeaningIndex]:
        def make() -> MeaningIndex:
            embedder = Weighted(model, name, changes.get("weights"))
            embedder.by_word = changes.get("by_word", False)
            embedder.drop_noise = changes.get("drop_noise", False)
            embedder.table = changes.get("table")
            return MeaningIndex(None, lambda: embedder)

        return make

    def abtt(components: int) -> Vector:
        table = np.zeros((vocab, model.dim), dtype=np.float32)
        model.table.read(np.arange(vocab), table)
        table -= table.mean(axis=0)
        _, _, vt = np.linalg.svd(table, full_matrices=False)
        top = vt[:components]
        return table - (table @ top.T) @ top

    return {
        "shipped": lambda: MeaningIndex(None, lambda: model),
        "sif-tf": plain("sif-tf", weights=sif_tf),
        "sif-df": plain("sif-df", weights=sif_df),
        "idf": plain("idf", weights=idf),
        "pc1": lambda: Projected(model, components=1),
        "pc3": lambda: Projected(model, components=3),
        "sif+pc1": lambda: Projected(Weighted(model, "sif-tf", sif_tf), components=1),
        "abtt3": plain("abtt3", table=abtt(3)),
        "title0": lambda: MeaningIndex(None, lambda: model),
        "title50": lambda: MeaningIndex(None, lambda: model),
        "no-noise": plain("no-noise", drop_noise=True),
        "words": plain("words", by_word=True),
        "prf": lambda: Projected(model, feedback=0.3),
    }


def main() -> None:
    model = load_default()
    table = variants(model)
    names = sys.argv[1:] or list(table)
    print(f"{'':12s}" + "".join(f"{c:>20s}" for c in CATEGORIES))
    for name in names:
        weight = {"title0": 0.0, "title50": 0.5}.get(name, meaning_index.TITLE_WEIGHT)
        with title_weight(weight):
            book = Book(False, True, table[name]())
            row = evaluate(book.rank)
            book.close()
        print(f"{name:12s}" + "".join(f"{row[c]:>20s}" for c in CATEGORIES), flush=True)


if __name__ == "__main__":
    main()
