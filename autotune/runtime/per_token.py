"""int8 with one activation scale per token: a pair's scores hardly depend on the batch it is scored in.

onnxruntime's dynamic quantization scales a MatMul's whole input at once, so a pair's int8 scores move with
the other pairs (and the padding) in its batch: on the embedded default a score moved by up to 0.085 between
batch 1 and batch 32, and a verdict judged at one batch did not hold at the batches Hindsight formed. Here
each token's activations get their own symmetric scale (its largest |value| / 127), the weights one per
output channel, and the int8 GEMM is MLAS's (`MatMulIntegerToFloat`), so a pair is scored the same in any
batch but for fp32 rounding (a value on a rounding edge can flip): 0.0014 at most on the example between
batch 1 and 32, against 0.085 for dynamic per-channel (`benchmarks/int8_variants.py`). The graph is
rewritten from the fp32 one with no calibration data, so `apply` can rebuild it from the profile alone.

Per weight MatMul `y = x @ W` the rewrite is
`s = max(|x|, axis=-1) / 127; q = QuantizeLinear(x, s, 128, block=K); y = MatMulIntegerToFloat(q, Wq, 1, w_scale) * s`;
the 128 zero point keeps `q` unsigned, which MLAS's u8s8 (VNNI) and u8u8 kernels take. The per-token
`QuantizeLinear` is ONNX's blocked quantization (opset 21): an older graph is converted to opset 21 first.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from autotune.errors import ModelError
from autotune.runtime.matmul_rewrite import rewrite_weight_matmuls, save_rewritten
from autotune.runtime.onnx_files import read_graph

OPSET = 21  # blocked QuantizeLinear: one scale per token
_EPS = 1e-8  # a token of zeros gets this scale rather than a division by zero
_C = "autotune_pt_"  # the prefix of every name the rewrite adds


def write_per_token(source: Path, out: Path, *, unsigned_weights: bool, keep_fp32: Collection[str] = ()) -> Path:
    """Write `source` with every weight MatMul not in `keep_fp32` made per-token int8; `unsigned_weights`
    stores the weights uint8 (zero point 128) for CPUs whose u8s8 path can saturate (no VNNI)."""
    model = per_token_graph(per_token_source(source), Path(source).parent, unsigned_weights=unsigned_weights,
                            keep_fp32=keep_fp32)
    return save_rewritten(model, out, Path(source).parent, "the per-token int8 graph")


def per_token_source(source: Path) -> onnx.ModelProto:
    """The graph the rewrite works on: `source` at opset 21, its external weights left on disk (read one
    MatMul's at a time)."""
    return _at_opset(read_graph(source), source)


def per_token_graph(model: onnx.ModelProto, base: Path, *, unsigned_weights: bool,
                    keep_fp32: Collection[str] = ()) -> onnx.ModelProto:
    """`model` (from `per_token_source`; `base` is where its data lies) rewritten in memory, unchecked."""
    quantized: dict[str, tuple[str, str]] = {}  # an input shared by several MatMuls (Q, K, V) is quantized once

    def per_token(node: onnx.NodeProto, weight: np.ndarray, prefix: str
                  ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        x = node.input[0]
        nodes = []
        if x not in quantized:
            quantized[x] = (prefix + "q", prefix + "s")
            nodes += _quantize_tokens(x, prefix, int(weight.shape[0]))
        q, s = quantized[x]
        wq, w_scale, w_zero = _weight(weight, unsigned_weights)
        nodes += [helper.make_node("MatMulIntegerToFloat", [q, prefix + "wq", _C + "one", prefix + "ws", _C + "zp",
                                                            prefix + "wz"], [prefix + "f"], domain="com.microsoft"),
                  helper.make_node("Mul", [prefix + "f", s], [node.output[0]], name=node.name)]
        return nodes, [numpy_helper.from_array(wq, prefix + "wq"), numpy_helper.from_array(w_scale, prefix + "ws"),
                       numpy_helper.from_array(w_zero, prefix + "wz")]

    return rewrite_weight_matmuls(model, base, keep_fp32, per_token, _C, _constants())


def _at_opset(model: onnx.ModelProto, source: Path) -> onnx.ModelProto:
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if version >= OPSET:
        return model
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, OPSET)
    except Exception as exc:  # the converter raises its own C++ errors
        raise ModelError(f"{source} (opset {version}) cannot be converted to opset {OPSET} for per-token "
                         f"int8: {exc}") from exc


def _constants() -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(np.array(1 / 127, np.float32), _C + "inv127"),
            numpy_helper.from_array(np.array(_EPS, np.float32), _C + "eps"),
            numpy_helper.from_array(np.array([-1], np.int64), _C + "last"),
            numpy_helper.from_array(np.array(1.0, np.float32), _C + "one"),
            numpy_helper.from_array(np.array(0.0, np.float32), _C + "zero"),
            numpy_helper.from_array(np.array(128.0, np.float32), _C + "128f"),
            numpy_helper.from_array(np.array(128, np.uint8), _C + "zp")]


def _quantize_tokens(x: str, prefix: str, k: int) -> list[onnx.NodeProto]:
    """`x` as uint8 with one scale per token (its last axis), and that scale: symmetric about 128."""
    p = prefix
    return [
        helper.make_node("Abs", [x], [p + "abs"]),
        helper.make_node("ReduceMax", [p + "abs", _C + "last"], [p + "max"], keepdims=1),
        helper.make_node("Mul", [p + "max", _C + "inv127"], [p + "s0"]),
        helper.make_node("Max", [p + "s0", _C + "eps"], [p + "s"]),
        # the zero point must have the scale's shape: 128 everywhere, made from the scale itself
        helper.make_node("Mul", [p + "s", _C + "zero"], [p + "z0"]),
        helper.make_node("Add", [p + "z0", _C + "128f"], [p + "z1"]),
        helper.make_node("Cast", [p + "z1"], [p + "z"], to=TensorProto.UINT8),
        helper.make_node("QuantizeLinear", [x, p + "s", p + "z"], [p + "q"], axis=-1, block_size=k),
    ]


def _weight(w: np.ndarray, unsigned: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Symmetric per-output-channel int8 weights, their scales and zero points (128 when stored uint8)."""
    w = w.astype(np.float32)
    scale = (np.maximum(np.abs(w).max(axis=0), 1e-12) / 127).astype(np.float32)
    q = np.clip(np.round(w / scale), -127, 127)
    if unsigned:
        return (q + 128).astype(np.uint8), scale, np.full(w.shape[1], 128, np.uint8)
    return q.astype(np.int8), scale, np.zeros(w.shape[1], np.int8)
