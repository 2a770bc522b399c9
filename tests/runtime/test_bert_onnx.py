from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from autotune.runtime.backends import OrtBackend
from autotune.runtime.bert_onnx import BertShape, build_bert_cross_encoder, classifier_head
from autotune.runtime.model import build_default_model, default_weights_dir
from autotune.runtime.tokenize import PairTokenizer
from tests.support.corpus import DOCS
from tests.support.models import TINY_CONFIG, tiny_weights

try:
    import torch
    from transformers import BertConfig, BertForSequenceClassification
except ImportError:  # pragma: no cover - the reference test says it is skipped, and why
    torch = None


def _feeds(model_dir, max_length: int = 128):
    tok = PairTokenizer(model_dir / "tokenizer.json", max_length)
    return tok.pad(tok.encode("what is the capital of france?", DOCS), ("input_ids", "attention_mask",
                                                                         "token_type_ids")).feeds


def _reference_logits(weights: dict[str, np.ndarray], config: dict, feeds: dict[str, np.ndarray]) -> np.ndarray:
    cfg = BertConfig(**config)
    cfg.num_labels = 1
    model = BertForSequenceClassification(cfg).eval()
    head_w, head_b, _ = classifier_head(weights, config["hidden_size"])
    state = {("bert." + k): torch.from_numpy(v) for k, v in weights.items()
             if not k.startswith("classifier") and k != "embeddings.position_ids"}
    state["classifier.weight"] = torch.from_numpy(head_w)
    state["classifier.bias"] = torch.from_numpy(head_b)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and not [m for m in missing if "position_ids" not in m]
    with torch.no_grad():
        return model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()


@pytest.mark.skipif(torch is None, reason="reference needs the torch extra: pip install -e '.[torch]'")
def test_tiny_graph_matches_transformers(tiny_model_dir):
    feeds = _feeds(tiny_model_dir)
    ours = OrtBackend(tiny_model_dir / "model.onnx", threads=1).run(feeds)
    ref = _reference_logits(tiny_weights(TINY_CONFIG), TINY_CONFIG, feeds)
    assert np.abs(ours - ref).max() <= 1e-4


@pytest.mark.skipif(torch is None, reason="reference needs the torch extra: pip install -e '.[torch]'")
def test_default_graph_matches_transformers():
    """The stand-in form (what `--target local` runs) is BertForSequenceClassification, op for op."""
    bundle = build_default_model(stock=True)
    src = default_weights_dir()
    weights = load_file(str(src / "model.safetensors"))
    config = json.loads((src / "config.json").read_text())
    feeds = _feeds(bundle.directory, bundle.max_length)
    ours = OrtBackend(bundle.onnx_path, threads=0).run(feeds)
    ref = _reference_logits(weights, config, feeds)
    assert np.abs(ours - ref).max() <= 1e-4


def test_builder_reads_shape_from_config():
    cfg = dict(TINY_CONFIG, num_hidden_layers=1)
    model, _ = build_bert_cross_encoder(tiny_weights(cfg), cfg)
    layer_norms = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    assert len(layer_norms) == 1 + 2 * 1
    assert all(a.f == pytest.approx(1e-12) for n in layer_norms for a in n.attribute if a.name == "epsilon")


def test_missing_head_uses_seeded_stand_in_with_warning():
    weights = {k: v for k, v in tiny_weights(TINY_CONFIG).items() if not k.startswith("classifier")}
    with pytest.warns(UserWarning, match="stand-in head"):
        a, _ = build_bert_cross_encoder(weights, TINY_CONFIG)[0], None
    with pytest.warns(UserWarning):
        b, trained = build_bert_cross_encoder(weights, TINY_CONFIG)
    assert not trained
    assert a.SerializeToString() == b.SerializeToString()


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="multiple"):
        BertShape.from_config(dict(TINY_CONFIG, num_attention_heads=5))
    with pytest.raises(ValueError, match="lacks"):
        BertShape.from_config({"hidden_size": 32})


def test_a_graph_past_protobufs_limit_is_checked_from_disk_not_in_memory(monkeypatch, tmp_path):
    """Issue 52: `onnx.checker.check_model` on an in-memory proto past 2 GB fails; such a graph is built
    unchecked, saved with external data, and checked by its path."""
    import onnx

    from autotune.runtime import bert_onnx, onnx_files
    from tests.support.models import TINY_CONFIG, tiny_weights

    real_check = onnx.checker.check_model

    def by_path_only(model: object, *args: object, **kwargs: object) -> None:
        assert isinstance(model, str), "an in-memory proto past the limit was checked"
        real_check(model, *args, **kwargs)

    monkeypatch.setattr(bert_onnx, "PROTOBUF_LIMIT", 1)
    monkeypatch.setattr(onnx.checker, "check_model", by_path_only)
    model, _ = bert_onnx.build_bert_cross_encoder(tiny_weights(TINY_CONFIG), TINY_CONFIG)
    out = onnx_files.save_model(model, tmp_path / "model.onnx", external=True)
    assert onnx_files.check_saved(out, "the graph") == out
    assert [p.name for p in onnx_files.data_files(out)] == ["model.onnx_data"]
