"""The sentence model: all-MiniLM-L6-v2 (a 6-layer sentence transformer, Apache-2.0) run by onnxruntime on one
thread, from an encoder graph derived here from the model's weights (bert.py) and kept in the model's cache folder.

Loading (`load_sentence`) finds the files (sources.py: a package, a folder, a download made before), builds the
graph once (a few seconds; it then loads in ~0.2 s), and reads the tokenizer. It never downloads: the index's worker
asks `sources.download` first, where the settings allow it.

A text is cut at MAX_TOKENS word pieces (the model was trained on 256; a note's first ~180 words say what it is
about). Texts are embedded in batches of similar length (padding costs as much as a token).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import sources
from .bert import GRAPH_VERSION, HIDDEN
from .model import Unavailable

if TYPE_CHECKING:
    from .model import Matrix

MAX_TOKENS = 256
EMBED_BATCH = 16  # texts per run: as fast as 64 on short notes, and its working memory a quarter (docs/BENCHMARKS.md)
RUN_TOKENS = 2048  # padded word pieces per run at most (16 notes of 128, or 8 of the longest, 256)
GRAPH = f"encoder-int8-v{GRAPH_VERSION}.onnx"
# The cosines at which a newer note that says it replaces something is taken to replace an older one, on this model's
# scale (the static model's are in index.py): measured on bench/retrieval's superseded pairs.
SAME_DECISION = 0.6
NAMED_DECISION = 0.45


@dataclass
class SentenceModel:
    """An `Embedder` (model.py): unit vectors of HIDDEN dimensions."""

    model_id: str
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    source: str
    dim: int = HIDDEN
    title_weight: float = 0.0  # the title is in the text it reads; a second pass for it costs as much again
    centre: bool = False  # the notebook's mean is not taken out (it changed nothing here, and cost one-word questions)
    strip_question: bool = True  # a question is read without its question words, as by the static model
    same_decision: float = SAME_DECISION
    named_decision: float = NAMED_DECISION
    coarse: bool = True  # its signs keep a question's closest notes (index.py COARSE_SHARE)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _options: Any = field(default=None, repr=False)  # onnxruntime.RunOptions for the next run (`release`)

    def embed(self, texts: list[str]) -> Matrix:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = self.tokenizer.encode_batch(texts)
        lengths = [max(1, len(e.ids)) for e in encoded]
        with self._lock:  # one run at a time: the session has one thread, and two would each take a core
            for rows in batches(lengths):
                longest = max(lengths[i] for i in rows)
                ids = np.zeros((len(rows), longest), dtype=np.int64)
                mask = np.zeros((len(rows), longest), dtype=np.int64)
                for j, i in enumerate(rows):
                    got = encoded[i].ids
                    ids[j, : len(got)] = got
                    mask[j, : len(got)] = 1
                out[rows] = self.session.run(None, {"input_ids": ids, "attention_mask": mask}, self._options)[0]
                self._options = None
        return out

    def release(self) -> None:
        """Hand back the memory onnxruntime's arena keeps (the largest batch's working memory) at the end of the next
        run: the index calls this when a pass leaves nothing to embed; a question then needs little of it."""
        import onnxruntime as ort

        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._options = options


def batches(lengths: list[int]) -> list[list[int]]:
    """The texts' indexes in runs of similar length (padding costs as much as a token): at most EMBED_BATCH texts,
    and at most RUN_TOKENS padded tokens a run, which bounds the arena's working memory."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    runs: list[list[int]] = []
    for i in order:
        if runs and len(runs[-1]) < EMBED_BATCH and lengths[i] * (len(runs[-1]) + 1) <= RUN_TOKENS:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _session(path: Path) -> Any:
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # else it writes a device id and an event queue under ~
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # a core is left to the server
    options.inter_op_num_threads = 1
    # The arena on: without it every activation was a block of its own, and with the mmap threshold the server sets
    # (heap.py) each one a mapping: 14 notes a second, two thirds of it in the kernel, against 54 (docs/BENCHMARKS.md).
    # Its size is bounded by RUN_TOKENS and handed back by `release`.
    options.enable_cpu_mem_arena = True
    options.enable_mem_pattern = False  # planned for one shape; batches differ in length
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    provider = ("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})  # no doubling past the need
    return ort.InferenceSession(str(path), options, providers=[provider])


def missing() -> list[str]:
    """The packages the sentence model needs that are not installed."""
    import importlib.util

    return [name for name in ("numpy", "tokenizers", "onnxruntime") if importlib.util.find_spec(name) is None]


def build(source: sources.Source, graph: Path) -> None:
    """The encoder graph from the source's weights, written to `graph`."""
    import importlib.util

    if importlib.util.find_spec("onnx") is None:
        raise Unavailable("the onnx package is not installed (pip install 'hivenote[meaning]')")
    from .bert import build_graph, weights_of

    weights = weights_of(source.read(sources.WEIGHTS))
    blob = build_graph(weights, quantize=True)
    del weights
    sources.save_derived(graph, blob)


def load_sentence(source: sources.Source) -> SentenceModel:
    """The model from `source`, building its graph first when none was built from these weights."""
    gone = missing()
    if gone:
        raise Unavailable(f"{', '.join(gone)} not installed (pip install 'hivenote[meaning]')")
    from tokenizers import Tokenizer

    folder = sources.home()
    graph = folder / GRAPH
    tokenizer_file = folder / sources.TOKENIZER.name
    try:
        if not tokenizer_file.is_file():
            sources.save_derived(tokenizer_file, bytes(source.read(sources.TOKENIZER)))
        else:
            sources.check(sources.TOKENIZER, tokenizer_file)
        if not graph.is_file():
            build(source, graph)
        try:
            session = _session(graph)
        except Exception:  # a damaged graph file (derived data): built again, once
            graph.unlink(missing_ok=True)
            build(source, graph)
            session = _session(graph)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except OSError as exc:
        raise Unavailable(f"the sentence model's files could not be written in {folder}: {exc}") from None
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_TOKENS)
    model_id = f"{sources.NAME}-{sources.WEIGHTS.sha256[:12]}-int8-v{GRAPH_VERSION}"
    return SentenceModel(model_id, session, tokenizer, source.describe())
