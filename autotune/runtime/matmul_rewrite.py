"""One weight MatMul at a time: the skeleton every int8 rewrite of autotune's shares.

Each weight MatMul (a MatMul by a 2-D initializer) not kept in fp32 is handed to a rewrite with its weight read
alone from wherever it lies, and replaced by the nodes and initializers the rewrite returns; weights no node
reads any more are dropped, and the graph is saved tensor by tensor and checked. So a 2.2 GB graph with external
data is rewritten holding its int8 weights and one fp32 weight, never all of them (issue 52).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from autotune.errors import ModelError
from autotune.runtime.onnx_files import check_saved, save_model, tensor_array

# (the MatMul, its weight, a prefix for the names it adds) -> (nodes that replace it, initializers they add)
Rewrite = Callable[[onnx.NodeProto, np.ndarray, str], tuple[list[onnx.NodeProto], list[onnx.TensorProto]]]


def rewrite_weight_matmuls(model: onnx.ModelProto, base: Path, keep_fp32: Collection[str], rewrite: Rewrite,
                           prefix: str, constants: Collection[onnx.TensorProto] = ()) -> onnx.ModelProto:
    """`model` with each weight MatMul not in `keep_fp32` replaced by what `rewrite` makes of it, and the
    rewrite's `constants` added; `base` is the directory its external data lies in. Names are numbered by the
    initializers added so far (as the first rewrite did, so its graphs keep their bytes)."""
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = list(constants)
    for node in graph.node:
        weight = node.input[1] if node.op_type == "MatMul" and len(node.input) == 2 else None
        if weight not in weights or node.name in keep_fp32 or len(weights[weight].dims) != 2:
            nodes.append(node)
            continue
        new_nodes, new_inits = rewrite(node, tensor_array(weights[weight], base), f"{prefix}{len(added)}_")
        nodes += new_nodes
        added += new_inits
    used = {name for n in nodes for name in n.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def save_rewritten(model: onnx.ModelProto, out: Path, base: Path, what: str) -> Path:
    """The rewritten graph at `out` (its untouched weights streamed from `base`), checked by onnx's checker."""
    try:
        save_model(model, out, base=base)
    except (OSError, ValueError) as exc:
        raise ModelError(f"writing {what} failed: {exc}") from exc
    return check_saved(out, what)
