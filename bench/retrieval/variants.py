"""Variants of the meaning index, each tried alone against the shipped one on the evaluation set: R@5 / MRR per
category through the shipped search (words, then meaning), as run.py measures it. Not a test; the rows of
variants in docs/BENCHMARKS.md come from it. None is shipped: none lifts the zero-overlap questions, and most lower
another category.

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

Tried in the round after (issue 17's zero-overlap line), each setting the best on half A of the zero-overlap
questions (run.py's columns) in a first pass over meaning alone (most tied there; one of the tied was taken), and
checked on half B and on fresh.py:
- lex0: the words' share left out of the fused near list (LEX_WEIGHT 0: meaning alone orders it);
- lex-idf: the words' share weighted by each word's rarity, log((N + 1) / (df + 1)), instead of counted alike;
- lex-sq: the words' share squared (one leftover word of four adds 1/16 of LEX_WEIGHT, three of four 9/16);
- title-body: two more vectors a note (title; body, tags and project), half the score the better of the two;
- sentences: a vector per sentence of the note (the title one of them), 0.3 of the score the best sentence's;
- expand: the question's vector moved towards its words' nearest words in the notebook (3 each, by the word
  vectors' cosine, weighted by it; 0.3 of the question's unit vector);
- maxsim: word-to-word alignment, half the score: for each question word its best cosine to a word of the note,
  averaged over the question's words;
- lower: notes and question lowercased before they are embedded;
- stopwords: a standard English stopword list (NLTK's 179) dropped from notes and question;
- perword: each word of the question a unit vector, then summed (a word of five tokens counts once);
- csls: each note's score lowered by half the mean cosine to its 10 nearest notes (hubness: notes close to many
  notes come up for every question);
- smooth3, smooth10: a note's score plus 0.3 (0.6) times the mean score of its 3 (10) nearest notes.
"""

from __future__ import annotations

import heapq
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so bench.retrieval imports

from bench.retrieval.notes import NOTES
from bench.retrieval.run import CATEGORIES, Book, evaluate, questions, width
from hivenote.server.core import search
from hivenote.server.meaning import index as meaning_index
from hivenote.server.meaning.index import CANDIDATES, MeaningIndex
from hivenote.server.meaning.model import QUESTION_WORDS, StaticModel, load_default, question_text

Vector = Any  # a numpy float32 array


class Weighted:
    """The shipped model with each token's vector scaled by `weights[token]`, or other changes to a text's vector."""

    def __init__(self, model: StaticModel, name: str, weights: Vector | None = None) -> None:
        self.inner, self.weights, self.model_id, self.dim = model, weights, name, model.dim
        self.table: Vector | None = None  # another table (all-but-the-top), else the model's rows
        self.by_word = self.drop_noise = self.per_word_question = False
        self.transform: Callable[[str], str] | None = None  # applied to every text before it is embedded

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
            if self.transform is not None:
                text = self.transform(text)
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


class Rescored(MeaningIndex):
    """The shipped index, its scores changed by `rescore(sims, query)` (sims: the shipped centred cosines per row).
    Keeps each note's text by row (read from the store when the index is warm) for the variants that need it."""

    def __init__(self, model: StaticModel, rescore: Callable[[Rescored, Vector, str], Vector]) -> None:
        super().__init__(None, lambda: model)
        self.rescore_fn = rescore
        self.texts: dict[str, Any] = {}  # note id -> note
        self.extra: dict[str, Any] = {}  # what a variant derives from the notes, made on first use
        self.inner = model

    def refresh(self, store: Any, budget: int | None = None) -> bool:
        done = super().refresh(store, budget)
        if done:
            with store.reading() as state:
                self.texts = {n.id: n for n in state.iter_notes()}
            self.extra = {}
        return done

    def scores(self, query: str, k: int = CANDIDATES) -> dict[str, float] | None:
        snap, model = self._snapshot, self.model
        if snap is None or model is None or not self.warm or not len(snap.ids):
            return None
        q = model.embed([question_text(query)])[0] - snap.mean
        q = q / max(float(np.linalg.norm(q)), 1e-9)
        sims = snap.vectors @ q - float(snap.mean @ q)
        sims = self.rescore_fn(self, sims, query)
        sims[~snap.alive] = -np.inf
        order = np.argsort(-sims)[:k]
        return {note_id: float(sims[i]) for i in order.tolist() if (note_id := snap.ids[i]) is not None}

    def note(self, row: int) -> Any:
        snap = self._snapshot
        assert snap is not None
        note_id = snap.ids[row]
        return self.texts.get(note_id) if note_id is not None else None

    def unit_words(self, words: list[str]) -> Vector:
        """Each word's vector (its tokens summed), as unit rows."""
        out = np.zeros((len(words), self.inner.dim), dtype=np.float32)
        for i, word in enumerate(words):
            ids = np.frombuffer(self.inner.token_ids([word])[0], dtype=self.inner._id_type)
            if len(ids):
                rows, slots = self.inner._float_rows(ids)
                out[i] = rows[slots].sum(axis=0)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


_TEXT_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")


def _words(text: str) -> list[str]:
    return [w for w in _TEXT_WORD.findall(text) if w.lower() not in QUESTION_WORDS]


def _whole(note: Any) -> str:
    return f"{note.title}. {note.body} {' '.join(note.tags)} {note.project or ''}"


def _sentences(note: Any) -> list[str]:
    return [note.title, *(part for part in re.split(r"(?<=[.;:!?])\s+", note.body) if part.strip())]


def chunked(chunks: Callable[[Any], list[str]], share: float) -> Callable[[Rescored, Vector, str], Vector]:
    """(1 - share) of the shipped score plus `share` of the best centred cosine of the note's chunks."""

    def rescore(index: Rescored, sims: Vector, query: str) -> Vector:
        snap = index._snapshot
        assert snap is not None and index.model is not None
        if "chunks" not in index.extra:
            index.extra["chunks"] = [
                index.model.embed(chunks(note)) if (note := index.note(row)) is not None else None
                for row in range(len(snap.ids))
            ]
        q = index.model.embed([question_text(query)])[0] - snap.mean
        q = q / max(float(np.linalg.norm(q)), 1e-9)
        best = np.array(
            [float(((c - snap.mean) @ q).max()) if c is not None else -1.0 for c in index.extra["chunks"]],
            dtype=np.float32,
        )
        return (1 - share) * sims + share * best

    return rescore


def neighbours(k: int) -> Callable[[Rescored], tuple[Vector, Vector]]:
    def of(index: Rescored) -> tuple[Vector, Vector]:
        snap = index._snapshot
        assert snap is not None
        if "nn" not in index.extra:
            c = snap.vectors - snap.mean
            c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-9)
            nn = c @ c.T
            np.fill_diagonal(nn, -np.inf)
            nn[:, ~snap.alive] = -np.inf
            order = np.argsort(-nn, axis=1)[:, :k]
            index.extra["nn"] = (order, np.take_along_axis(nn, order, axis=1))
        return index.extra["nn"]  # type: ignore[no-any-return]

    return of


def csls(k: int, weight: float) -> Callable[[Rescored, Vector, str], Vector]:
    near = neighbours(k)

    def rescore(index: Rescored, sims: Vector, query: str) -> Vector:
        _, cos = near(index)
        return sims - weight * cos.mean(axis=1)

    return rescore


def smooth(k: int, weight: float) -> Callable[[Rescored, Vector, str], Vector]:
    near = neighbours(k)

    def rescore(index: Rescored, sims: Vector, query: str) -> Vector:
        order, _ = near(index)
        return sims + weight * sims[order].mean(axis=1)

    return rescore


def maxsim(share: float) -> Callable[[Rescored, Vector, str], Vector]:
    def rescore(index: Rescored, sims: Vector, query: str) -> Vector:
        snap = index._snapshot
        assert snap is not None
        if "words" not in index.extra:
            index.extra["words"] = [
                index.unit_words(_words(_whole(note))) if (note := index.note(row)) is not None else None
                for row in range(len(snap.ids))
            ]
        asked = _words(question_text(query))
        if not asked:
            return sims
        qw = index.unit_words(asked)
        align = np.array(
            [float((qw @ w.T).max(axis=1).mean()) if w is not None and len(w) else 0.0 for w in index.extra["words"]],
            dtype=np.float32,
        )
        return (1 - share) * sims + share * align

    return rescore


def expand(each: int, share: float) -> Callable[[Rescored, Vector, str], Vector]:
    def rescore(index: Rescored, sims: Vector, query: str) -> Vector:
        snap = index._snapshot
        assert snap is not None and index.model is not None
        if "vocab" not in index.extra:
            vocab = sorted({w.lower() for note in index.texts.values() for w in _words(_whole(note))})
            index.extra["vocab"] = (vocab, index.unit_words(vocab))
        _, table = index.extra["vocab"]
        asked = _words(question_text(query))
        if not asked:
            return sims
        near = np.zeros(index.inner.dim, dtype=np.float32)
        for w in index.unit_words(asked):
            cos = table @ w
            top = np.argsort(-cos)[:each]
            near += (table[top] * cos[top, None]).sum(axis=0)
        q = index.model.embed([question_text(query)])[0]
        q = q + share * near / max(float(np.linalg.norm(near)), 1e-9)
        q = q / max(float(np.linalg.norm(q)), 1e-9) - snap.mean
        q = q / max(float(np.linalg.norm(q)), 1e-9)
        return snap.vectors @ q - float(snap.mean @ q)

    return rescore


def per_word(index: Rescored, sims: Vector, query: str) -> Vector:
    snap = index._snapshot
    assert snap is not None
    asked = question_text(query).split()
    q = index.unit_words(asked).sum(axis=0) if asked else np.zeros(index.inner.dim, np.float32)
    q = q / max(float(np.linalg.norm(q)), 1e-9) - snap.mean
    q = q / max(float(np.linalg.norm(q)), 1e-9)
    return snap.vectors @ q - float(snap.mean @ q)


NLTK_STOPWORDS = frozenset(
    """
    i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
    himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
    that that'll these those am is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will just don don't
    should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
    hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn
    wasn't weren weren't won won't wouldn wouldn't
    """.split()  # noqa: SIM905
)


def drop_stopwords(text: str) -> str:
    kept = [w for w in text.split() if w.lower().strip("?!.,;:") not in NLTK_STOPWORDS]
    return " ".join(kept) or text


@contextmanager
def lexical_weight(weight: float | None, by_rarity: bool = False, power: float = 1.0) -> Iterator[None]:
    """The fused near list with another LEX_WEIGHT, with each word's share weighted by its rarity, or the share
    raised to `power`."""
    shipped_weight, shipped_fused = search.LEX_WEIGHT, search._fused

    def fused(state: Any, query: str, filters: Any, scores: dict[str, float]) -> Any:
        terms = [t for t in search._WORD.findall(search.fold_text(query)) if len(t) > 2 and t not in search.QUERY_NOISE]
        index = search._texts(state)
        lexical = search._near_scored(state, index, terms, filters, search.NEAR_POOL) if terms else {}
        if lexical and by_rarity:
            n = sum(1 for _ in state.iter_notes())
            probes = search._probed(index.candidates, terms)
            weights = [math.log((n + 1) / (len(notes) + 1)) for _, notes in probes]
            total = max(len(terms) * math.log(n + 1), 1e-9)  # a word no note holds counts as the rarest
            lexical = {
                k: sum(w for (_, notes), w in zip(probes, weights, strict=True) if k in notes) / total for k in lexical
            }
        fused_list = []
        for note_id in set(scores) | set(lexical):
            note = state.note(note_id)
            if note is None or not filters.admit(note):
                continue
            sim, words = scores.get(note_id, 0.0), search.LEX_WEIGHT * lexical.get(note_id, 0.0) ** power
            fused_list.append((sim + words, note.revision, note, search.SIMILAR if sim >= words else search.SOME_WORDS))
        best = heapq.nlargest(search.NEAR_LIMIT, fused_list, key=lambda item: item[:2])
        return [item[2] for item in best], {item[2].id: item[3] for item in best}

    if weight is not None:
        search.LEX_WEIGHT = weight
    if by_rarity or power != 1.0:
        search._fused = fused
    try:
        yield
    finally:
        search.LEX_WEIGHT, search._fused = shipped_weight, shipped_fused


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
            embedder.transform = changes.get("transform")
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
        "lex0": lambda: MeaningIndex(None, lambda: model),
        "lex-idf": lambda: MeaningIndex(None, lambda: model),
        "lex-sq": lambda: MeaningIndex(None, lambda: model),
        "title-body": lambda: Rescored(
            model, chunked(lambda n: [n.title, _whole(n).removeprefix(f"{n.title}. ")], 0.5)
        ),
        "sentences": lambda: Rescored(model, chunked(_sentences, 0.3)),
        "expand": lambda: Rescored(model, expand(3, 0.3)),
        "maxsim": lambda: Rescored(model, maxsim(0.5)),
        "lower": plain("lower", transform=str.lower),
        "stopwords": plain("stopwords", transform=drop_stopwords),
        "perword": lambda: Rescored(model, per_word),
        "csls": lambda: Rescored(model, csls(10, 0.5)),
        "smooth3": lambda: Rescored(model, smooth(3, 0.3)),
        "smooth10": lambda: Rescored(model, smooth(10, 0.6)),
    }


LEXICAL = {
    "lex0": (0.0, False, 1.0),
    "lex-idf": (None, True, 1.0),
    "lex-sq": (None, False, 2.0),
}  # variants of the fusion, not of the index


def main() -> None:
    model = load_default()
    table = variants(model)
    names = sys.argv[1:] or list(table)
    print(f"{'':12s}" + "".join(f"{c:>{width(c)}s}" for c in CATEGORIES))
    shipped: dict[str, bool] = {}
    for name in ["shipped", *(n for n in names if n != "shipped")]:
        weight = {"title0": 0.0, "title50": 0.5}.get(name, meaning_index.TITLE_WEIGHT)
        top5: dict[str, bool] = {}
        with title_weight(weight), lexical_weight(*LEXICAL.get(name, (None, False, 1.0))):
            book = Book(False, True, table[name]())
            row = evaluate(book.rank, top5)
            book.close()
        if name == "shipped":
            shipped = top5
        print(f"{name:12s}" + "".join(f"{row[c]:>{width(c)}s}" for c in CATEGORIES), flush=True)
        moved = [
            (top5[t], c) for c in ("zero", "one", "fresh") for q in questions(c) if top5[(t := q.text)] != shipped[t]
        ]
        if moved:
            ups = Counter(c for up, c in moved if up)
            downs = Counter(c for up, c in moved if not up)
            print(
                f"{'':12s}into the top 5 vs shipped: "
                + ", ".join(f"{c} +{ups[c]} -{downs[c]}" for c in ("zero", "one", "fresh"))
            )


if __name__ == "__main__":
    main()
