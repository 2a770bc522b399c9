"""The model families users run, as tiny random-weight cross-encoders: BERT, XLM-R and ModernBERT.

Each is built with transformers and exported with torch's ONNX exporter (the one optimum drives;
optimum-onnx itself pins transformers < 4.58, which Hindsight 1.1's transformers >= 5.5 excludes
from this environment). One suite runs over all three: the engine and `serve` must give
transformers' own logits within 1e-4 in fp32, on the very token ids the engine fed, including a
ModernBERT pair far past 512 tokens; the fused graph is made or refused with a reason.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.fusion import FusionUnavailable, fused_model_path
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings
from tests.support.corpus import DOCS
from tests.support.families import FAMILIES, LONG_DOC, Family, export
from tests.support.http import LiveServer

CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")


@pytest.fixture(scope="module", params=FAMILIES, ids=[f.name for f in FAMILIES])
def family_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    family: Family = request.param
    return family, *export(family, tmp_path_factory.mktemp(family.name))


def _transformers_logits(model: torch.nn.Module, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        return model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits[:, 0].numpy()


def test_engine_scores_like_transformers_on_the_ids_it_fed(family_dir):
    family, directory, model = family_dir
    pool = EnginePool(load_model_dir(directory), has_vnni=False)
    assert pool.max_length == family.positions
    docs = DOCS + ([LONG_DOC] if family.positions > 512 else [])
    result = pool.engine(CONFIG).score("What is the capital of France?", docs)
    encodings = pool.tokenizer.encode("What is the capital of France?", docs)
    if family.positions > 512:
        assert max(len(e.ids) for e in encodings) > 2000  # not truncated at 512
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose(result.raw, expected, atol=1e-4)


def test_truncation_at_max_tokens_matches_transformers_on_the_truncated_ids(family_dir):
    _family, directory, model = family_dir
    pool = EnginePool(load_model_dir(directory), has_vnni=False, traits=EngineTraits(max_tokens=64))
    result = pool.engine(CONFIG).score("What is the capital of France?", [LONG_DOC, DOCS[0]])
    encodings = pool.tokenizer.encode("What is the capital of France?", [LONG_DOC, DOCS[0]])
    assert len(encodings[0].ids) == 64
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose(result.raw, expected, atol=1e-4)


def test_serve_scores_like_transformers_within_its_token_budget(family_dir):
    family, directory, model = family_dir
    service = RerankService(ServeSettings(config=CONFIG, model=str(directory), max_batch_tokens=4096),
                            has_vnni=False)
    texts = [LONG_DOC if family.positions > 512 else DOCS[-1], *DOCS[:3]]
    with LiveServer(service) as live:
        answer = httpx.post(live.url + "/rerank", timeout=120,
                            json={"query": "What is the capital of France?", "texts": texts, "raw_scores": True})
    assert answer.status_code == 200
    got = {item["index"]: item["score"] for item in answer.json()}
    pool = EnginePool(load_model_dir(directory), has_vnni=False)
    encodings = pool.tokenizer.encode("What is the capital of France?", texts)
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose([got[i] for i in range(len(texts))], expected, atol=1e-4)


def test_the_fused_graph_is_made_and_scores_alike_or_refused_with_a_reason(family_dir):
    family, directory, _ = family_dir
    bundle = load_model_dir(directory)
    plain = EnginePool(bundle, has_vnni=False).engine(CONFIG).score("What is the capital of France?", DOCS).raw
    try:
        path = fused_model_path(bundle)
    except FusionUnavailable as exc:
        assert family.model_type == "modernbert", exc  # the BERT family's optimizer has no ModernBERT fusion
        assert "model_type" in str(exc)
        return
    assert Path(path).exists()
    fused = EnginePool(bundle, has_vnni=False).engine(EngineConfig(4, 1, True, "fp32", graph="fused"))
    np.testing.assert_allclose(fused.score("What is the capital of France?", DOCS).raw, plain, atol=1e-4)
