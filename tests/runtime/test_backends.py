"""One contract suite over every backend: same feeds in, same scores out (within each one's tolerance)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.runtime.backends import Backend, OrtBackend
from autotune.runtime.engine import RerankEngine
from autotune.runtime.model import build_default_model, default_weights_dir
from autotune.runtime.quantize import int8_model_path
from autotune.runtime.tokenize import PairTokenizer
from tests.support.corpus import DOCS

try:
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:  # pragma: no cover
    HAVE_TORCH = False


def _backend(kind: str) -> Backend:
    bundle = build_default_model(stock=True)
    if kind == "ort-fp32":
        return OrtBackend(bundle.onnx_path, threads=1)
    if kind == "ort-int8":
        return OrtBackend(int8_model_path(bundle, has_vnni=False), threads=1, dtype="int8")
    if kind == "torch":
        if not HAVE_TORCH:
            pytest.skip("PyTorch reference needs the torch extra: pip install -e '.[torch]'")
        from autotune.runtime.torch_reference import TorchBackend, write_checkpoint

        return TorchBackend(write_checkpoint(default_weights_dir()))
    raise AssertionError(kind)


# The backends run the default's stand-in-head form: the one graph all three (ORT fp32, ORT int8, PyTorch)
# can load. int8 is only a sanity bound here (same model, same order of magnitude): whether an int8
# candidate is good enough is the parity gate's call, per workload.
TOLERANCE = {"ort-fp32": 1e-6, "torch": 1e-4, "ort-int8": 0.1}


@pytest.mark.parametrize("kind", ["ort-fp32", "ort-int8", "torch"])
def test_backend_contract(kind, reference_scores):
    backend = _backend(kind)
    assert set(backend.input_names) <= {"input_ids", "attention_mask", "token_type_ids"}
    assert backend.n_logits == 1 and backend.vocab_rows == 30522
    bundle = build_default_model(stock=True)
    engine = RerankEngine(backend, PairTokenizer(bundle.tokenizer_path, 512), batch_size=4, length_sort=True)
    scores = engine.score("what is the capital of france?", DOCS).scores
    assert np.abs(scores - reference_scores).max() <= TOLERANCE[kind]


def test_int8_is_cached_by_sha_ort_version_and_format():
    bundle = build_default_model(stock=True)
    a = int8_model_path(bundle, has_vnni=False)
    b = int8_model_path(bundle, has_vnni=True)
    assert a != b and a.parent.name.endswith("u8u8") and b.parent.name.endswith("u8s8")
    assert bundle.sha256[:16] in a.parent.name
    mtime = a.stat().st_mtime_ns
    assert int8_model_path(bundle, has_vnni=False) == a and a.stat().st_mtime_ns == mtime


