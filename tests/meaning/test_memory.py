"""What meaning search costs in memory, on real parts (the shipped model, a store on disk): the token table stays the
wheel's float16 file, mapped rather than copied; the word cache is bounded by memory, not only by a count; the
cache file is written without a second copy of the note vectors; what the index keeps of each note beside its vector
is columns of numbers, not objects; and the vectors are the ones a float32 mean gives.
"""

from __future__ import annotations

import json
import random
import struct
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hivenote.server.core.model import Op
from hivenote.server.meaning.index import SAME_DECISION, TITLE_WEIGHT, MeaningIndex, note_texts
from hivenote.server.meaning.model import ROW_CACHE, WORD_CACHE, StaticModel, load_default
from hivenote.server.storage.store import Store
from tests.support.notes import indexed_store, note_fields

WORD_CACHE_BUDGET_MB = 16  # what the word -> token ids cache may hold at most
NOTE_WORDS = ["release", "checklist", "PostgreSQL", "Crashlytics", "noodle", "rollback", "healthz", "JSONB", "cents"]


@pytest.fixture(scope="module")
def model() -> StaticModel:
    return load_default()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with indexed_store(tmp_path, 3000) as opened:
        yield opened


def the_table(model: StaticModel) -> np.ndarray[Any, Any]:
    """The whole table as the weights file holds it (float16), read here for reference."""
    with open(model.table.path, "rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        entry = json.loads(fh.read(length))["embedding.weight"]
        begin, end = entry["data_offsets"]
        fh.seek(8 + length + begin)
        return np.frombuffer(fh.read(end - begin), "<f2").reshape(entry["shape"])


def arrays_held(model: StaticModel) -> int:
    return sum(v.nbytes for v in vars(model).values() if isinstance(v, np.ndarray))


def test_the_model_holds_the_rows_it_uses_not_the_table(model: StaticModel) -> None:
    """A float32 copy of the table was 33 MB of every server's memory; the rows a notebook uses are a few thousand
    of the 32,000, read in float32 as needed. The weights file is not kept mapped either (its pages would count)."""
    model.embed([" ".join(NOTE_WORDS)])
    table = 32000 * 256 * 4
    assert arrays_held(model) <= ROW_CACHE * model.dim * 4 + 32000 * 4 < table / 3, arrays_held(model)
    if sys.platform.startswith("linux"):
        maps = Path("/proc/self/maps").read_text(encoding="utf-8")
        assert ".safetensors" not in maps


def test_a_text_s_vector_is_the_float32_mean_of_its_token_vectors(model: StaticModel) -> None:
    """Rows summed in float32 from the float16 file give the vectors the float32 table gave (the same ranking),
    also for a text longer than a block, an empty one, and after the row cache started over."""
    reference = the_table(model)
    texts = ["Pocket-app crashes are reported to Firebase Crashlytics", "port 8085", "", "a " * 5000 + "end"]
    whole_words = sorted(t[1:] for t in model.tokenizer.get_vocab() if t.startswith("▁") and t[1:].isalpha())
    texts += [" ".join(whole_words[i : i + 3000]) for i in range(0, ROW_CACHE + 3000, 3000)]  # the cache starts over
    restarts = []
    got = model.embed(texts)
    restarts.append(model._rows)
    got += model.embed(texts)
    assert model._rows is not restarts[0]  # it did start over
    for text, vector in zip(texts, got / 2, strict=True):
        ids = [i for word in text.split() for i in model.tokenizer.encode(word, add_special_tokens=False).ids]
        if not ids:
            assert not vector.any()
            continue
        mean = reference[ids].astype(np.float64).mean(axis=0)
        assert np.allclose(vector, mean / np.linalg.norm(mean), atol=1e-5)


def test_the_word_cache_is_bounded_by_memory(model: StaticModel) -> None:
    """The cache of a word's token ids is cleared at WORD_CACHE words: that many must fit in the budget (as Python
    lists of ints, 400k words were ~100 MB)."""
    words = [f"w{i}ord{i * 7919 % 100003}" for i in range(2000)]
    model.embed([" ".join(words)])
    sizes = [sys.getsizeof(word) + sys.getsizeof(model.words[word]) + 3 * 8 for word in words]
    sizes += [sys.getsizeof(i) for word in words for i in model.words[word] if not -5 <= i <= 256]
    per_word = sum(sizes) / len(words)
    assert per_word * WORD_CACHE <= WORD_CACHE_BUDGET_MB * 2**20, per_word * WORD_CACHE / 2**20


def test_the_cache_file_is_written_without_copying_the_vectors(
    store: Store, model: StaticModel, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "meaning.bin"
    index = MeaningIndex(cache, lambda: model)
    while not index.refresh(store):
        pass
    vectors = 3000 * (model.dim + 4)  # int8 rows and a float32 scale each
    tracemalloc.start()
    try:
        index._write_cache(model.model_id)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rest = cache.stat().st_size - vectors  # the header (ids, digests, nodes, projects) and the notes' numbers
    assert rest > 0
    # Those are made in memory (a dict of lists, and JSON's encoder makes a str a value before joining them), never a
    # second copy of the vectors (that would be 780 KB more here, the bound's slack ~300 KB).
    assert peak < 4 * rest + vectors / 2, (peak, rest, vectors)
    again = MeaningIndex(cache, lambda: model)
    while not again.refresh(store):
        pass
    assert again._snapshot is not None and index._snapshot is not None
    assert np.array_equal(again._snapshot.vectors, index._snapshot.vectors)


def test_the_vectors_are_held_as_a_byte_a_component_and_are_the_float_vectors_within_rounding(
    store: Store, model: StaticModel
) -> None:
    """Float32 vectors were 1 KB a note (100 MB at 100k notes, most of what meaning search added there). Now one
    signed byte a component and a scale a row; each is the float vector the note's text gives, to a cosine of
    0.999 or more."""
    index = MeaningIndex(None, lambda: model)
    while not index.refresh(store):
        pass
    held = index._matrix.nbytes + index._scales.nbytes
    assert held <= 3000 * (model.dim + 4) * 1.15, held
    rows = list(index._pos.items())[::60]
    with store.reading() as state:
        notes = [state.note(note_id, keep=False) for note_id, _ in rows]
    whole = model.embed([note_texts(note)[0] for note in notes if note is not None])
    title = model.embed([note_texts(note)[1] for note in notes if note is not None])
    mixed = (1 - TITLE_WEIGHT) * whole + TITLE_WEIGHT * title
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    held_rows = np.array([index._vector(row) for _, row in rows])
    cosines = (held_rows * mixed).sum(axis=1) / np.linalg.norm(held_rows, axis=1)
    assert cosines.min() >= 0.999, cosines.min()


def test_a_restart_maps_the_cache_file_and_lets_it_go_once_warm(
    store: Store, model: StaticModel, tmp_path: Path
) -> None:
    """Read whole, the cache file was a second copy of every vector while the first pass ran (100 MB at 100k),
    beside a matrix grown by half again, copied at each step."""
    cache = tmp_path / "cache" / "meaning.bin"
    first = MeaningIndex(cache, lambda: model)
    while not first.refresh(store):
        pass
    vectors = 3000 * (model.dim + 4)  # int8 rows and a float32 scale each
    tracemalloc.start()
    try:
        again = MeaningIndex(cache, lambda: model)
        while not again.refresh(store):
            pass
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held > vectors  # the index's own matrix (and what it keeps of each note)
    rest = cache.stat().st_size - vectors  # the header and the notes' numbers, parsed on the way
    # Never a second copy of the vectors; the sum of the rows' outer products (dim x dim float64, the spread of a
    # question's cosines) is made anew as rows are added: a few of it at once, whatever the notebook's size.
    square = 3 * model.dim * model.dim * 8
    assert peak - held < 3 * rest + vectors / 2 + square, (peak, held, rest, vectors)
    if sys.platform.startswith("linux"):
        assert "meaning.bin" not in Path("/proc/self/maps").read_text(encoding="utf-8")


def test_beside_its_vector_the_index_keeps_no_object_a_note(store: Store, model: StaticModel, tmp_path: Path) -> None:
    """What the index kept of each note beside its vector was a tuple, a stamp and their ints (its revision, text
    digest, project, creation, mark), the searches' snapshot a tuple of (created, revision) more, and a string for
    each note's node and project read from the cache file: ~700 bytes a note over a restart (measured before the
    change), 70 MB at 100k notes. Now columns of numbers, in the index and in the snapshot, and the notebook's own
    strings; what is left (~290 bytes) is those columns, the snapshot's copy of them, and each id's place in two dicts
    and a list. Measured as Python allocations alone (the vectors are numpy's) over a restart, which takes each note
    from the cache file."""
    cache = tmp_path / "cache" / "meaning.bin"
    first = MeaningIndex(cache, lambda: model)
    while not first.refresh(store):
        pass
    del first
    only_python = [tracemalloc.DomainFilter(inclusive=True, domain=0)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(only_python)
        again = MeaningIndex(cache, lambda: model)
        while not again.refresh(store):
            pass
        after = tracemalloc.take_snapshot().filter_traces(only_python)
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert again.warm and len(again._pos) == 3000
    assert kept / 3000 < 350, f"{kept / 3000:.0f} bytes a note"


def publish_peak(store: Store, model: StaticModel) -> int:
    """The most memory an index warm on `store` allocates at once to publish a snapshot (as after every write)."""
    index = MeaningIndex(None, lambda: model)
    while not index.refresh(store):
        pass
    tracemalloc.start()
    try:
        index._publish()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_publish_after_a_write_copies_no_column_of_the_notes(store: Store, model: StaticModel) -> None:
    """After every write the index publishes a snapshot for searches; it copied every note's columns (revision,
    digest, node, project: ~8 MB at 100k notes, kept until the next write). It copies the row-to-id map and which
    rows are alive (~9 bytes a note)."""
    peak = publish_peak(store, model)
    assert peak < 3000 * 16, f"{peak / 3000:.0f} bytes a note"


def changing(tmp_path: Path, n: int) -> Store:
    """A store of `n` random notes, every other one saying that it changes something, in three projects."""
    rnd = random.Random(3)
    (tmp_path / "log").mkdir()
    with open(tmp_path / "log" / "seed-0001.jsonl", "wb") as fh:
        for i in range(1, n + 1):
            fields = note_fields(rnd)
            fields["project"] = rnd.choice(["shop", "web", None])
            if i % 2:
                fields["body"] += " Replaces the old way of doing it."
            op = Op("seed-0001", i, 1_760_000_000_000 + i * 1000, 0, "note.set", {"id": f"N{i:06}", "fields": fields})
            fh.write(op.encode())
    return Store(tmp_path, readonly=True)


def test_a_publish_copies_nothing_of_the_notes_that_say_they_change_something(
    tmp_path: Path, model: StaticModel
) -> None:
    """One note in seven says such words in a real notebook. Each snapshot held a float32 copy of their vectors and a
    tuple of each one's project and age (at 100k notes, 15 MB and ~50 ms after every write: ~500 bytes a note here);
    now its row and two numbers (its project's number, when it was made) beside the row-to-id map every snapshot
    has (~20 bytes a note here)."""
    with changing(tmp_path, 3000) as store:
        peak = publish_peak(store, model)
    assert peak < 3000 * 32, f"{peak / 3000:.0f} bytes a note"


def test_replaced_finds_for_each_note_the_most_alike_newer_note_of_its_project_that_says_it_changes(
    tmp_path: Path, model: StaticModel
) -> None:
    """The notes asked about are scored against every replacing note at once, a block at a time, and filtered there;
    the answer is the rule spelled out note by note."""
    with changing(tmp_path, 1200) as store:
        index = MeaningIndex(None, lambda: model)
        while not index.refresh(store):
            pass
        notes = {note.id: note for note in store.state.iter_notes()}
        snap = index._snapshot
        assert snap is not None
        vectors = {note_id: snap.vectors[row] * snap.scales[row] for note_id, row in index._pos.items()}
        asked = sorted(notes)[::7]
        want = {}
        for old in asked:
            best = max(
                (
                    (float(vectors[old] @ vectors[new]), new)
                    for new, note in notes.items()
                    if "Replaces" in note.body and note.project == notes[old].project and new > old
                ),
                default=(0.0, ""),
            )
            if best[0] >= SAME_DECISION:
                want[old] = best[1]
    assert want and index.replaced(asked) == want


def test_a_first_pass_keeps_no_note_s_view(store: Store, model: StaticModel) -> None:
    """With no cache file, every note is read to be embedded: each view was kept (~400 bytes a note, 40 MB at 100k
    notes) by the pass that needed it for a moment."""
    index = MeaningIndex(None, lambda: model)
    while not index.refresh(store):
        pass
    assert index.warm and len(index._pos) == 3000
    assert not [rec for rec in store.state.notes.values() if rec.view is not False]


def test_texts_embedded_from_two_threads_while_the_row_cache_starts_over_get_their_own_vectors(
    model: StaticModel,
) -> None:
    """The background build and a search embed at once; a row cache starting over under one must not hand the other
    rows of other tokens."""
    words = sorted(t[1:] for t in model.tokenizer.get_vocab() if t.startswith("▁") and t[1:].isalpha())
    texts = [" ".join(words[i : i + 700]) for i in range(0, 3 * ROW_CACHE, 700)]  # restarts the cache often
    expected = model.embed(texts)
    barrier = threading.Barrier(2)
    got: dict[int, list[Any]] = {0: [], 1: []}

    def work(who: int) -> None:
        barrier.wait()
        for _ in range(3):
            got[who].append(model.embed(texts[who::2]))

    threads = [threading.Thread(target=work, args=(who,)) for who in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for who in (0, 1):
        assert len(got[who]) == 3
        for vectors in got[who]:
            assert np.allclose(vectors, expected[who::2], atol=1e-5)


def test_the_model_keeps_no_word_or_row_cache_once_a_pass_is_done(store: Store, tmp_path: Path) -> None:
    """The caches speed a pass over many notes; kept after it, they were memory a long-running tray held for
    nothing (a soaked tray ~15 MB above a fresh one on the same notebook)."""
    shipped = load_default()
    model = StaticModel(shipped.model_id, shipped.table, shipped.tokenizer)  # its own caches, not the shared model's
    index = MeaningIndex(tmp_path / "cache" / "meaning.bin", lambda: model)
    assert not index.refresh(store, budget=1000)
    assert len(model.words) > 1000 and model._rows is not None  # in the middle of a pass: kept
    while not index.refresh(store):
        pass
    assert model.words == {} and model._rows is None and model._slot is None
    model.embed(["a question about crash reports"])  # a search fills them a little, until the next pass ends
    assert model.words and index.refresh(store)
    assert model.words  # a pass with nothing to embed leaves them
