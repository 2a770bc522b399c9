"""`hindsight-local`: Hindsight's default reranking path, for side-by-side comparison.

Hindsight's local provider is a sentence-transformers CrossEncoder on PyTorch calling
`predict(pairs, batch_size=32)`, optionally after its character-length bucket sort. This
module writes a checkpoint from the same safetensors (and the same head) the ONNX graph was
built from, so both sides run identical weights. Needs the optional extra:
`pip install -e '.[torch]'`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.errors import MissingDependencyError
from autotune.fileio import sha256_file
from autotune.paths import cache_dir

if TYPE_CHECKING:
    from autotune.runtime.model import ModelBundle

EXTRA_HINT = "pip install -e '.[torch]' (torch==2.13.0, CPU build)"


def _require_torch() -> None:
    try:
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(f"hindsight-local needs PyTorch and sentence-transformers: {EXTRA_HINT}") from exc


def write_checkpoint(weights_dir: Path) -> Path:
    """A BertForSequenceClassification checkpoint (1 label) from the weights package, cached."""
    from safetensors.numpy import load_file, save_file

    from autotune.runtime.bert_onnx import classifier_head

    key = sha256_file(weights_dir / "model.safetensors")[:16]
    target = cache_dir() / "hindsight-local" / key
    if (target / "model.safetensors").exists():
        return target
    weights = load_file(str(weights_dir / "model.safetensors"))
    config = json.loads((weights_dir / "config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        head_w, head_b, _ = classifier_head(weights, int(config["hidden_size"]))
    state = {f"bert.{k}": np.ascontiguousarray(v) for k, v in weights.items()
             if not k.startswith("classifier") and k != "embeddings.position_ids"}
    state["classifier.weight"], state["classifier.bias"] = head_w, head_b
    config.update({"architectures": ["BertForSequenceClassification"], "num_labels": 1,
                   "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}})
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent))
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config))
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
            if (weights_dir / name).exists():
                shutil.copy2(weights_dir / name, tmp / name)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_cross_encoder(checkpoint: Path) -> object:
    """A sentence-transformers CrossEncoder on CPU, loaded the way Hindsight's local provider loads it."""
    _require_torch()
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return CrossEncoder(str(checkpoint), device="cpu")
        except (OSError, ValueError) as exc:
            from autotune.errors import ModelError

            raise ModelError(f"sentence-transformers cannot load {checkpoint}: {str(exc).splitlines()[0]}") from exc


def checkpoint_for(bundle: ModelBundle) -> Path:
    """The PyTorch weights behind a bundle: written for the embedded default, else beside model.onnx."""
    from autotune.errors import ModelError
    from autotune.runtime.model import DEFAULT_MODEL_NAME, STAND_IN_MODEL_NAME, default_weights_dir

    _require_torch()
    if bundle.name in (DEFAULT_MODEL_NAME, STAND_IN_MODEL_NAME):  # the stand-in either way: what a CrossEncoder loads
        return write_checkpoint(default_weights_dir())
    if any((bundle.directory / f).exists() for f in ("model.safetensors", "pytorch_model.bin")):
        return bundle.directory
    raise ModelError(f"{bundle.directory} has no PyTorch weights (model.safetensors): --target local runs "
                     "them through sentence-transformers")


class HindsightLocal:
    """Scores like Hindsight's LocalSTCrossEncoder._predict_sync."""

    def __init__(self, checkpoint: Path, *, batch_size: int = 32, bucket_batching: bool = False) -> None:
        self.model: Any = load_cross_encoder(checkpoint)
        self.batch_size = batch_size
        self.bucket_batching = bucket_batching

    def score(self, query: str, documents: list[str]) -> np.ndarray:
        pairs = [(query, d) for d in documents]
        if self.bucket_batching and len(pairs) > 1:
            order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
            sorted_scores = self.model.predict([pairs[i] for i in order], batch_size=self.batch_size,
                                               show_progress_bar=False)
            scores = np.empty(len(pairs))
            scores[order] = sorted_scores
            return scores
        return np.asarray(self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False))


def hindsight_local(model_ref: str, *, bucket_batching: bool = False) -> HindsightLocal:
    if model_ref != "default":
        raise MissingDependencyError("hindsight-local needs safetensors weights; it is available for the "
                                     "embedded default model only")
    _require_torch()
    from autotune.runtime.model import default_weights_dir

    return HindsightLocal(write_checkpoint(default_weights_dir()), bucket_batching=bucket_batching)


class TorchBackend:
    """The PyTorch reference as an engine backend (same contract as OrtBackend), for parity tests."""

    dtype = "float32"

    def __init__(self, checkpoint: Path) -> None:
        _require_torch()
        import torch
        from transformers import BertForSequenceClassification
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        self._torch = torch
        self.model = BertForSequenceClassification.from_pretrained(str(checkpoint)).eval()
        self.input_names = ("input_ids", "attention_mask", "token_type_ids")
        self.n_logits = int(self.model.config.num_labels)
        self.vocab_rows = int(self.model.config.vocab_size)

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        with self._torch.no_grad():
            out = self.model(**{k: self._torch.from_numpy(v) for k, v in feeds.items()})
        return out.logits.numpy()
