from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from autotune.runtime.bert_onnx import build_bert_cross_encoder
from autotune.runtime.engine import EngineConfig
from autotune.runtime.fusion import FusionUnavailable, fused_model_path, fused_ops
from autotune.runtime.model import build_default_model, load_model_dir
from autotune.runtime.sessions import EnginePool
from tests.support.corpus import DOCS
from tests.support.models import TINY_CONFIG, tiny_weights, write_model_dir

PLAIN = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")
FUSED = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32", graph="fused")


def _scores(pool: EnginePool, config: EngineConfig) -> np.ndarray:
    return pool.engine(config).score("What is the capital of France?", DOCS).scores


def test_builder_fused_attention_scores_like_the_plain_ops(tmp_path):
    weights = tiny_weights(TINY_CONFIG, seed=3)
    plain, _ = build_bert_cross_encoder(weights, TINY_CONFIG)
    fused, _ = build_bert_cross_encoder(weights, TINY_CONFIG, fused_attention=True)
    a = EnginePool(load_model_dir(write_model_dir(tmp_path / "plain", plain, TINY_CONFIG)), has_vnni=False)
    b = EnginePool(load_model_dir(write_model_dir(tmp_path / "fused", fused, TINY_CONFIG)), has_vnni=False)
    assert fused_ops(b.bundle.onnx_path)["Attention"] == TINY_CONFIG["num_hidden_layers"]
    assert fused_ops(a.bundle.onnx_path)["Attention"] == 0
    np.testing.assert_allclose(_scores(a, PLAIN), _scores(b, PLAIN), atol=1e-5)


def test_the_default_fuses_and_keeps_fp32_parity():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = EnginePool(build_default_model(), has_vnni=False)
    path = fused_model_path(pool.bundle)
    assert fused_ops(path)["Attention"] == 6 and path != pool.bundle.onnx_path
    assert pool.model_path(FUSED) == path and fused_model_path(pool.bundle) == path  # cached
    np.testing.assert_allclose(_scores(pool, FUSED), _scores(pool, PLAIN), atol=1e-5)
    int8 = pool.model_path(EngineConfig(1, 1, False, "int8", graph="fused"))
    assert int8 != pool.model_path(EngineConfig(1, 1, False, "int8")) and fused_ops(int8)["Attention"] == 6


def test_a_model_without_a_known_type_cannot_fuse_and_says_why(tiny_model_dir):
    bundle = load_model_dir(tiny_model_dir)
    with pytest.raises(FusionUnavailable, match="model_type"):
        fused_model_path(bundle)
    with pytest.raises(FusionUnavailable, match="model_type"):  # remembered, not retried
        fused_model_path(bundle)


def test_when_the_optimizer_finds_no_attention_the_variant_is_refused(tmp_path):
    """The plain builder's attention is not the pattern onnxruntime's BERT optimizer looks for."""
    model, _ = build_bert_cross_encoder(tiny_weights(TINY_CONFIG), TINY_CONFIG)
    config = {**TINY_CONFIG, "model_type": "bert"}
    directory = write_model_dir(tmp_path / "m", model, config)
    (directory / "config.json").write_text(json.dumps(config))
    with pytest.raises(FusionUnavailable, match="no attention fused"):
        fused_model_path(load_model_dir(directory))


def test_an_external_data_graph_fuses_with_its_weights_read_one_at_a_time(external_model_dir, monkeypatch,
                                                                          tmp_path):
    """Issue 52: the optimizer given the whole 2.2 GB model held 15.4 GB; given the graph alone it reads only the
    weights it fuses. The fused graph keeps one data file beside it, and scores as the plain one."""
    import onnx
    from onnxruntime.transformers import optimizer

    from autotune.runtime import onnx_files

    given = []  # (a graph, not a path; its weights outside it; how many of those were loaded) as the optimizer got it

    def spy(model: object, **kwargs: object) -> object:
        outside = [t for t in onnx_files.tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]  # type: ignore[arg-type]
        given.append((isinstance(model, onnx.ModelProto), len(outside), sum(bool(t.raw_data) for t in outside)))
        return real(model, **kwargs)

    real = optimizer.optimize_model
    monkeypatch.setattr(optimizer, "optimize_model", spy)
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    bundle = load_model_dir(external_model_dir)
    path = fused_model_path(bundle)
    assert len(given) == 1 and given[0][0] and given[0][1] > 10 and given[0][2] == 0, given
    assert fused_ops(path)["Attention"] == 2
    assert [p.name for p in onnx_files.data_files(path)] == ["model.onnx_data"]
    pool = EnginePool(bundle, has_vnni=False)
    np.testing.assert_allclose(_scores(pool, FUSED), _scores(pool, PLAIN), atol=1e-5)


def test_a_missing_optimizer_dependency_is_a_reason_not_a_crash(external_model_dir, monkeypatch, tmp_path):
    """The optimizer imports sympy; a host without it once saw "missing 'sympy'" (issue 52): it is a declared
    dependency now, and any module missing still drops the fused graph with the module's name."""
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime.transformers.optimizer", None)
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(FusionUnavailable, match=r"onnxruntime\.transformers\.optimizer, which is not installed"):
        fused_model_path(load_model_dir(external_model_dir))
