"""onnxruntime's dynamic int8 (per-channel or per-tensor weight scales, one activation scale per MatMul input),
written one weight at a time for a graph whose weights lie outside it.

`onnxruntime.quantization.quantize_dynamic` loads every weight, writes the model out again for shape inference
and reloads it: 6.6 GB of peak RSS on a 2.2 GB graph (issue 52). The graph it makes becomes, once onnxruntime
loads it, one `DynamicQuantizeMatMul` kernel per weight MatMul; this rewrite emits that kernel directly, with
the weights quantized as `quantize_dynamic` quantizes them (int8 symmetric over [-127, 127]; uint8 asymmetric
with a zero point, for CPUs without VNNI). A graph with its weights inline still goes through onnxruntime's own
quantizer, which every earlier profile's int8 model was built by.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from autotune.runtime.matmul_rewrite import rewrite_weight_matmuls, save_rewritten
from autotune.runtime.onnx_files import read_graph

_C = "autotune_dq_"


def write_dynamic(source: Path, out: Path, *, unsigned_weights: bool, per_channel: bool,
                  keep_fp32: Collection[str] = ()) -> Path:
    """Write `source` with every weight MatMul not in `keep_fp32` made dynamic int8."""
    base = Path(source).parent
    model = dynamic_graph(read_graph(source), base, unsigned_weights=unsigned_weights, per_channel=per_channel,
                          keep_fp32=keep_fp32)
    return save_rewritten(model, out, base, "the dynamic int8 graph")


def dynamic_graph(model: onnx.ModelProto, base: Path, *, unsigned_weights: bool, per_channel: bool,
                  keep_fp32: Collection[str] = ()) -> onnx.ModelProto:
    """`model` (its external data in `base`) rewritten in memory, unchecked."""
    def dynamic(node: onnx.NodeProto, weight: np.ndarray, prefix: str
                ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
        wq, scale, zero = quantize_weight(weight, unsigned=unsigned_weights, per_channel=per_channel)
        kernel = helper.make_node("DynamicQuantizeMatMul", [node.input[0], prefix + "wq", prefix + "ws", prefix + "wz"],
                                  [node.output[0]], name=node.name, domain="com.microsoft")
        return [kernel], [numpy_helper.from_array(wq, prefix + "wq"), numpy_helper.from_array(scale, prefix + "ws"),
                          numpy_helper.from_array(zero, prefix + "wz")]

    return rewrite_weight_matmuls(model, base, keep_fp32, dynamic, _C)


def quantize_weight(w: np.ndarray, *, unsigned: bool, per_channel: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A [K, N] weight as onnxruntime's dynamic quantization stores it: one scale per output column (or one in
    all), int8 symmetric about 0, or uint8 over its range with a zero point."""
    w = w.astype(np.float32)
    axis = 0 if per_channel else None
    low = np.minimum(w.min(axis=axis), 0.0)
    high = np.maximum(w.max(axis=axis), 0.0)
    if unsigned:
        scale = ((high - low) / 255.0).astype(np.float32)
        scale = np.where(scale == 0, np.float32(1.0), scale).astype(np.float32)
        zero = np.clip(np.round(-low / scale), 0, 255)
        q = np.clip(np.round(w / scale) + zero, 0, 255).astype(np.uint8)
        return q, np.asarray(scale, np.float32), np.asarray(zero, np.uint8)
    scale = (np.maximum(np.abs(low), np.abs(high)) / 127.0).astype(np.float32)
    scale = np.where(scale == 0, np.float32(1.0), scale).astype(np.float32)
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, np.asarray(scale, np.float32), np.zeros_like(np.asarray(scale), dtype=np.int8)
