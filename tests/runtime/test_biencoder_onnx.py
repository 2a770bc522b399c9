"""The embedded default ranks like the trained encoder it is built from (issue 31).

Its graph is held to sentence-transformers' own `encode` + cosine on the same weights (the `torch`
extra), through autotune's own engine, on the example workload and on a holdout-style labeled set
(`data/holdout.jsonl`, written for this test: one relevant memory among 8 per query).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autotune.gates.parity import spearman
from autotune.runtime.engine import BASELINE
from autotune.runtime.model import DEFAULT_MODEL_NAME, build_default_model, default_weights_dir
from autotune.runtime.sessions import EnginePool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "queries.jsonl"
HOLDOUT = Path(__file__).parent / "data" / "holdout.jsonl"


def _queries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def default_pool() -> EnginePool:
    return EnginePool(build_default_model(), has_vnni=False)


@pytest.fixture(scope="module")
def encoder():
    pytest.importorskip("sentence_transformers", reason="the bi-encoder reference needs the torch extra")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(default_weights_dir()), device="cpu")


def _ours(pool: EnginePool, query: str, documents: list[str], fused: bool = False) -> np.ndarray:
    from dataclasses import replace

    return pool.engine(replace(BASELINE, batch_size=4, graph="fused" if fused else "plain")).score(query, documents).raw


def _cosines(encoder, query: str, documents: list[str]) -> np.ndarray:
    q = encoder.encode([query], normalize_embeddings=True)[0]
    return encoder.encode(documents, normalize_embeddings=True) @ q


@pytest.mark.parametrize("path", [EXAMPLE, HOLDOUT], ids=["example", "holdout"])
def test_the_default_agrees_with_the_bi_encoder(default_pool, encoder, path):
    """Per query: Spearman >= 0.95 and the same top 3, as the issue's bar has it."""
    for q in _queries(path):
        ours = _ours(default_pool, q["query"], q["documents"])
        theirs = _cosines(encoder, q["query"], q["documents"])
        assert spearman(ours, theirs) >= 0.95, q["id"]
        assert list(np.argsort(-ours)[:3]) == list(np.argsort(-theirs)[:3]), q["id"]


def test_the_fused_graph_scores_the_same(default_pool):
    for q in _queries(EXAMPLE)[:4]:
        plain, fused = _ours(default_pool, q["query"], q["documents"]), _ours(default_pool, q["query"],
                                                                               q["documents"], fused=True)
        np.testing.assert_allclose(fused, plain, atol=1e-4)


@pytest.mark.parametrize(("query", "top"), [
    ("When is the car insurance due?", "The car insurance renewal is due"),
    ("When does the deployment freeze start and end?", "Deployment freeze starts on December 15"),
    ("What was decided about the churn analysis for the board?", "churn analysis"),
])
def test_the_defaults_top_result_is_the_right_memory(default_pool, query, top):
    q = next(q for q in _queries(EXAMPLE) if q["query"] == query)
    scores = _ours(default_pool, q["query"], q["documents"])
    assert top in q["documents"][int(np.argmax(scores))]


def test_the_holdout_relevant_memory_comes_first(default_pool):
    """A stand-in head put the relevant document first about 1 time in 8 (chance); this must do it for each."""
    firsts = [int(np.argmax(_ours(default_pool, q["query"], q["documents"]))) == q["relevant"]
              for q in _queries(HOLDOUT)]
    assert all(firsts), firsts


def test_the_default_and_its_stand_in_are_cached_apart():
    """The stand-in form (for `--target local`) is a different graph, never reused as the default."""
    default, stand_in = build_default_model(), build_default_model(stock=True)
    assert default.name == DEFAULT_MODEL_NAME and default.scoring and default.describe()["scoring"]
    assert "trained_head" not in default.describe()
    assert default.sha256 != stand_in.sha256 and default.directory != stand_in.directory
    assert stand_in.trained_head is False
