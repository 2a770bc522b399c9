"""The pool knobs and the result-quality gate, on a recording from a real Hindsight 1.1.0 (tests/fixtures)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import OptionsError
from autotune.gates.scope import (
    CAP_GRID,
    Replays,
    ResultGate,
    Scope,
    compare_results,
    explore,
    final_results,
    shape,
)
from autotune.hindsight.keys import user_caps
from autotune.search.scope_outcome import ScopeOutcome
from autotune.workload.queries import Workload, load_workload

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "hindsight_recall.jsonl"
ENCODING = "o200k_base"


@pytest.fixture(scope="module")
def recorded() -> Workload:
    return load_workload(FIXTURE)


def hindsights_scores(workload: Workload) -> list[np.ndarray]:
    """The scores Hindsight gave each recorded document, looked up by text (what the fp32 model scores)."""
    table = {(q.query, d): s for q in load_workload(FIXTURE).queries
             for d, s in zip(q.documents, q.extra["hindsight_scores"], strict=True)}
    return [np.array([table[(q.query, d)] for d in q.documents]) for q in workload.queries]


def reference(recorded: Workload, replays: Replays) -> list[list[str]]:
    whole = shape(recorded, replays, Scope(), ENCODING)
    return final_results(replays, whole, hindsights_scores(whole.workload))


def test_every_recorded_recall_replays_and_the_whole_pool_agrees_with_itself(recorded):
    replays = Replays(recorded)
    assert all(replays.recorded) and set(replays.levels) == {"low", "mid"}
    ref = reference(recorded, replays)
    assert [list(r) for r in ref] == [q.extra["replay"]["results"] for q in recorded.queries]
    same = compare_results(ref, ref, len(ref))
    assert (same.mean, same.worst, same.head_mean, same.top1) == (1.0, 1.0, 1.0, 1.0)


def test_each_level_gets_the_smallest_cap_on_the_grid_that_keeps_its_results(recorded):
    replays = Replays(recorded)
    ref = reference(recorded, replays)
    gate = ResultGate()
    explored = explore(recorded, replays, ref, hindsights_scores, gate, fixed=Scope(), encoding=ENCODING,
                       token_grid=())
    [chosen] = explored.candidates
    assert chosen.passed and chosen.agreement.passes(gate)
    assert {level for level, _ in chosen.scope.caps} == {"low", "mid"}
    whole_pairs = sum(len(q.documents) for q in recorded.queries)
    assert chosen.pairs < whole_pairs
    by_doc = hindsights_scores(recorded)
    for level, cap in chosen.scope.caps:
        smaller = [c for c in CAP_GRID if c < cap]
        if not smaller:
            continue
        members = replays.levels[level]
        trial = Scope().with_cap(level, smaller[-1])
        finals = [replays.results(i, k, [by_doc[i][j] for j in k])
                  for i in members for k in [replays.kept(i, level, trial)]]
        assert not compare_results([ref[i] for i in members], finals, len(members)).passes(gate), (level, cap)


def test_scores_that_rank_nothing_fail_the_gate_on_the_whole_pool(recorded):
    replays = Replays(recorded)
    rng = np.random.default_rng(0)
    explored = explore(recorded, replays, reference(recorded, replays),
                       lambda wl: [rng.normal(size=len(q.documents)) for q in wl.queries], ResultGate(),
                       fixed=Scope(), encoding=ENCODING, token_grid=())
    assert explored.candidates == [] and not explored.points[0].passed
    assert "below the floor" in explored.points[0].reason


def test_a_token_cut_is_judged_on_the_cut_documents(recorded):
    replays = Replays(recorded)
    seen: list[int] = []
    whole = hindsights_scores(shape(recorded, replays, Scope(), ENCODING).workload)  # in the order handed over

    def scorer(wl: Workload) -> list[np.ndarray]:
        seen.append(max(len(d) for q in wl.queries for d in q.documents))
        return whole  # the same scores: every cut passes until the grid ends

    explored = explore(recorded, replays, reference(recorded, replays), scorer, ResultGate(), fixed=Scope(),
                       encoding=ENCODING, token_grid=(16, 4))
    assert seen[0] > seen[1] > seen[2]  # whole, then 16 tokens, then 4
    assert [c.scope.tokens for c in explored.candidates] == [None, 16, 4]


def test_a_level_the_user_fixed_is_never_searched_nor_written(recorded):
    replays = Replays(recorded)
    fixed = Scope((("low", 30),))
    explored = explore(recorded, replays, reference(recorded, replays), hindsights_scores, ResultGate(min_mean=0.5,
                       min_query=0.1), fixed=fixed, encoding=ENCODING, token_grid=())
    assert all(p.scope.cap("low") == 30 for p in explored.points)
    outcome = ScopeOutcome(explored.candidates[0].scope, fixed, True, ResultGate(), explored.candidates[0].agreement)
    keys = outcome.env_keys()
    assert "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_LOW" not in keys
    assert "HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE" not in keys
    assert keys and all(v.isdigit() and int(v) > 0 for v in keys.values())


def test_the_keys_hindsight_parses_are_respected_as_it_parses_them():
    assert user_caps({}) == {}
    assert user_caps({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES": "50"}) == {"low": 50, "mid": 50, "high": 50}
    assert user_caps({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_MID": "20",
                      "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_LOW": "0"}) == {"mid": 20}
    with pytest.raises(OptionsError, match="rerank nothing"):
        user_caps({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES": "0"})
    with pytest.raises(OptionsError, match="not an integer"):
        user_caps({"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_MID": "fifty"})


def test_a_scope_never_writes_zero_or_empty_and_round_trips():
    scope = Scope((("low", 20), ("high", 100)), 128)
    assert scope.env_keys() == {"HINDSIGHT_API_RERANKER_MAX_CANDIDATES_LOW": "20",
                                "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_HIGH": "100",
                                "HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE": "128"}
    assert Scope.from_dict(scope.to_dict()) == scope
    for bad in (lambda: Scope((("mid", 0),)), lambda: Scope(tokens=0), lambda: Scope((("huge", 5),))):
        with pytest.raises(OptionsError):
            bad()
    with pytest.raises(OptionsError):
        ResultGate(min_mean=0.0)
    with pytest.raises(OptionsError):
        ResultGate(min_query=float("nan"))


def test_a_workload_without_a_recorded_pool_is_judged_on_its_top_ten(workload_file):
    plain = load_workload(workload_file)
    replays = Replays(plain)
    assert not replays.any_recorded and not replays.cappable("mid")
    whole = shape(plain, replays, Scope((("mid", 2),)), ENCODING)  # no cap applies without a recorded pool
    assert [len(q.documents) for q in whole.workload.queries] == [len(q.documents) for q in plain.queries]
    scores = [np.arange(len(q.documents), dtype=float) for q in plain.queries]
    finals = final_results(replays, whole, scores)
    assert all(len(f) == min(10, len(q.documents)) for f, q in zip(finals, plain.queries, strict=True))
    flipped = final_results(replays, whole, [-s for s in scores])
    assert compare_results(finals, flipped, 0).top1 == 0.0


def test_shaping_keeps_the_order_hindsight_hands_over_and_names_itself(recorded):
    replays = Replays(recorded)
    capped = shape(recorded, replays, Scope((("mid", 10),)), ENCODING)
    for i, q in enumerate(recorded.queries):
        kept = capped.kept[i]
        assert len(kept) == (min(10, len(q.documents)) if q.budget == "mid" else len(q.documents))
        assert capped.workload.queries[i].documents == [q.documents[k] for k in kept]
    assert capped.workload.sha256 != shape(recorded, replays, Scope(), ENCODING).workload.sha256
    cut = shape(recorded, replays, replace(Scope(), tokens=4), ENCODING)
    assert max(len(d) for q in cut.workload.queries for d in q.documents) < 60


def test_the_same_results_in_another_order_fail_on_the_first_ten():
    """Where Hindsight returns the whole pool, any scores return the same set: the head is what tells."""
    ref = [[f"n{i}" for i in range(30)]]
    shuffled = [list(reversed(ref[0]))]
    result = compare_results(ref, shuffled, 1)
    assert result.mean == 1.0 and result.worst == 1.0
    assert result.head_mean == 0.0 and result.top1 == 0.0
    assert not result.passes(ResultGate()) and "first 10" in result.reason(ResultGate())


def test_the_cap_is_found_in_steps_of_five_not_left_at_a_coarse_grid_point(recorded):
    """On this recording both levels hold at 45; a grid of 50, 60, 75 would have left them at 50 (828 pairs)."""
    replays = Replays(recorded)
    explored = explore(recorded, replays, reference(recorded, replays), hindsights_scores, ResultGate(),
                       fixed=Scope(), encoding=ENCODING, token_grid=())
    [chosen] = explored.candidates
    assert dict(chosen.scope.caps) == {"low": 45, "mid": 45} and chosen.pairs == 758
    assert all(b - a == 5 for a, b in itertools.pairwise(CAP_GRID))
