"""Hindsight's `local` path in PyTorch (sentence-transformers), the reference `bench` and the `local` target
compare with: the same weights score as the ONNX graph, and what it needs is said in one line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import MissingDependencyError, ModelError
from tests.support.corpus import DOCS

HAVE_TORCH = all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))


@pytest.mark.skipif(not HAVE_TORCH, reason="hindsight-local needs the torch extra: pip install -e '.[torch]'")
def test_hindsight_local_scores_like_the_onnx_graph(reference_scores):
    from autotune.runtime.torch_reference import hindsight_local

    local = hindsight_local("default")
    scores = local.score("what is the capital of france?", DOCS)
    # sentence-transformers applies sigmoid to a 1-label head, as the engine does: exactly once.
    assert np.abs(scores - reference_scores).max() <= 1e-4
    bucket = hindsight_local("default", bucket_batching=True).score("what is the capital of france?", DOCS)
    assert np.abs(bucket - scores).max() <= 1e-4


def test_bucket_batching_puts_each_score_back_in_its_place(monkeypatch):
    from autotune.runtime.torch_reference import HindsightLocal

    class ByLength:  # a model whose score is the pair's length: any misplaced score shows
        def predict(self, pairs, batch_size, show_progress_bar):  # type: ignore[no-untyped-def]
            return np.array([float(len(q) + len(d)) for q, d in pairs])

    monkeypatch.setattr("autotune.runtime.torch_reference.load_cross_encoder", lambda _path: ByLength())
    docs = ["ccc", "a", "bbbbbb", "dd"]
    local = HindsightLocal(Path("unused"), bucket_batching=True)
    assert list(local.score("q", docs)) == [4.0, 2.0, 7.0, 3.0]


def test_only_the_embedded_default_has_a_local_reference():
    from autotune.runtime.torch_reference import hindsight_local

    with pytest.raises(MissingDependencyError, match="embedded default model only"):
        hindsight_local("/models/other")


def test_a_model_without_pytorch_weights_is_a_model_error(tiny_model_dir):
    from autotune.runtime.model import load_model_dir
    from autotune.runtime.torch_reference import checkpoint_for

    with pytest.raises(ModelError, match="no PyTorch weights"):
        checkpoint_for(load_model_dir(tiny_model_dir))


def test_without_the_torch_extra_it_says_how_to_install_it(monkeypatch):
    from autotune.runtime.torch_reference import EXTRA_HINT, TorchBackend

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(MissingDependencyError) as missing:
        TorchBackend(Path("unused"))
    assert EXTRA_HINT in str(missing.value)
