"""Shared fixtures: a tiny BERT cross-encoder built on the fly, and isolated dirs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, trained = build_bert_cross_encoder(tiny_weights(TINY_CONFIG), TINY_CONFIG)
    assert trained
    return write_model_dir(tmp_path_factory.mktemp("tiny") / "model", model, TINY_CONFIG)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own state dir and measuring lock (a benchmark measuring beside the suite must not
    refuse its runs); the model cache is shared per session (builds are slow)."""
    cache = tmp_path_factory.getbasetemp() / "shared-cache"
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(cache))
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    monkeypatch.setenv("AUTOTUNE_LOCK_DIR", str(tmp_path_factory.mktemp("lock")))


def write_workload(path: Path, n_queries: int = 4, docs: list[str] | None = None) -> Path:
    docs = docs or DOCS
    queries = ["What is the capital of France?", "Who is allergic to peanuts?", "Tell me about rivers",
               "日本の首都は？"]
    lines = [json.dumps({"id": f"q{i}", "query": queries[i % len(queries)], "budget": "mid",
                         "documents": docs[i % 3:] + docs[: i % 3]}, ensure_ascii=False) for i in range(n_queries)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def workload_file(tmp_path: Path) -> Path:
    return write_workload(tmp_path / "queries.jsonl")


# ---- with CI=1, a skipped test is a failure -------------------------------------------------------------------
# .ci/run installs everything the suite needs, so a skip there means a dependency silently went missing (a failed
# pgvector build once let CI go green with every real-Hindsight test skipped). Only these may skip in CI:
CI_ALLOWED_SKIPS: set[str] = set()  # none: every tool the suite needs is installed by .ci/run


_skipped: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped[report.nodeid] = reason.removeprefix("Skipped: ")


def disallowed_skips(skipped: dict[str, str], allowed: set[str]) -> dict[str, str]:
    """The skips CI must not accept: any test not on the allow-list (parametrized ones by their function)."""
    return {node: why for node, why in skipped.items() if node.split("[")[0] not in allowed}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if os.environ.get("CI", "").lower() not in ("1", "true") or session.config.option.collectonly:
        return
    bad = disallowed_skips(_skipped, CI_ALLOWED_SKIPS)
    if not bad:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.section("skips that CI=1 does not allow", sep="=", red=True, bold=True)
        for node, why in sorted(bad.items()):
            reporter.line(f"{node}: {why}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
