"""The meaning model: static word-piece embeddings (a table of one vector per token of a tokenizer), averaged over a
text's tokens. Offline by construction: the default model is WordLlama's `l2_supercat` table (256 dimensions, 16 MB)
that the `wordllama` wheel ships inside itself; nothing is downloaded, ever.

Optional: needs numpy and tokenizers (`pip install hivenote[meaning]`). `load_default()` says why the
model is unavailable instead of raising, so the rest of Hivenote runs lexically without it.

WordLlama's own loader is not used: it looks for its tokenizer under another folder name than the wheel's and then
tries to download it, and importing the package configures the root logger. Its two files are read here directly.

Memory: the table stays in the wheel's float16 file; the rows a notebook uses are read from it into a bounded
float32 cache and summed there. A float32 copy of the whole table was 33 MB of every
server.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
import struct
import threading
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
WORD_CACHE = 65_536  # words whose token ids are kept (~140 bytes a word: under 10 MB), then the cache starts over
SUM_ROWS = 4096  # token rows gathered and summed at a time (a float32 block of 4 MB at 256 dims)
ROW_CACHE = 8192  # token rows kept in float32 (8 MB at 256 dims, allocated as used), then the cache starts over
_DTYPES = {"F16": "<f2", "F32": "<f4"}  # safetensors dtypes the table may have


class Embedder(Protocol):
    """What the meaning index needs of a model: a stable name (the cache is rebuilt when it changes), unit vectors.
    A model may also say how the index reads it (attributes the index asks with `getattr`, the static model's way
    when absent): `title_weight` (the title embedded again and mixed in), `centre` (the notebook's mean taken out),
    `strip_question` (question words left out of a query), `same_decision` and `named_decision` (the cosines at
    which a note that says a change replaces another, on the model's scale), `coarse` (a big notebook scored in two
    passes, the rows' signs first: measured for the model's vectors)."""

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
    """Mean of the token vectors of a text, as a unit vector. `table` is (vocabulary, dim) in the weights file.

    The tokenizer marks each word on its own (a SentencePiece vocabulary: a word's tokens do not depend on its
    neighbours), so words are tokenized once and their ids kept, as uint16 bytes when the vocabulary fits (a few
    dozen bytes a word): a notebook repeats its words, and a note's ids are then a few dictionary look-ups. New
    words are tokenized one at a time: a batch call spreads the work over a thread pool whose heaps keep the
    memory of thousands of intermediate results.

    Rows are summed in float32. The rows a notebook uses are read once and kept (ROW_CACHE of them, allocated as
    used: a notebook uses a few thousand of the 32,000 tokens); the table itself is neither copied nor kept mapped
    (the float32 copy of the whole table was 33 MB of every server, and a kept mapping adds its pages to it)."""

    model_id: str
    table: Table
    tokenizer: Any  # tokenizers.Tokenizer
    words: dict[str, bytes] = field(default_factory=dict)
    _rows: Any = field(default=None, repr=False)  # (ROW_CACHE, dim) float32: converted rows
    _slot: Any = field(default=None, repr=False)  # token id -> row of _rows, or -1
    _used: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def dim(self) -> int:
        return self.table.dim

    @property
    def _id_type(self) -> str:
        return "<u2" if self.table.rows <= 1 << 16 else "<u4"

    def token_ids(self, texts: list[str]) -> list[bytes]:
        """Each text's token ids, packed as `_id_type`."""
        import numpy as np

        cache, encode, kind = self.words, self.tokenizer.encode, self._id_type
        out = []
        for text in texts:
            parts = []
            for word in text.split():
                ids = cache.get(word)
                if ids is None:
                    if len(cache) >= WORD_CACHE:
                        cache.clear()
                    ids = cache[word] = np.array(encode(word, add_special_tokens=False).ids, dtype=kind).tobytes()
                parts.append(ids)
            out.append(b"".join(parts))
        return out

    def release(self) -> None:
        """Let go of the word cache and the converted rows. They speed a pass over many notes (a notebook repeats its
        words); between passes they only held memory: a tray that wrote 9,600 notes in an hour kept ~15 MB of them
        that a fresh tray on the same notebook did not. The index calls this when a pass leaves nothing to embed.
        A caller in the middle of `embed` keeps the dict and array it was given."""
        with self._lock:
            self.words = {}
            self._rows, self._slot, self._used = None, None, 0

    def _float_rows(self, ids: Any) -> tuple[Matrix, Any]:
        """(float32 rows, where each of `ids` is in them), converting the ones not yet there. Rows once written
        never change: a full cache starts over in a new array, and a caller keeps the one it was given."""
        import numpy as np

        with self._lock:
            if self._slot is None:
                self._slot = np.full(self.table.rows, -1, dtype=np.int32)
            slots = self._slot[ids]
            if (missing := slots < 0).any():
                new = np.unique(ids[missing])
                if self._rows is None or self._used + len(new) > len(self._rows):
                    self._rows = np.empty((max(ROW_CACHE, len(new)), self.dim), dtype=np.float32)
                    self._slot.fill(-1)
                    self._used = 0
                    new = np.unique(ids)
                self.table.read(new, self._rows[self._used : self._used + len(new)])
                self._slot[new] = np.arange(self._used, self._used + len(new), dtype=np.int32)
                self._used += len(new)
                slots = self._slot[ids]
            return self._rows, slots

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        packed = self.token_ids(texts)
        size = np.dtype(self._id_type).itemsize
        ids = np.frombuffer(b"".join(packed), dtype=self._id_type)
        ends = np.cumsum([len(p) // size for p in packed]).tolist()
        block = max(1, min(SUM_ROWS, len(ids)))  # texts without a word (empty titles) are zero vectors
        gathered = np.empty((block, self.dim), dtype=np.float32)  # reused: a fresh array per block is page faults
        text = 0
        for start in range(0, len(ids), block):
            stop = min(start + block, len(ids))
            rows, slots = self._float_rows(ids[start:stop])
            np.take(rows, slots, axis=0, out=gathered[: stop - start])
            at = start
            while at < stop:  # the texts (or parts of a text) in this block
                while ends[text] <= at:
                    text += 1
                end = min(ends[text], stop)
                out[text] += gathered[at - start : end - start].sum(axis=0)
                at = end
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _package_dir(name: str) -> Path:
    """Where an installed package's files are, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(f"the {name} package is not installed (pip install 'hivenote[meaning]')")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class Table:
    """Where a (rows, dim) float16 or float32 tensor lies in a safetensors file (an 8-byte little-endian header
    length, then a JSON header giving each tensor's dtype, shape and byte range). Rows are read from the file on
    demand: the process keeps neither a copy of the table nor a map of it (a kept map's pages count in its RSS)."""

    path: Path
    offset: int
    rows: int
    dim: int
    dtype: str

    @classmethod
    def of(cls, path: Path, tensor: str) -> Table:
        with path.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(length))
        entry = header[tensor]
        begin, end = entry["data_offsets"]
        dtype = _DTYPES[entry["dtype"]]
        rows, dim = (int(n) for n in entry["shape"])
        if end - begin != rows * dim * int(dtype[-1]) or path.stat().st_size < 8 + length + end:
            raise ValueError(f"{tensor} is not a {dtype} matrix of {rows} x {dim} in {path.name}")
        return cls(path, 8 + length + begin, rows, dim, dtype)

    def read(self, ids: Any, out: Matrix) -> None:
        """Rows `ids` (sorted, unique) into `out`, as float32: read from the file a row at a time (a search meets a
        few new tokens; mapping the file for them cost ~0.3 ms, reading them a few microseconds each)."""
        import numpy as np

        row = self.dim * int(self.dtype[-1])
        data = bytearray(len(ids) * row)
        view = memoryview(data)
        with open(self.path, "rb", buffering=0) as fh:
            for i, token in enumerate(ids.tolist()):
                fh.seek(self.offset + token * row)
                got = 0
                while got < row:
                    step = fh.readinto(view[i * row + got : (i + 1) * row])
                    if not step:
                        raise Unavailable(f"{self.path.name} ends inside its table")
                    got += step
        np.copyto(out, np.frombuffer(data, dtype=self.dtype).reshape(len(ids), self.dim))


def load_static(model_id: str, weights: Path, tokenizer_file: Path, tensor: str = "embedding.weight") -> StaticModel:
    """A static model from a safetensors table (rows read as used) and a `tokenizers` JSON file."""
    try:
        import numpy  # noqa: F401
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise Unavailable(f"{exc.name} is not installed (pip install 'hivenote[meaning]')") from None
    try:
        table = Table.of(weights, tensor)
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
