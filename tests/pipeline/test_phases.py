"""What `run` says and refuses before any model loads."""

from __future__ import annotations

import json

import pytest

from autotune.errors import OptionsError
from autotune.pipeline.options import RunOptions
from autotune.pipeline.phases import oversized_pools, prepare
from autotune.workload.queries import Query, Workload


def _workload(*sizes: int, budget: str | None = None) -> Workload:
    return Workload([Query(f"q{i}", ["d"] * n, budget) for i, n in enumerate(sizes)], "0" * 64)


def test_pools_hindsight_would_rerank_whole_pass_silently():
    assert oversized_pools(_workload(300, 12), {}) is None


def test_a_pool_past_hindsights_cap_is_named_with_its_cost():
    """Issue 36, item 11: 10,000 documents in one query ran past 400 s with no warning."""
    note = oversized_pools(_workload(50, 10_000, 400), {})
    assert note is not None and note.startswith("warning: 2 of 3 queries")
    assert "query #2: 10000 against MAX_CANDIDATES 300" in note and "33.3x" in note


def test_the_users_own_cap_is_the_one_compared():
    env = {"HINDSIGHT_API_RERANKER_MAX_CANDIDATES": "50", "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_HIGH": "500"}
    assert oversized_pools(_workload(400, budget="high"), env) is None
    assert "400 against MAX_CANDIDATES 50" in (oversized_pools(_workload(400, budget="low"), env) or "")
    with pytest.raises(OptionsError):
        oversized_pools(_workload(4), {"HINDSIGHT_API_RERANKER_MAX_CANDIDATES": "lots"})


def test_prepare_says_it_before_any_model_loads(tmp_path, tiny_model_dir):
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"query": "q", "documents": [f"doc {i}" for i in range(1200)]}) + "\n")
    said: list[str] = []
    prepare(RunOptions(workload=path, model=tiny_model_dir, env_file=tmp_path / ".env", compose_file=None,
                       profile_dir=tmp_path / "profiles"),
            stage=said.append)
    assert [s for s in said if s.startswith("warning: 1 of 1 queries")]


def test_a_recording_from_a_hindsight_without_the_targets_provider_is_refused():
    from autotune.pipeline.phases import check_hindsight_version
    from autotune.runtime.targets import get_target

    old = Workload([Query("q", ["d"], extra={"hindsight_version": "0.6.2"})], "0" * 64)
    with pytest.raises(OptionsError, match=r"Hindsight 0.6.2, which has no `onnx` reranker \(new in 1.1"):
        check_hindsight_version(old, get_target("onnx"))
    check_hindsight_version(old, get_target("tei"))  # the sidecar needs only Hindsight's TEI client
    check_hindsight_version(Workload([Query("q", ["d"], extra={"hindsight_version": "1.1.0"})], "0" * 64),
                            get_target("onnx"))


def test_nothing_passed_counts_what_refused_the_trials():
    """Issue 46: a run whose trials all failed parity said "no configuration fits the memory budget"."""
    from types import SimpleNamespace

    from autotune.pipeline.phases import nothing_passed

    trials = [SimpleNamespace(user_attrs={"rejected": "top-10 kept 0.9 on average < 0.95"}),
              SimpleNamespace(user_attrs={"rejected": "estimated 900 MB would pass the memory budget of 512 MB"}),
              SimpleNamespace(user_attrs={})]
    said = nothing_passed(trials, 512.0, 84)  # type: ignore[arg-type]
    assert "of 3 trials (the space holds 84), 1 went over the memory budget of 512 MB and 1 failed the parity" in said


@pytest.mark.parametrize("inside", [True, False])
def test_caps_autotune_wrote_are_never_read_back_as_the_users(tmp_path, tiny_model_dir, inside):
    """Issue 46, item 6: a rerun read its own block's MAX_TOKENS_PER_CANDIDATE and MAX_CANDIDATES_LOW as the
    user's, cut the replay, and then refused the recording as not reproducing Hindsight's scores."""
    from autotune.outputs.envfile import BEGIN, END

    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"query": "q", "budget": "low", "documents": [f"doc {i} " * 40 for i in range(20)]})
                    + "\n")
    keys = "HINDSIGHT_API_RERANKER_MAX_TOKENS_PER_CANDIDATE=32\nHINDSIGHT_API_RERANKER_MAX_CANDIDATES_LOW=10\n"
    (tmp_path / ".env").write_text(f"{BEGIN}\n{keys}{END}\n" if inside else keys)
    said: list[str] = []
    ctx = prepare(RunOptions(workload=path, model=tiny_model_dir, env_file=tmp_path / ".env", compose_file=None,
                             profile_dir=tmp_path / "profiles"), stage=said.append)
    if inside:
        assert ctx.cap is None and ctx.user_env == {} and not said
    else:  # the user's own lines: Hindsight cuts and caps so, and the replay must too
        assert ctx.cap is not None and ctx.cap.max_tokens == 32 and said and "MAX_CANDIDATES 10" in said[0]


@pytest.mark.parametrize("host_mb", [1e9, None])
def test_the_default_budget_follows_a_large_model_and_keeps_one_session(tiny_model_dir, tmp_path, monkeypatch,
                                                                        host_mb):
    """Issue 52: a 2.2 GB reranker's session alone passes the 2 GB default; every configuration was refused, and
    a race of two of its sessions left finalists out. The budget follows the model as far as the host can give,
    and the pool keeps one session where two pass it."""
    from types import SimpleNamespace

    from autotune.measure.memory import ModelMemory, rss_mb
    from autotune.pipeline import phases
    from autotune.runtime.model import load_model_dir
    from autotune.runtime.sessions import EnginePool
    from autotune.runtime.space import SearchSpace
    from autotune.search.objective import Objective
    from autotune.search.space import SearchSettings
    from autotune.workload.queries import load_workload
    from tests.support.models import write_workload

    workload = load_workload(write_workload(tmp_path / "q.jsonl"))
    space = SearchSpace(batch_sizes=(1, 4), threads=(0, 1), precisions=("fp32",))
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False)
    large = ModelMemory(2135.0, 24, 16, 1024, 4096, weights_factor=1.0)
    objective = Objective(pool, workload, [], space, SearchSettings(repeats=1), memory_budget_mb=2048.0,
                          memory_model=large, lengths=[[60, 120]] * len(workload.queries))
    needed = objective.budget_for([space.baseline(), space.heaviest()])
    assert needed is not None and needed > 2048.0 + 1000.0  # one session with the margin
    host = 1e9 if host_mb is not None else needed - 500.0
    monkeypatch.setattr(phases, "default_budget_mb", lambda cap_mb=0.0: host)
    said: list[str] = []
    budget = phases.follow_the_model(SimpleNamespace(stage=said.append), objective, 2048.0)  # type: ignore[arg-type]
    assert budget == min(needed, host) and objective.memory_budget_mb == 2048.0  # returned: precheck applies it
    assert "memory budget raised" in said[0] and "weights 2135 MB" in said[0]
    assert ("the host can give" in said[0]) == (host_mb is None)
    assert pool.max_sessions == 1 and "keeps one at a time" in said[1]  # two sessions pass it either way
    assert rss_mb() < budget
