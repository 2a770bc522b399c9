"""int8 is judged by what the recall returns, above a score floor (issue 44).

On the embedded default (a trained model, so its rankings mean something) per-token int8 keeps the results
and passes; the four traps the seed warned of are each still rejected, by the floor, with a reason that names it.
Each trap keeps the order (sigmoid twice, a shift) or is built so, so the result gate alone would let it through.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from autotune.gates import int8_judge
from autotune.gates.int8_judge import judge_int8
from autotune.gates.parity import INT8_TOLERANCE, compare
from autotune.measure.timing import replay
from autotune.runtime.engine import REFERENCE, logit, sigmoid
from autotune.runtime.model import resolve_model
from autotune.runtime.sessions import EnginePool
from autotune.runtime.tokenize import PairTokenizer
from autotune.workload.queries import load_workload
from tests.support.paths import EXAMPLE_WORKLOAD

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def default():  # type: ignore[no-untyped-def]
    bundle = resolve_model(None)
    pool = EnginePool(bundle, has_vnni=True)
    workload = load_workload(EXAMPLE_WORKLOAD)
    reference = replay(pool.engine(REFERENCE), workload.queries, keep_scores=True).scores
    return pool, workload, reference


def test_per_token_int8_of_the_default_keeps_the_results_and_is_chosen(default):
    pool, workload, reference = default
    verdict = judge_int8(pool, workload, reference, INT8_TOLERANCE, has_vnni=True)
    assert verdict.chosen is not None and verdict.chosen.scales == "per-token", verdict.lines()
    assert verdict.chosen.fp32_nodes == () and verdict.chosen.label() == "per-token, 36/36 MatMuls"
    report = dict(verdict.reports)[verdict.chosen]
    assert report.topk_mean >= 0.95 and report.topk >= 0.8 and abs(report.shift) <= 0.2
    assert pool.int8_variant == verdict.chosen  # what the search then runs


def _order_kept(reference, candidate):  # type: ignore[no-untyped-def]
    """The trap keeps every query's order: the result gate alone passes it."""
    for ref, cand in zip(reference, candidate, strict=True):
        assert list(np.argsort(-ref, kind="mergesort")[:10]) == list(np.argsort(-cand, kind="mergesort")[:10])


def test_a_sigmoid_applied_twice_is_rejected_by_the_floor(default):
    _, _, reference = default
    twice = [sigmoid(r) for r in reference]
    _order_kept(reference, twice)
    report = compare(reference, twice, INT8_TOLERANCE)
    assert not report.passed and "max |Δscore|" in report.reason()


def test_a_shift_that_moves_a_min_scores_cut_is_rejected_by_the_floor(default):
    _, _, reference = default
    shifted = [sigmoid(logit(r) + 0.5) for r in reference]
    _order_kept(reference, shifted)
    report = compare(reference, shifted, INT8_TOLERANCE)
    assert not report.passed and "a min_scores cut would move" in report.reason(), report.reason()


@pytest.mark.parametrize("kind", ["nan", "constant"])
def test_a_nan_or_constant_model_is_rejected_by_the_floor(default, kind):
    _, _, reference = default
    fill = np.nan if kind == "nan" else 0.5
    report = compare(reference, [np.full_like(r, fill) for r in reference], INT8_TOLERANCE)
    assert not report.passed and "max |Δscore|" in report.reason()


def test_a_tokenizer_that_does_not_match_the_model_is_rejected_by_the_floor(default, tmp_path):
    """The vocabulary's ids swapped pairwise: every word becomes another, as with another model's tokenizer."""
    pool, workload, reference = default
    tok = json.loads(pool.bundle.tokenizer_path.read_text())
    vocab = tok["model"]["vocab"]
    words = [w for w in vocab if not w.startswith("[")]
    for a, b in zip(words[::2], words[1::2], strict=False):
        vocab[a], vocab[b] = vocab[b], vocab[a]
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok))
    wrong = EnginePool(replace(pool.bundle, tokenizer_path=tmp_path / "tokenizer.json"), has_vnni=True)
    assert isinstance(wrong.tokenizer, PairTokenizer)
    scores = replay(wrong.engine(REFERENCE), workload.queries, keep_scores=True).scores
    report = compare(reference, scores, INT8_TOLERANCE)
    assert not report.passed and "max |Δscore|" in report.reason(), report.reason()


@pytest.mark.slow
def test_where_no_variant_passes_the_most_sensitive_matmuls_go_back_to_fp32(default, tmp_path, monkeypatch):
    """A gate stricter than either whole variant meets (every query's top 10 within one result): the fallback
    measures each MatMul alone, keeps the most sensitive in fp32, and finds a partial variant that passes. Its
    sensitivities are cached: the second judging measures none."""
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    # per-token keeps every top 10 of the default, so it would pass: held to the dynamic variants, as on a model
    # where per-token does not pass either
    monkeypatch.setattr(int8_judge, "SCALES", ("per-channel", "per-tensor"))
    pool, workload, reference = default
    strict = replace(INT8_TOLERANCE, min_topk_mean=0.995, min_topk=0.95)
    verdict = judge_int8(pool, workload, reference, strict, has_vnni=True)
    assert [v.fp32_nodes for v, _ in verdict.reports[:2]] == [(), ()]
    assert not any(r.passed for _, r in verdict.reports[:2])
    assert verdict.chosen is not None and 0 < len(verdict.chosen.fp32_nodes) < 36, verdict.lines()
    assert dict(verdict.reports)[verdict.chosen].passed and pool.int8_variant == verdict.chosen
    assert verdict.sensitivity == "measured" and "MatMul sensitivities measured" in verdict.lines()[-1]
    again = judge_int8(pool, workload, reference, strict, has_vnni=True)
    assert again.sensitivity == "cached" and again.chosen == verdict.chosen


def test_a_variant_the_graph_cannot_be_made_into_is_named_and_the_next_is_judged(default, tmp_path, monkeypatch):
    """A graph whose opset cannot be converted for per-token int8 (here: made to fail) still gets dynamic int8."""
    from autotune.errors import ModelError
    from autotune.runtime import per_token

    def refuse(model, source):  # type: ignore[no-untyped-def]
        raise ModelError(f"{source} (opset 17) cannot be converted to opset 21 for per-token int8: no")

    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(per_token, "_at_opset", refuse)
    shared, workload, reference = default
    pool = EnginePool(shared.bundle, has_vnni=True)  # its own sessions: the module's may hold a per-token graph
    verdict = judge_int8(pool, workload, reference, INT8_TOLERANCE, has_vnni=True)
    assert [v.scales for v, _ in verdict.unbuilt] == ["per-token"]
    assert verdict.lines()[0].startswith("int8 per-token, 36/36 MatMuls: cannot be built: ")
    assert verdict.chosen is not None and verdict.chosen.scales == "per-channel", verdict.lines()
    assert verdict.to_dict()["unbuilt"][0]["scales"] == "per-token"
