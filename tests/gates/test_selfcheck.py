from __future__ import annotations

import numpy as np

from autotune.gates.selfcheck import self_check
from autotune.workload.queries import Query

LOGITS = np.array([2.0, -1.0, 0.5, -3.0, 1.2])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def recorded(scores, docs=None) -> Query:
    docs = docs or [f"doc {i}" for i in range(len(scores))]
    return Query("q", docs, extra={"hindsight_scores": [float(s) for s in scores]})


def test_no_recorded_scores_means_no_check():
    assert self_check([Query("q", ["a"])], [np.array([0.1])]) is None


def test_logits_and_probabilities_both_reproduce():
    for theirs in (LOGITS, sigmoid(LOGITS)):
        report = self_check([recorded(theirs)], [LOGITS])
        assert report is not None and report.passed and report.candidates == 5, report.summary()
    assert self_check([recorded(sigmoid(LOGITS))], [LOGITS]).scales == {"probabilities": 1}


def test_a_date_prefix_hindsight_did_not_score_is_named():
    docs = [f"[Date: June 05, 2022 (2022-06-05)] doc {i}" for i in range(5)]
    report = self_check([recorded(LOGITS + 0.7, docs)], [LOGITS])
    assert not report.passed and report.differ == 5 and "rebuilt text" in report.cause


def test_sigmoid_twice_is_named():
    report = self_check([recorded(sigmoid(sigmoid(LOGITS)))], [LOGITS])
    assert not report.passed and "sigmoid applied twice" in report.cause
    assert "5 of 5" in report.summary()


def test_another_model_is_named():
    report = self_check([recorded(-LOGITS)], [LOGITS])
    assert not report.passed and "another model" in report.cause


def test_a_small_drift_points_at_the_tokenizer():
    report = self_check([recorded(LOGITS + np.array([0, 0, 0.3, 0, 0]))], [LOGITS])
    assert not report.passed and report.differ == 1 and "tokenizer" in report.cause


def test_missing_scores_are_skipped_not_compared():
    q = Query("q", [f"d{i}" for i in range(5)], extra={"hindsight_scores": [2.0, None, 0.5, -3.0, 1.2]})
    report = self_check([q], [LOGITS])
    assert report.passed and report.candidates == 4


def test_scores_within_the_tolerance_pass_though_near_ties_swap_ranks():
    """A large bank repeats memories: equal scores in Hindsight, 1e-6 apart here, so Spearman dips below 1."""
    from autotune.gates.selfcheck import SelfCheck

    check = SelfCheck(queries=1, candidates=300, differ=0, spearman_min=0.99998, max_abs_logit=6e-6)
    assert check.passed and check.summary().startswith("all 300 recorded candidates reproduce")
    assert not SelfCheck(queries=1, candidates=300, differ=1, spearman_min=1.0, max_abs_logit=0.3).passed


def _default_scores(documents: list[str]) -> np.ndarray:
    from autotune.runtime.engine import REFERENCE
    from autotune.runtime.model import resolve_model
    from autotune.runtime.sessions import EnginePool

    return EnginePool(resolve_model(None), has_vnni=False).engine(REFERENCE).score("what is it?", documents).raw


def test_a_recording_hindsight_scored_cut_is_replayed_cut():
    """A trace holds each document whole; with MAX_TOKENS_PER_CANDIDATE Hindsight scored it cut to N tokens."""
    from autotune.gates.selfcheck import check_recording
    from autotune.workload.candidate_cap import CandidateCap, cut_documents
    from tests.support.corpus import DOCS

    cap = CandidateCap(6, "o200k_base")
    live = Query("what is it?", list(DOCS),
                 extra={"hindsight_scores": _default_scores(cut_documents(list(DOCS), 6, "o200k_base")).tolist()})
    uncut = check_recording([live], None)
    assert uncut is not None and not uncut.passed and "MAX_TOKENS_PER_CANDIDATE" in uncut.summary()
    cut = check_recording([live], None, cap=cap)
    assert cut is not None and cut.passed, cut.summary()


def test_an_int8_profiles_replay_is_held_to_the_int8_tolerance_and_says_so():
    from dataclasses import replace

    from autotune.gates.selfcheck import INT8_REPLAY_TOLERANCE, check_recording
    from autotune.runtime.engine import REFERENCE
    from tests.support.corpus import DOCS

    nudged = _default_scores(list(DOCS)) + np.linspace(-1, 1, len(DOCS)) * INT8_REPLAY_TOLERANCE / 2
    live = Query("what is it?", list(DOCS), extra={"hindsight_scores": nudged.tolist()})
    fp32 = check_recording([live], None, batching=(REFERENCE, "chars_desc"))
    assert fp32 is not None and not fp32.passed
    int8 = check_recording([live], None, batching=(replace(REFERENCE, precision="int8"), "chars_desc"))
    assert int8 is not None and int8.passed and "within 0.15 logits (int8)" in int8.summary()
