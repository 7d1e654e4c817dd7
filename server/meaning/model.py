"""The meaning model: static word-piece embeddings (a table of one vector per token of a tokenizer), averaged over a
text's tokens. Offline by construction: the default model is WordLlama's `l2_supercat` table (256 dimensions, 16 MB)
that the `wordllama` wheel ships inside itself; nothing is downloaded, ever.

Optional: needs numpy, tokenizers and safetensors (`pip install hivenote[meaning]`). `load_default()` says why the
model is unavailable instead of raising, so the rest of Hivenote runs lexically without it.

WordLlama's own loader is not used: it looks for its tokenizer under another folder name than the wheel's and then
tries to download it, and importing the package configures the root logger. Its two files are read here directly.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.search import QUERY_NOISE

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

DEFAULT_MODEL = "wordllama-l2_supercat-256"
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
# Words that carry no meaning in a question ("where do we ...?"): averaged in, they pull every question alike.
QUESTION_WORDS = QUERY_NOISE | frozenset(
    """
    do get gets i into me my no not than their them then there they us we whom would you your
    """.split()  # noqa: SIM905
)
_WORD = re.compile(r"\S+")
WORD_CACHE = 400_000  # words whose token ids are kept (a few tens of MB at most)


class Embedder(Protocol):
    """What the meaning index needs of a model: a stable name (the cache is rebuilt when it changes), unit vectors."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> Matrix: ...


class Unavailable(Exception):
    """Why meaning search cannot run here (a missing package, a damaged model file); said by `hivenote doctor`."""


def question_text(query: str) -> str:
    """The query without question words (what is left says what is asked); the query itself when nothing is left."""
    kept = [w for w in _WORD.findall(query) if w.lower().strip("?!.,;:") not in QUESTION_WORDS]
    return " ".join(kept) or query


@dataclass
class StaticModel:
    """Mean of the token vectors of a text, as a unit vector. `table` is (vocabulary, dim).

    The tokenizer marks each word on its own (a SentencePiece vocabulary: a word's tokens do not depend on its
    neighbours), so words are tokenized once and their ids kept: a notebook repeats its words, and a note's ids
    are then a few dictionary look-ups."""

    model_id: str
    table: npt.NDArray[np.floating[Any]]
    tokenizer: Any  # tokenizers.Tokenizer
    words: dict[str, list[int]] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        cache = self.words
        split = [text.split() for text in texts]
        unknown = list({w for words in split for w in words if w not in cache})
        if unknown:
            if len(cache) + len(unknown) > WORD_CACHE:
                cache.clear()
            for word, enc in zip(unknown, self.tokenizer.encode_batch(unknown, add_special_tokens=False), strict=True):
                cache[word] = enc.ids
        return [[i for w in words for i in cache[w]] for words in split]

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        table = self.table
        for row, ids in enumerate(self.token_ids(texts)):
            if ids:
                vector = table[ids].mean(axis=0)  # a float32 table: a plain gather and sum (no cast per text)
                norm = float(np.linalg.norm(vector))
                if norm > 0:
                    out[row] = vector / norm
        return out


def _package_dir(name: str) -> Path:
    """Where an installed package's files are, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(f"the {name} package is not installed (pip install 'hivenote[meaning]')")
    return Path(next(iter(spec.submodule_search_locations)))


def load_static(model_id: str, weights: Path, tokenizer_file: Path, tensor: str = "embedding.weight") -> StaticModel:
    """A static model from a safetensors table and a `tokenizers` JSON file."""
    try:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise Unavailable(f"{exc.name} is not installed (pip install 'hivenote[meaning]')") from None
    try:
        table = np.ascontiguousarray(load_file(str(weights))[tensor], dtype=np.float32)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # a damaged or missing file: say it, run lexically
        raise Unavailable(f"the model files could not be read: {exc}") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return StaticModel(model_id, table, tokenizer)


@functools.cache
def load_default() -> StaticModel:
    """The shipped model, or `Unavailable` saying why not. Loaded once per process: the tray stops and starts its
    server, and each start loading the table again grew the tray by the table's size (a failure is not kept)."""
    root = _package_dir("wordllama")
    weights, tokenizer = root.joinpath(*_WEIGHTS), root.joinpath(*_TOKENIZER)
    if not weights.is_file() or not tokenizer.is_file():
        raise Unavailable(f"the wordllama package has no bundled model at {weights.parent}")
    size = weights.stat().st_size
    # The id names the table by its size and first bytes: another release of the weights rebuilds the cache.
    with weights.open("rb") as fh:
        head = hashlib.blake2b(fh.read(1 << 16), digest_size=6).hexdigest()
    return load_static(f"{DEFAULT_MODEL}-{size}-{head}", weights, tokenizer)
