"""The `fused` graph: attention as one onnxruntime `Attention` kernel, made once and cached.

ONNX Runtime's own `ORT_ENABLE_ALL` already fuses SkipLayerNormalization and BiasGelu at
load, so a fused variant only pays where attention fuses. The embedded default is rebuilt
with the contrib op emitted directly (ORT's pattern matcher does not recognise the plain
builder's subgraph); any other model goes through `onnxruntime.transformers`' optimizer for
its `model_type`. Either way the result is kept only when attention really fused; otherwise
the knob is dropped from the search, with the reason.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx

from autotune.errors import ModelError, first_line
from autotune.fileio import read_bound, write_bound
from autotune.paths import cache_dir, caches_readable
from autotune.runtime.model import (
    DEFAULT_MODEL_NAME,
    STAND_IN_MODEL_NAME,
    ModelBundle,
    cached_build,
    quiet_root_logger,
)
from autotune.runtime.onnx_files import read_graph, save_model

DEFAULT_KINDS = {DEFAULT_MODEL_NAME: "default-biencoder", STAND_IN_MODEL_NAME: "default"}

ATTENTION_OPS = ("Attention", "MultiHeadAttention")
OPTIMIZER_TYPES = {"bert": "bert", "roberta": "bert", "xlm-roberta": "bert", "distilbert": "bert",
                   "electra": "bert", "camembert": "bert"}  # onnxruntime.transformers' BERT-family fusions


class FusionUnavailable(Exception):
    """The fused variant cannot be made for this model; the message says why."""


def fused_ops(path: Path) -> dict[str, int]:
    """How many fused attention kernels a graph holds."""
    model = read_graph(path)
    counts = {op: 0 for op in ATTENTION_OPS}
    for node in model.graph.node:
        if node.op_type in counts and node.domain == "com.microsoft":
            counts[node.op_type] += 1
    return counts


def fused_model_path(bundle: ModelBundle) -> Path:
    """The fused graph for this model (cached by the fp32 graph's hash, its model type and ORT's version)."""
    import onnxruntime

    kind = DEFAULT_KINDS.get(bundle.name) or str(bundle.config.get("model_type", "unknown"))
    kind = re.sub(r"[^A-Za-z0-9_.-]", "_", kind)[:40]  # a config value, not a path
    target = (cache_dir() / "fused" / f"{bundle.sha256[:16]}-{kind}-ort{onnxruntime.__version__}"
              / "model.onnx")
    reason_file = target.with_name("unavailable.txt")
    binding = {"kind": "fusion-unavailable", "model_sha256": bundle.sha256, "onnxruntime": onnxruntime.__version__}
    if caches_readable():
        remembered, _ = read_bound(reason_file, binding)
        if remembered is not None:
            raise FusionUnavailable(remembered.decode("utf-8", "replace")[:500])

    def fuse(tmp: Path) -> None:
        try:
            _fuse(bundle, tmp)
            if not any(fused_ops(tmp).values()):
                raise FusionUnavailable("no attention fused: onnxruntime's optimizer did not recognise the "
                                        "model's attention, and its other fusions already happen at load")
        except FusionUnavailable as exc:
            write_bound(reason_file, binding, str(exc).encode())  # remembered: the next run does not retry
            raise

    return cached_build(target, fuse)


def _fuse(bundle: ModelBundle, out: Path) -> None:
    if bundle.name in DEFAULT_KINDS:
        _rebuild_default(out, stock=bundle.name == STAND_IN_MODEL_NAME)
        return
    model_type = str(bundle.config.get("model_type", ""))
    if model_type not in OPTIMIZER_TYPES:
        raise FusionUnavailable(f"onnxruntime's optimizer has no attention fusion for model_type "
                                f"{model_type or 'unknown'!r}")
    heads = int(bundle.config.get("num_attention_heads", 0))
    hidden = int(bundle.config.get("hidden_size", 0))
    source = bundle.onnx_path
    graph = read_graph(source)  # without its weights: the optimizer reads only those it fuses, one at a time
    try:
        with warnings.catch_warnings(), quiet_root_logger(), _reading_data_in(source.parent):
            warnings.simplefilter("ignore")
            from onnxruntime.transformers.optimizer import optimize_model  # it imports sympy, among others

            optimized = optimize_model(graph, model_type=OPTIMIZER_TYPES[model_type], num_heads=heads,
                                       hidden_size=hidden, opt_level=0, use_gpu=False)
            optimized.topological_sort()
    except ImportError as exc:
        raise FusionUnavailable(f"onnxruntime's optimizer needs {exc.name or 'a module'}, which is not "
                                "installed") from exc
    except Exception as exc:  # the optimizer raises many kinds on graphs it does not expect
        raise FusionUnavailable(f"onnxruntime's optimizer failed: {first_line(exc)}") from exc
    model = optimized.model
    if (any(n.domain == "com.microsoft" for n in model.graph.node)
            and not any(o.domain == "com.microsoft" for o in model.opset_import)):
        model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))  # as the optimizer's own save
    save_model(model, out, base=source.parent)


@contextmanager
def _reading_data_in(directory: Path) -> Iterator[None]:
    """onnx reads a tensor's external data relative to the working directory when no base is given, which is
    how the optimizer reads the weights it fuses: the model's directory, for as long as it runs. Given the whole
    model instead, it held 15.4 GB for a 2.2 GB graph (issue 52); given the graph alone, 1.3 GB."""
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _rebuild_default(out: Path, *, stock: bool) -> None:
    """The embedded default, built again from its weights with the contrib op emitted."""
    from autotune.runtime.model import default_graph, default_weights_dir

    try:
        model, _ = default_graph(default_weights_dir(), stock=stock, fused_attention=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelError(f"rebuilding the default with fused attention failed: {first_line(exc)}") from exc
    onnx.save_model(model, str(out))
