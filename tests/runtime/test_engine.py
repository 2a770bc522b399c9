from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from autotune.errors import ModelError
from autotune.runtime.backends import OrtBackend
from autotune.runtime.bert_onnx import build_bert_cross_encoder
from autotune.runtime.engine import RerankEngine, calibrate
from autotune.runtime.model import load_model_dir
from autotune.runtime.tokenize import PairTokenizer
from tests.support.corpus import DOCS
from tests.support.models import TINY_CONFIG, tiny_weights, write_model_dir


def _engine(model_dir, batch_size=1, length_sort=False, threads=1):
    bundle = load_model_dir(model_dir)
    return RerankEngine(OrtBackend(bundle.onnx_path, threads=threads),
                        PairTokenizer(bundle.tokenizer_path, bundle.max_length),
                        batch_size=batch_size, length_sort=length_sort)


@pytest.mark.parametrize("batch_size", [1, 2, 3, 8, 64])
@pytest.mark.parametrize("length_sort", [False, True])
def test_fp32_scores_do_not_depend_on_batching_or_sort(tiny_model_dir, batch_size, length_sort):
    ref = _engine(tiny_model_dir).score("What is the capital of France?", DOCS)
    got = _engine(tiny_model_dir, batch_size, length_sort).score("What is the capital of France?", DOCS)
    assert np.abs(ref.scores - got.scores).max() <= 1e-5
    assert np.array_equal(np.argsort(-ref.scores), np.argsort(-got.scores))


def test_scores_come_back_in_caller_order(tiny_model_dir):
    engine = _engine(tiny_model_dir, batch_size=4, length_sort=True)
    forward = engine.score("q", DOCS).scores
    backward = engine.score("q", DOCS[::-1]).scores
    assert np.allclose(forward, backward[::-1], atol=1e-5)


def test_padding_is_per_batch(tiny_model_dir):
    unsorted = _engine(tiny_model_dir, batch_size=2).score("q", DOCS)
    by_length = _engine(tiny_model_dir, batch_size=2, length_sort=True).score("q", DOCS)
    assert unsorted.real_tokens == by_length.real_tokens
    assert by_length.padded_tokens <= unsorted.padded_tokens
    assert _engine(tiny_model_dir, batch_size=1).score("q", DOCS).padded_tokens == unsorted.real_tokens


def test_sigmoid_applied_exactly_once():
    scores, raw = calibrate(np.array([[0.0], [2.0], [-3.0]], np.float32))
    assert np.allclose(scores, 1 / (1 + np.exp(-np.array([0.0, 2.0, -3.0]))))
    assert np.allclose(raw, [0.0, 2.0, -3.0])


def test_two_logits_use_softmax_of_positive_class():
    logits = np.array([[1.0, 3.0], [2.0, -1.0]], np.float32)
    scores, raw = calibrate(logits)
    e = np.exp(logits)
    assert np.allclose(scores, e[:, 1] / e.sum(axis=1))
    assert np.allclose(1 / (1 + np.exp(-raw)), scores)


def test_other_output_shapes_are_a_clear_error():
    with pytest.raises(ModelError, match="expected"):
        calibrate(np.zeros((2, 3), np.float32))


def test_two_logit_model_end_to_end(tmp_path):
    model, _ = build_bert_cross_encoder(tiny_weights(TINY_CONFIG, n_logits=2), TINY_CONFIG)
    model_dir = write_model_dir(tmp_path / "two", model, TINY_CONFIG)
    result = _engine(model_dir).score("q", DOCS[:3])
    assert ((result.scores > 0) & (result.scores < 1)).all()


def test_model_without_token_type_ids(tmp_path):
    """XLM-R style graphs have no token_type_ids: the engine feeds only what the graph asks for."""
    model, _ = build_bert_cross_encoder(tiny_weights(TINY_CONFIG), TINY_CONFIG)
    graph = model.graph
    zeros = helper.make_node("ConstantOfShape", ["tt_shape"], ["token_type_ids"],
                             value=helper.make_tensor("z", TensorProto.INT64, [1], [0]))
    shape = helper.make_node("Shape", ["input_ids"], ["tt_shape"])
    graph.node.insert(0, zeros)
    graph.node.insert(0, shape)
    kept = [i for i in graph.input if i.name != "token_type_ids"]
    del graph.input[:]
    graph.input.extend(kept)
    model_dir = write_model_dir(tmp_path / "xlmr", model, TINY_CONFIG)
    backend = OrtBackend(model_dir / "model.onnx", threads=1)
    assert "token_type_ids" not in backend.input_names
    assert len(_engine(model_dir).score("q", DOCS[:2]).scores) == 2


def test_vocab_mismatch_is_caught_before_onnxruntime(tmp_path):
    cfg = dict(TINY_CONFIG, vocab_size=1000)
    model, _ = build_bert_cross_encoder(tiny_weights(cfg), cfg)
    model_dir = write_model_dir(tmp_path / "small-vocab", model, cfg)
    with pytest.raises(ModelError, match="does not match"):
        _engine(model_dir)


def test_million_character_document_truncates(tiny_model_dir):
    result = _engine(tiny_model_dir, batch_size=2).score("q", ["word " * 200_000, "short", "日本語と絵文字 🍣🎌"])
    assert max(result.lengths) == 128  # the tiny model's max length
    assert np.isfinite(result.scores).all()


def test_batches_close_on_count_or_on_the_token_budget():
    from autotune.runtime.engine import plan_batches

    lengths = [10, 100, 20, 30]
    assert plan_batches([1, 3, 2, 0], lengths, 4) == [[1, 3, 2, 0]]
    assert plan_batches([1, 3, 2, 0], lengths, 4, max_batch_tokens=150) == [[1], [3, 2, 0]]
    assert plan_batches([1, 3, 2, 0], lengths, 2, max_batch_tokens=150) == [[1], [3, 2], [0]]
    assert plan_batches([0, 1], [500, 10], 8, max_batch_tokens=100) == [[0], [1]]  # too long: alone
    assert plan_batches([0, 1, 2], [10, 10, 10], 8, max_batch_tokens=30) == [[0, 1, 2]]  # exactly the budget


def test_a_token_budget_changes_batching_not_scores(tiny_model_dir):
    bundle = load_model_dir(tiny_model_dir)
    budgeted = RerankEngine(OrtBackend(bundle.onnx_path, threads=1), PairTokenizer(bundle.tokenizer_path, 128),
                            batch_size=64, length_sort=True, max_batch_tokens=200)
    result = budgeted.score("What is the capital of France?", DOCS)
    whole = _engine(tiny_model_dir, 64, True).score("What is the capital of France?", DOCS)
    np.testing.assert_allclose(result.scores, whole.scores, atol=1e-5)
    assert result.padded_tokens < whole.padded_tokens  # the long pair no longer pads the rest
