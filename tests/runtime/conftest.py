"""The runtime's shared reference: the embedded default's stand-in-head graph on ORT, batch 1, unsorted."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.runtime.backends import OrtBackend
from autotune.runtime.engine import RerankEngine
from autotune.runtime.model import build_default_model
from autotune.runtime.tokenize import PairTokenizer
from tests.support.corpus import DOCS


@pytest.fixture(scope="module")
def reference_scores() -> np.ndarray:
    bundle = build_default_model(stock=True)
    engine = RerankEngine(OrtBackend(bundle.onnx_path, threads=0), PairTokenizer(bundle.tokenizer_path, 512),
                          batch_size=1, length_sort=False)
    return engine.score("what is the capital of france?", DOCS).scores
