"""Meaning search on real parts: a store on disk, the shipped model (WordLlama's table inside its wheel), the
background index and its cache file; the fusion rules, the `replaces` link on the op line, newer first."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.core.errors import InvalidInput, NoteNotFound
from hivenote.server.core.fold import State
from hivenote.server.core.hlc import wall_ms
from hivenote.server.core.model import Op, decode_op
from hivenote.server.core.search import SIMILAR, SOME_WORDS, _replacements, search_notes
from hivenote.server.meaning import index as index_module
from hivenote.server.meaning import open_index, why
from hivenote.server.meaning.both import Meanings
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import Embedder, StaticModel, load_default
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from tests.support.internals import apply_all
from tests.support.live import serve
from tests.support.models import Counting

NOTES = [
    ("fact", "Pocket-app crashes are reported to Firebase Crashlytics", "Symbol files are uploaded by the build hook."),
    ("fact", "Where the team goes for lunch on Fridays", "The noodle place; book for more than six."),
    ("fact", "Notes from the Monday planning meeting", "Do the release checklist before noon."),
    ("decision", "Orders database is PostgreSQL 16", "Chosen over MySQL for JSONB."),
    ("fact", "The billing service listens on port 8085", "Health check at /healthz."),
    ("fact", "Money is stored as integer cents", "Never floats; rounding only at display time."),
    ("fact", "Do not deploy on Fridays", "Nobody is around to roll back."),
]


WORDS = ["orders", "app", "phone", "port", "money", "the", "where", "8085", "cents", "deploy", "x"]


@pytest.fixture(scope="module")
def model() -> StaticModel:
    return load_default()


def fill(store: Store) -> dict[str, str]:
    notebook = Notebook(store)
    return {title: notebook.remember(kind=k, title=title, body=b).note.id for k, title, b in NOTES}


def warmed(store: Store, model: Embedder, cache: Path | None = None) -> MeaningIndex:
    index = MeaningIndex(cache, lambda: model)
    while not index.refresh(store, budget=3):
        pass
    return index


def test_numpy_is_imported_when_the_indexes_are_opened_before_any_worker_thread_runs(tmp_path: Path) -> None:
    """Not first by the warm-up's thread while the event loop runs: a server died of a segmentation fault that way."""
    probe = (
        "import sys, threading; from pathlib import Path; from hivenote.server.meaning import open_index; "
        f"assert 'numpy' not in sys.modules; open_index(Path({str(tmp_path)!r}), True); "
        "print('numpy' in sys.modules, threading.active_count())"
    )
    said = subprocess.run([sys.executable, "-c", probe], capture_output=True, encoding="utf-8", check=True).stdout
    assert said.split() == ["True", "1"], said


def test_texts_without_a_word_embed_as_zero_vectors(model: StaticModel) -> None:
    """A batch of titles that were all empty (notes known only by an edit whose creation had not arrived) stopped the
    index's warm-up with a ValueError at every step (the fault run, S3 seed 4008)."""
    assert model.embed(["", "   "]).shape == (2, model.dim) and not model.embed(["", "   "]).any()
    assert not model.embed([]).any()
    assert model.embed(["", "deploy the api"])[1].any()


def test_a_meaning_only_match_leads_the_near_list_over_weak_word_leftovers(store: Store, model: StaticModel) -> None:
    ids = fill(store)
    question = "where do the phone client's dying errors land after a release?"
    words_only = Notebook(store).search(question)
    crash = ids[NOTES[0][1]]
    assert words_only.near[0].id != crash  # "release" leads elsewhere
    result = Notebook(store, meaning=warmed(store, model)).search(question)
    assert result.hits == [] and result.total == 0
    assert result.near[0].id == crash and result.reasons[crash] == SIMILAR
    leftovers = [n.id for n in result.near if result.reasons[n.id] == SOME_WORDS]
    assert leftovers, "notes holding some of the words still show, after the meaning match"


def test_identifiers_and_exact_matches_stay_first_and_unchanged(store: Store, model: StaticModel) -> None:
    ids = fill(store)
    notebook = Notebook(store, meaning=warmed(store, model))
    found = notebook.search("8085")
    assert [n.id for n in found.hits] == [ids["The billing service listens on port 8085"]] and found.near == []
    assert notebook.search("which service is on port 8085?").near[0].id == ids[NOTES[4][1]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(WORDS), max_size=3))
def test_exact_hits_are_the_lexical_search_s_exactly(tmp_path: Path, model: StaticModel, words: list[str]) -> None:
    """Meaning never changes which notes match every word, nor their order (with no `replaces` link)."""
    data = tmp_path / "exact"
    with Store(data) as store:
        if not store.state.notes:
            fill(store)
        index = warmed(store, model)
        query = " ".join(words)
        plain = Notebook(store).search(query)
        both = Notebook(store, meaning=index).search(query)
        assert ([n.id for n in both.hits], both.total) == ([n.id for n in plain.hits], plain.total)
        if plain.hits or not query.strip():
            assert both.near == plain.near


def test_a_search_while_the_index_warms_answers_lexically(store: Store, model: StaticModel) -> None:
    fill(store)
    gate = threading.Event()

    def slow_load() -> Embedder:
        assert gate.wait(30)
        return model

    index = MeaningIndex(None, slow_load)
    builder = threading.Thread(target=lambda: index.refresh(store, budget=1000))
    builder.start()
    question = "where do reports of the mobile client dying go?"
    notebook = Notebook(store, meaning=index)
    try:
        while_warming = notebook.search(question)
    finally:
        gate.set()  # the builder never waits past the test
        builder.join(30)
    assert [n.id for n in while_warming.near] == [n.id for n in Notebook(store).search(question).near]
    assert set(while_warming.reasons.values()) <= {SOME_WORDS}
    assert index.warm and SIMILAR in notebook.search(question).reasons.values()


def test_the_cache_is_reused_and_rebuilt_when_the_model_changes(store: Store, model: StaticModel) -> None:
    fill(store)
    cache = store.data_dir / "cache" / "meaning.bin"
    first = Counting(model, "model-a")
    warmed(store, first, cache)
    assert cache.is_file() and first.embedded == 2 * len(NOTES)  # whole text and title
    again = Counting(model, "model-a")
    warmed(store, again, cache)
    assert again.embedded == 0  # a restart embeds nothing
    Notebook(store).update(next(iter(store.state.notes)), body="changed")
    after_edit = Counting(model, "model-a")
    warmed(store, after_edit, cache)
    assert after_edit.embedded == 2  # only the changed note
    other = Counting(model, "model-b")
    index = warmed(store, other, cache)
    assert other.embedded == 2 * len(NOTES) and index.scores("crash reports") is not None
    assert json.loads(cache.read_bytes().split(b"\n")[1])["model"] == "model-b"


def test_a_write_does_not_write_the_cache_file_again_until_a_while_has_passed(
    store: Store, model: StaticModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole file was written again after every write (at 100k notes 100 MB a note written). Once warm it is
    written at most every WRITE_EVERY_S; a note written meanwhile is embedded again at the next start."""
    ids = fill(store)
    cache = store.data_dir / "cache" / "meaning.bin"
    index = warmed(store, Counting(model, "model-a"), cache)
    written = cache.read_bytes()
    notebook = Notebook(store, meaning=index)
    notebook.update(ids["Do not deploy on Fridays"], body="Nobody is around to roll back, and the pager is quiet.")
    while not index.refresh(store):
        pass
    assert cache.read_bytes() == written
    restart = Counting(model, "model-a")
    warmed(store, restart, cache)  # (and writes the file, with it)
    assert restart.embedded == 2  # the note written since, alone
    written = cache.read_bytes()
    monkeypatch.setattr(index_module, "WRITE_EVERY_S", 0.0)
    notebook.update(ids["Do not deploy on Fridays"], body="Nobody is around on Fridays to roll back.")
    while not index.refresh(store):
        pass
    assert cache.read_bytes() != written
    restart = Counting(model, "model-a")
    warmed(store, restart, cache)
    assert restart.embedded == 0


def test_a_server_that_stops_writes_the_notes_embedded_since_the_cache_file_was_last_written(
    tmp_path: Path, model: StaticModel
) -> None:
    """Between two writes of the cache file (WRITE_EVERY_S) a stopping server lost the notes embedded since: every
    stop, a tray's Stop or a restart, left them to be embedded again at the next start."""
    data = tmp_path / "data"
    with serve(data) as running:
        meanings = running.notebook.meaning
        assert isinstance(meanings, Meanings)
        index = meanings.static
        assert index.cache is not None
        notebook = Notebook(running.store, meaning=index)
        fill(running.store)
        while not index.refresh(running.store):  # warm: the file is written, then not again for a while
            pass
        written = index.cache.read_bytes()
        notebook.remember(kind="fact", title="Standup moved to 9:45", body="The whole team, on the video call.")
        while not index.refresh(running.store):
            pass
        assert index.cache.read_bytes() == written
    with Store(data) as store:
        restart = Counting(model, model.model_id)
        warmed(store, restart, data / "cache" / "meaning.bin")
    assert restart.embedded == 0


def test_a_restart_reads_no_note_the_cache_file_has_as_it_is_and_a_write_only_that_note(
    tmp_path: Path, model: StaticModel
) -> None:
    """The first pass after a start took every note's view to compare it with the cache file (at 100k notes ~1.5 s of
    CPU beside the first searches, and 100k views kept for good). A note whose mark is the one the file has is taken
    as the file has it; after that, a pass looks at the notes an op touched, not at every note."""
    data = tmp_path / "data"
    cache = data / "cache" / "meaning.bin"
    with Store(data) as store:
        ids = fill(store)
        expected = warmed(store, Counting(model, "model-a"), cache).scores("crash reports")
    with Store(data) as store:
        counting = Counting(model, "model-a")
        index = warmed(store, counting, cache)
        assert counting.embedded == 0
        assert [note_id for note_id, record in store.state.notes.items() if record.view is not False] == []
        assert index.scores("crash reports") == expected
        counting.embedded = 0  # the question's own vector
        changed = ids["Do not deploy on Fridays"]
        Notebook(store).update(changed, body="Nobody is around to roll back, and the pager is quiet.")
        before = {note_id for note_id, record in store.state.notes.items() if record.view is not False}
        while not index.refresh(store, budget=3):
            pass
        after = {note_id for note_id, record in store.state.notes.items() if record.view is not False}
        assert after - before <= {changed} and counting.embedded == 2


def test_after_the_store_folds_again_a_pass_looks_at_every_note_and_reads_none_whose_ops_are_the_same(
    store: Store, model: StaticModel
) -> None:
    """A failed write makes the store fold the log again into a new state: the state's change feed the index followed
    is gone with the old one, so the next pass looks at every note of the new one, by its mark."""
    fill(store)
    counting = Counting(model, "model-a")
    index = warmed(store, counting, None)
    expected = index.scores("crash reports")
    counting.embedded = 0
    store._reload()
    while not index.refresh(store, budget=3):
        pass
    assert [note_id for note_id, record in store.state.notes.items() if record.view is not False] == []
    assert counting.embedded == 0 and index.scores("crash reports") == expected
    counting.embedded = 0
    Notebook(store).remember(kind="fact", title="Crash dumps are kept for thirty days", body="Then deleted.")
    while not index.refresh(store, budget=3):
        pass
    assert counting.embedded == 2  # the new state's change feed: the new note
    got = index.scores("crash reports")
    assert got is not None and expected is not None and set(expected) < set(got)


def as_format_1(cache: Path, *, marks: bool) -> None:
    """Rewrite the cache file as a Hivenote before int8 vectors wrote it: float32 vectors, then (with `marks`) the
    notes' numbers; without them, as one before the marks wrote it."""
    _, head, rest = cache.read_bytes().split(b"\n", 2)
    header = json.loads(head)
    n, dim = len(header["ids"]), header["dim"]
    codes = np.frombuffer(rest, dtype=np.int8, count=n * dim).reshape(n, dim)
    scales = np.frombuffer(rest, dtype="<f4", count=n, offset=n * dim)
    vectors = (codes * scales[:, None]).astype("<f4").tobytes()
    numbers = rest[n * (dim + 4) :]
    if not marks:
        header = {key: header[key] for key in ("model", "dim", "ids", "digests")}
    cache.write_bytes(b"HNMEAN1\n" + json.dumps(header).encode() + b"\n" + vectors + (numbers if marks else b""))


@pytest.mark.parametrize("marks", [True, False], ids=["with marks", "before the marks"])
def test_a_cache_file_of_before_is_used_as_before_and_written_anew(
    store: Store, model: StaticModel, marks: bool
) -> None:
    """The upgrades: a file of float32 vectors spares every embedding and gives the same scores, and is written again
    as int8 vectors; one without the notes' marks and kept data too (each note is then read and its text compared,
    as before)."""
    fill(store)
    cache = store.data_dir / "cache" / "meaning.bin"
    expected = warmed(store, Counting(model, "model-a"), cache).scores("crash reports")
    as_format_1(cache, marks=marks)
    counting = Counting(model, "model-a")
    index = warmed(store, counting, cache)
    assert counting.embedded == 0
    assert index.scores("crash reports") == expected
    assert cache.read_bytes().startswith(b"HNMEAN2\n")
    assert "nodes" in json.loads(cache.read_bytes().split(b"\n", 2)[1])


def test_a_damaged_cache_is_rebuilt(store: Store, model: StaticModel) -> None:
    fill(store)
    cache = store.data_dir / "cache" / "meaning.bin"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(b"HNMEAN1\n{not json")
    counting = Counting(model, "model-a")
    warmed(store, counting, cache)
    assert counting.embedded == 2 * len(NOTES)


def test_the_setting_turns_it_off(tmp_path: Path) -> None:
    assert open_index(tmp_path, enabled=False) is None
    assert isinstance(open_index(tmp_path, enabled=True), Meanings)


# -- the replaces link ----------------------------------------------------------------------------------------------


def test_a_replaced_note_follows_the_note_that_replaces_it(store: Store) -> None:
    notebook = Notebook(store)
    old = notebook.remember(kind="decision", title="Background jobs run on Celery", project="shop").note
    other = notebook.remember(kind="fact", title="Celery workers log to stdout", project="shop").note
    # A unique prefix is enough (the first 10 characters are the millisecond: notes made in the same one share them).
    new = notebook.remember(kind="decision", title="Jobs use Dramatiq", project="shop", replaces=old.id[:16]).note
    assert new.replaces == old.id
    found = notebook.search("celery")
    assert [n.id for n in found.hits] == [other.id, new.id, old.id] or [n.id for n in found.hits][-2:] == [
        new.id,
        old.id,
    ]
    assert found.replaced_by == {old.id: new.id} and found.reasons[new.id] == f"replaces {old.id}"
    assert found.total == 2  # the replacing note is shown with the hits, not counted as one
    notebook.forget(new.id)
    assert notebook.search("celery").replaced_by == {}  # a trashed note replaces nothing
    with pytest.raises(InvalidInput):
        notebook.update(old.id, replaces=old.id)
    with pytest.raises(NoteNotFound):
        notebook.remember(kind="fact", title="x", replaces="no-such-note")


def test_the_link_rides_beside_the_fields_where_older_readers_ignore_it(store: Store) -> None:
    notebook = Notebook(store)
    old = notebook.remember(kind="decision", title="Use Loki for logs").note
    new = notebook.remember(kind="decision", title="Use Datadog for logs").note
    notebook.update(new.id, replaces=old.id)
    assert store.shard_path is not None
    line = store.shard_path.read_bytes().splitlines()[-1]
    raw = json.loads(line)
    assert raw["replaces"] == old.id and "replaces" not in raw["fields"]
    assert raw["fields"] == {"kind": "decision"}  # a field every reader knows: an older one sees an edit of it
    assert decode_op(line).data["fields"]["replaces"] == old.id
    del raw["replaces"]  # what a reader that does not know the key works with
    assert decode_op(json.dumps(raw)).data["fields"] == {"kind": "decision"}
    dropped = notebook.update(new.id, replaces=None)
    assert dropped.replaces is None and notebook.get(new.id).title == "Use Datadog for logs"


@pytest.mark.parametrize("same_ms", [False, True], ids=["apart", "in-one-millisecond"])
def test_a_newer_note_that_says_it_replaces_one_comes_first_without_a_link(
    tmp_path: Path, model: StaticModel, same_ms: bool
) -> None:
    # Notes written within one millisecond (a script, an agent's batch) are still ordered: by the clock's counter.
    with Store(tmp_path / "data", now_ms=(lambda: 1_790_000_000_000) if same_ms else wall_ms) as store:
        _newer_first_without_a_link(store, model)


def _newer_first_without_a_link(store: Store, model: StaticModel) -> None:
    notebook = Notebook(store)
    old = notebook.remember(kind="decision", title="Deploys are done by Argo CD", project="infra").note
    notebook.remember(kind="fact", title="Argo CD dashboards are at argo.internal", project="blog")
    new = notebook.remember(
        kind="decision", title="Deploys switch from Argo CD to Flux", body="We no longer run Argo CD.", project="infra"
    ).note
    notebook.meaning = warmed(store, model)
    found = notebook.search("how are services deployed?")
    ids = [n.id for n in found.near]
    assert new.id in ids and (old.id not in ids or ids.index(new.id) < ids.index(old.id))
    exact = notebook.search("argo")
    assert [n.id for n in exact.hits].index(new.id) < [n.id for n in exact.hits].index(old.id)
    assert exact.replaced_by.get(old.id) == new.id
    notebook.meaning = None
    # Words alone guess it too: "deploys" is in those two titles and in no other note.
    assert search_notes(store.state, "argo").replaced_by == {old.id: new.id}


@pytest.mark.parametrize(
    ("older", "newer", "query"),
    [
        ("Web unit tests run on Jest", "Web unit tests: dropped Jest for Vitest", "jest"),
        ("Uptime is checked by Pingdom", "Uptime is checked by Better Stack from now on", "uptime"),
        ("Product pages are cached for 10 minutes", "Product page cache time cut to 60 seconds", "product"),
        ("Support tickets are tracked in Zendesk", "Support tickets: Zendesk retired, tracked in Linear", "tickets"),
        ("The newsletter is sent every Monday", "Going forward, the newsletter is sent every Friday", "newsletter"),
        ("Seller payouts run monthly", "Seller payouts updated to weekly", "payouts"),
        ("Dependabot opens dependency update PRs", "Adopted Renovate over Dependabot for dependency PRs", "dependabot"),
    ],
)
def test_a_newer_note_that_says_it_changes_an_older_one_in_other_words_comes_first(
    store: Store, model: StaticModel, older: str, newer: str, query: str
) -> None:
    """A change said in other words than "replaces" or "moves from" ("dropped X for Y", "cut to", "going forward",
    "adopted") left the older note first (3 of 14 such pairs in bench/retrieval/fresh_newer.py)."""
    notebook = Notebook(store)
    old = notebook.remember(kind="decision", title=older, project="shop").note
    notebook.remember(kind="fact", title=f"{older} (the docs say so too)", project="blog")
    new = notebook.remember(kind="decision", title=newer, project="shop").note
    notebook.meaning = warmed(store, model)
    found = notebook.search(query)
    assert found.replaced_by.get(old.id) == new.id
    listed = [n.id for n in (*found.hits, *found.near)]
    assert listed.index(new.id) < listed.index(old.id)


@pytest.mark.parametrize("third", [False, True], ids=["named-by-them-alone", "named-by-a-third-note"])
def test_a_change_naming_what_only_the_older_note_names_replaces_it_though_they_mean_less_alike(
    store: Store, model: StaticModel, third: bool
) -> None:
    """To a static model "Dropped Jest for Vitest" means little like "Web unit tests run on Jest" (the names weigh
    most); that both titles name Jest and no other note does says they are about one thing. A third note naming Jest
    takes that away, and then the likeness alone decides (too little here)."""
    notebook = Notebook(store)
    old = notebook.remember(kind="decision", title="Web unit tests run on Jest", project="web").note
    if third:
        notebook.remember(kind="fact", title="Snapshot files of Jest are committed", project="web")
    new = notebook.remember(kind="decision", title="Dropped Jest for Vitest in the dashboard", project="web").note
    notebook.meaning = warmed(store, model)
    found = notebook.search("jest")
    assert found.replaced_by == ({} if third else {old.id: new.id})
    hits = [n.id for n in found.hits]
    assert hits.index(new.id) < hits.index(old.id)  # the newer first either way: recency among equals


def test_a_server_with_the_setting_off_searches_by_words_only_and_doctor_says_why(tmp_path: Path) -> None:
    with serve(tmp_path / "off", meaning=False) as off:
        assert off.notebook.meaning is None
    with serve(tmp_path / "on") as on:
        assert isinstance(on.notebook.meaning, Meanings)
    assert why(False) == (False, "off: the 'meaning' setting is off (settings.json or HIVENOTE_MEANING turns it on)")
    assert why(True)[0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["A", "B", "C", "D"]),
            st.sampled_from(["set", "link", "unlink", "trash", "restore"]),
            st.sampled_from(["A", "B", "C", "D"]),
        ),
        max_size=25,
    )
)
def test_links_kept_between_searches_equal_links_worked_out_afresh(steps: list[tuple[str, str, str]]) -> None:
    """The replaces links are brought up to date from the fold's change feed; after any writes they are what a
    fresh fold of the same ops gives."""
    kept, ops = State(), []
    for seq, (note, action, other) in enumerate(steps, start=1):
        if action in ("trash", "restore"):
            op = Op("n1", seq, seq, 0, f"note.{action}", {"id": note})
        else:
            fields: dict[str, Any] = {"kind": "decision"}
            if action != "set":
                fields["replaces"] = other if action == "link" else None
            op = Op("n1", seq, seq, 0, "note.set", {"id": note, "fields": fields})
        ops.append(op)
        kept.apply(op)
        _replacements(kept)  # between writes, as searches would
    fresh = State()
    apply_all(fresh, ops)
    assert _replacements(kept) == _replacements(fresh)


def test_the_model_is_loaded_once_per_process() -> None:
    """The tray stops and starts its server; every start loading the table again grew it by the table's size."""
    assert load_default() is load_default()


@pytest.mark.parametrize("craft", ["another dimension", "deeply nested header", "header not an object"])
def test_a_crafted_cache_file_is_rebuilt_not_taken_and_not_fatal(store: Store, model: StaticModel, craft: str) -> None:
    """Derived data that fails to load is built again: a file of another dimension (rows that do not fit the model's)
    or a header JSON cannot read turned meaning search off at every start, and was never rebuilt."""
    fill(store)
    cache = store.data_dir / "cache" / "meaning.bin"
    cache.parent.mkdir(parents=True, exist_ok=True)
    with store.reading() as state:
        notes = [note for note_id in state.notes if (note := state.note(note_id)) is not None]
    ids, n = [note.id for note in notes], len(notes)
    if craft == "another dimension":  # the notes' own digests: their rows would be taken as they are
        dim = model.dim // 2
        digests = [f"{index_module._digest(note):016x}" for note in notes]
        header = {"model": "model-a", "dim": dim, "ids": ids, "digests": digests}
        header |= {"nodes": [None] * n, "projects": [None] * n}
        numbers = np.zeros(n, dtype=list(index_module._NUMBERS))
        body = bytes(n * dim) + np.ones(n, dtype="<f4").tobytes() + numbers.tobytes()
        cache.write_bytes(index_module.MAGIC + json.dumps(header).encode() + b"\n" + body)
    elif craft == "deeply nested header":
        cache.write_bytes(index_module.MAGIC + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    else:
        cache.write_bytes(index_module.MAGIC + b'["model-a"]\n')
    counting = Counting(model, "model-a")
    index = warmed(store, counting, cache)
    assert index.problem is None and index.warm
    assert counting.embedded == 2 * len(NOTES)
