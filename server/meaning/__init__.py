"""Meaning search: a derived index of note vectors beside the lexical one (see index.py), made from a static
embedding model shipped inside a package (model.py). Optional: without its packages, or with the `meaning` setting
off, search is lexical only, as before.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .index import MeaningIndex

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
    return True, "on: notes are found by meaning too (a model shipped in the wordllama package; nothing downloaded)"


def open_index(data_dir: Path, enabled: bool) -> MeaningIndex | None:
    """The index to warm in the background, or None when meaning search is off here. Loads nothing yet: the
    model is read on the first `refresh`, off the start-up path."""
    if not why(enabled)[0]:
        return None
    from .index import MeaningIndex
    from .model import load_default

    return MeaningIndex(data_dir / "cache" / CACHE_NAME, load_default)
