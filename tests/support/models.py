"""Tiny models and small workloads the tests build on the fly (a BERT cross-encoder of 2 layers, 32 wide)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx

from autotune.runtime.bert_onnx import build_bert_cross_encoder
from autotune.runtime.model import default_weights_dir
from tests.support.corpus import DOCS

TINY_CONFIG = {
    "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64,
    "layer_norm_eps": 1e-12, "vocab_size": 30522, "max_position_embeddings": 128, "type_vocab_size": 2,
    "hidden_act": "gelu",
}


def tiny_weights(config: dict, seed: int = 0, n_logits: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.2, size=shape).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(v, h),
        "embeddings.position_embeddings.weight": r(config["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h), "embeddings.LayerNorm.bias": r(h),
        "pooler.dense.weight": r(h, h), "pooler.dense.bias": r(h),
        "classifier.weight": r(n_logits, h) * 5, "classifier.bias": r(n_logits),
    }
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name in ("query", "key", "value"):
            w[f"{p}.attention.self.{name}.weight"] = r(h, h)
            w[f"{p}.attention.self.{name}.bias"] = r(h)
        w[f"{p}.attention.output.dense.weight"] = r(h, h)
        w[f"{p}.attention.output.dense.bias"] = r(h)
        w[f"{p}.intermediate.dense.weight"] = r(f, h)
        w[f"{p}.intermediate.dense.bias"] = r(f)
        w[f"{p}.output.dense.weight"] = r(h, f)
        w[f"{p}.output.dense.bias"] = r(h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{ln}.weight"] = 1 + r(h)
            w[f"{p}.{ln}.bias"] = r(h)
    return w


def write_model_dir(directory: Path, model: onnx.ModelProto, config: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(directory / "model.onnx"))
    shutil.copy2(default_weights_dir() / "tokenizer.json", directory / "tokenizer.json")
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def write_workload(path: Path, n_queries: int = 4, docs: list[str] | None = None) -> Path:
    docs = docs or DOCS
    queries = ["What is the capital of France?", "Who is allergic to peanuts?", "Tell me about rivers",
               "日本の首都は？"]
    lines = [json.dumps({"id": f"q{i}", "query": queries[i % len(queries)], "budget": "mid",
                         "documents": docs[i % 3:] + docs[: i % 3]}, ensure_ascii=False) for i in range(n_queries)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build_tiny(directory: Path) -> Path:
    """The tiny trained-head cross-encoder's directory (what the `tiny_model_dir` fixture holds)."""
    model, trained = build_bert_cross_encoder(tiny_weights(TINY_CONFIG), TINY_CONFIG)
    assert trained
    return write_model_dir(directory, model, TINY_CONFIG)
