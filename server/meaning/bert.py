"""A BERT sentence encoder (all-MiniLM-L6-v2's shape: 6 layers of 384, 12 heads) as an ONNX graph built here from
the model's own `model.safetensors`, so that the weights are the only thing taken from outside and the graph a user's
machine runs is the one the tests run. The Hub's folder also has ONNX exports; a package that ships the weights does
not, and one graph for every source keeps the vectors the same whichever source a machine has.

Built once per weights file (a few seconds, with the `onnx` package) and kept beside the weights; onnxruntime loads
it. The graph takes token ids and an attention mask and gives the mean of the last layer's token vectors over the
mask, as a unit vector (sentence-transformers' "mean pooling" and "normalize").

The weights of the six layers' matrices may be stored as int8 with a scale per output column and run through
onnxruntime's dynamic quantization (`MatMulInteger`): measured on this model, a third of the time and a quarter of the
memory of float32, at a cosine of 0.99+ to the float32 vectors (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import json
import math
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

GRAPH_VERSION = 1  # of this builder: another version builds the graph again
LAYERS, HIDDEN, HEADS = 6, 384, 12
EPSILON = 1e-12
_TYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def weights_of(data: bytes | bytearray) -> dict[str, Any]:
    """Every tensor of a safetensors file's bytes (an 8-byte little-endian header length, a JSON header giving each
    tensor's dtype, shape and byte range, then the bytes) as numpy arrays over those bytes."""
    import numpy as np

    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    out: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = _TYPES.get(entry["dtype"])
        if dtype is None or not 0 <= begin <= end <= len(body):
            raise ValueError(f"tensor {name} is not readable ({entry['dtype']}, bytes {begin}-{end})")
        out[name.removeprefix("bert.")] = np.frombuffer(body[begin:end], dtype=dtype).reshape(entry["shape"])
    return out


def _int8(scaled: Any) -> Any:
    """`scaled` (a float array of its own, changed in place) rounded and clipped to int8: one float copy at a time
    (the word table's is 47 MB)."""
    import numpy as np

    np.rint(scaled, out=scaled)
    np.clip(scaled, -127, 127, out=scaled)
    return scaled.astype(np.int8)


def build_graph(weights: dict[str, Any], quantize: bool) -> bytes:
    """The encoder as a serialized ONNX model (opset 17)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    counter = iter(range(1 << 30))

    def name(hint: str) -> str:
        return f"{hint}_{next(counter)}"

    def const(hint: str, value: Any) -> str:
        key = name(hint)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), key))
        return key

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def w(key: str) -> Any:
        return np.asarray(weights[key], dtype=np.float32)

    def linear(x: str, prefix: str) -> str:
        matrix = w(f"{prefix}.weight").T  # (in, out)
        bias = const("bias", w(f"{prefix}.bias"))
        if not quantize:
            return node("Add", [node("MatMul", [x, const("w", matrix)]), bias])
        # Symmetric int8 per output column; activations quantized per call (uint8, dynamic range).
        scale = np.maximum(np.abs(matrix).max(axis=0), 1e-12) / 127.0
        codes = _int8(matrix / scale)
        xq, xscale, xzero = (name("xq"), name("xscale"), name("xzero"))
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [xq, xscale, xzero]))
        product = node("MatMulInteger", [xq, const("wq", codes), xzero, const("wzero", np.int8(0))])
        scaled = node("Mul", [node("Cast", [product], to=TensorProto.FLOAT), xscale])
        return node("Add", [node("Mul", [scaled, const("wscale", scale.astype(np.float32))]), bias])

    def norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, const("gamma", w(f"{prefix}.weight")), const("beta", w(f"{prefix}.bias"))],
            axis=-1,
            epsilon=EPSILON,
        )

    head = HIDDEN // HEADS
    ids, mask = "input_ids", "attention_mask"  # (batch, length) int64 each
    length = node("Shape", [ids], start=1, end=2)  # (1,): the batch's length
    table = const("positions", w("embeddings.position_embeddings.weight"))
    positions = node("Slice", [table, const("start", np.array([0], dtype=np.int64)), length])  # its first rows
    table = w("embeddings.word_embeddings.weight")
    if quantize:  # int8 rows and a scale a row: 12 MB, not 47
        scales = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
        codes = np.empty(table.shape, dtype=np.int8)
        for start in range(0, len(table), 4096):  # a block at a time: a float copy of the whole table is 47 MB
            codes[start : start + 4096] = _int8(table[start : start + 4096] / scales[start : start + 4096, None])
        rows = node("Cast", [node("Gather", [const("words", codes), ids])], to=TensorProto.FLOAT)
        words = node(
            "Mul",
            [
                rows,
                node(
                    "Unsqueeze",
                    [
                        node("Gather", [const("word_scales", scales.astype(np.float32)), ids]),
                        const("at", np.array([2], dtype=np.int64)),
                    ],
                ),
            ],
        )
    else:
        words = node("Gather", [const("words", table), ids])
    x = node("Add", [words, positions])
    x = norm(
        node("Add", [x, const("segment", w("embeddings.token_type_embeddings.weight")[0])]), "embeddings.LayerNorm"
    )
    maskf = node("Cast", [mask], to=TensorProto.FLOAT)
    # (batch, 1, 1, length): 0 where a token is, a large negative where padding is.
    blocked = node("Mul", [node("Sub", [const("one_f", np.float32(1)), maskf]), const("neg", np.float32(-1e4))])
    blocked = node("Unsqueeze", [blocked, const("axes", np.array([1, 2], dtype=np.int64))])
    split = const("heads_shape", np.array([0, 0, HEADS, head], dtype=np.int64))
    merge = const("hidden_shape", np.array([0, 0, HIDDEN], dtype=np.int64))
    scale = const("scale", np.float32(1 / math.sqrt(head)))
    for layer in range(LAYERS):
        pre = f"encoder.layer.{layer}"

        def heads(prefix: str, perm: list[int], x: str = x, pre: str = pre) -> str:
            projected = linear(x, f"{pre}.attention.self.{prefix}")
            return node("Transpose", [node("Reshape", [projected, split])], perm=perm)

        q, k, v = heads("query", [0, 2, 1, 3]), heads("key", [0, 2, 3, 1]), heads("value", [0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), blocked])
        context = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [context], perm=[0, 2, 1, 3]), merge])
        x = norm(
            node("Add", [x, linear(context, f"{pre}.attention.output.dense")]), f"{pre}.attention.output.LayerNorm"
        )
        h = linear(x, f"{pre}.intermediate.dense")
        erf = node("Erf", [node("Mul", [h, const("rsqrt2", np.float32(1 / math.sqrt(2)))])])
        h = node(
            "Mul", [node("Mul", [h, const("half", np.float32(0.5))]), node("Add", [erf, const("one_g", np.float32(1))])]
        )
        x = norm(node("Add", [x, linear(h, f"{pre}.output.dense")]), f"{pre}.output.LayerNorm")
    # Mean over the tokens the mask keeps, then a unit vector.
    weights3 = node("Unsqueeze", [maskf, const("last", np.array([2], dtype=np.int64))])
    summed = node("ReduceSum", [node("Mul", [x, weights3]), const("tokens", np.array([1], dtype=np.int64))], keepdims=0)
    count = node("ReduceSum", [maskf, const("tokens2", np.array([1], dtype=np.int64))], keepdims=1)
    mean = node("Div", [summed, node("Max", [count, const("least", np.float32(1e-9))])])
    size = node("ReduceL2", [mean], axes=[1], keepdims=1)  # axes an attribute until opset 18
    out = node("Div", [mean, node("Max", [size, const("tiny", np.float32(1e-12))])])
    nodes.append(helper.make_node("Identity", [out], ["embedding"]))
    graph = helper.make_graph(
        nodes,
        "sentence-encoder",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "length"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", HIDDEN])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="hivenote")
    model.ir_version = 8
    blob: bytes = model.SerializeToString()
    return blob
