"""Reranker backends: something that turns padded feeds into logits.

The engine owns tokenization, batching and calibration; a backend only runs the model.
Backends are interchangeable (ORT fp32, ORT int8, the optional PyTorch reference), and
one contract test runs over all of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from autotune.errors import ModelError, first_line
from autotune.runtime.model import OPTIONAL_INPUTS, REQUIRED_INPUTS


class Backend(ABC):
    """Runs a cross-encoder on padded int64 feeds and returns logits of shape [batch, n].

    Contract: `run` is called from one thread at a time; `input_names` lists the feeds
    it wants, in any order; `n_logits` is 1 or 2; `vocab_rows` bounds valid token ids
    (None when unknown).
    """

    input_names: tuple[str, ...]
    n_logits: int
    vocab_rows: int | None
    dtype: str

    @abstractmethod
    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray: ...


def inspect_graph(path: Path) -> tuple[tuple[str, ...], int | None, int | None]:
    """Input names, static logit count, and embedding rows, read from the graph itself."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"{path} is not a readable ONNX model: {first_line(exc)}") from exc
    init_names = {i.name for i in model.graph.initializer}
    inputs = tuple(i.name for i in model.graph.input if i.name not in init_names)
    missing = [n for n in REQUIRED_INPUTS if n not in inputs]
    extra = [n for n in inputs if n not in REQUIRED_INPUTS + OPTIONAL_INPUTS]
    if missing or extra:
        raise ModelError(
            f"{path} is not a cross-encoder: inputs are {list(inputs)}, expected input_ids, attention_mask"
            " and optionally token_type_ids"
        )
    if not model.graph.output:
        raise ModelError(f"{path} has no outputs")
    dims = model.graph.output[0].type.tensor_type.shape.dim
    n_logits = dims[-1].dim_value if len(dims) == 2 and dims[-1].dim_value else None
    if len(dims) not in (0, 2) or (n_logits is not None and n_logits not in (1, 2)):
        raise ModelError(f"{path}: output {model.graph.output[0].name} must be [batch, 1] or [batch, 2] logits")
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    rows = None
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[1] == "input_ids":
            dims0 = shapes.get(node.input[0])
            rows = dims0[0] if dims0 else None
            break
    return inputs, n_logits, rows


class OrtBackend(Backend):
    """One ONNX Runtime CPU session; `threads=0` means onnxruntime's own default.

    `spinning=False` and `mem_arena=False` are what Hindsight's onnx provider sets: idle
    threads sleep instead of busy-waiting, and freed activations go back to the OS.
    """

    def __init__(self, path: Path, *, threads: int, dtype: str = "float32", spinning: bool = True,
                 mem_arena: bool = True) -> None:
        import onnxruntime as ort

        ort.set_default_logger_severity(3)  # errors come back as one line of ours, not ORT's coloured log
        self.input_names, declared, self.vocab_rows = inspect_graph(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = mem_arena
        if not spinning:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelError(f"onnxruntime cannot load {path}: {first_line(exc)}") from exc
        self._output = self._session.get_outputs()[0].name
        self.dtype = dtype
        self.threads = threads
        self.n_logits = declared or self._probe_logits()

    def _probe_logits(self) -> int:
        feeds = {n: np.ones((1, 4), dtype=np.int64) for n in self.input_names}
        if "token_type_ids" in feeds:
            feeds["token_type_ids"][:] = 0
        out = self.run(feeds)
        if out.ndim != 2 or out.shape[1] not in (1, 2):
            raise ModelError(f"model output has shape {list(out.shape)}; a cross-encoder gives [batch, 1 or 2]")
        return int(out.shape[1])

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        try:
            out = self._session.run([self._output], feeds)[0]
        except Exception as exc:  # onnxruntime raises its own classes; any of them means the model and feeds disagree
            raise ModelError(f"onnxruntime cannot run the model on these inputs: {first_line(exc)} (a tokenizer "
                             "that does not match the model's vocabulary does this)") from exc
        return out.reshape(out.shape[0], -1) if out.ndim == 1 else out

