"""Each phase of `autotune run` called on its own, with the typed values it takes (issues 45 and 53).

`prepare` and `load` make the inputs every phase reads (the options this test writes, the tiny model and its
fp32 reference). From there, each phase's input is a value this test writes itself: the pre-checks' verdict, a
study with the trials it names, the finalists and their figures, the scope, the judged result. No phase runs
to make another's input, so a phase is tested on what it is handed, not on what the one before happened to do.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest

from autotune.gates.parity import compare
from autotune.gates.scope import Agreement, ResultGate, Scope
from autotune.host import run_conditions
from autotune.measure.client_sizing import ServedLoad
from autotune.measure.noise import Conditions, NoiseSample
from autotune.measure.stats import Latency
from autotune.pipeline import phases
from autotune.pipeline.handoffs import Checked, Judged, Loaded, Prepared, Raced, Scoped, Searched, Tuning
from autotune.pipeline.options import RunOptions
from autotune.pipeline.record import SearchResult
from autotune.runtime.engine import EngineConfig
from autotune.search.finalists import Finalist
from autotune.search.memory_report import MemoryReport
from autotune.search.objective import Objective
from autotune.search.scope_outcome import ScopeOutcome
from autotune.search.space import SearchSettings
from autotune.search.storage import open_storage
from tests.support.models import write_workload

BUDGET_MB = 4096.0


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's own state and lock dirs: its fixtures are made before the per-test isolated ones."""
    work = tmp_path_factory.mktemp("phases")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOTUNE_STATE_DIR", str(work / "state"))
        mp.setenv("AUTOTUNE_LOCK_DIR", str(work))
        yield work


@pytest.fixture(scope="module")
def prepared(work: Path, tiny_model_dir: Path) -> Prepared:
    said: list[str] = []
    opts = RunOptions(workload=write_workload(work / "queries.jsonl"), model=tiny_model_dir, env_file=work / ".env",
                      profile_dir=work / "profiles", compose_file=None, model_out=work / "model",
                      settings=SearchSettings(trials=3, repeats=1, final_rounds=1, refine_rounds=1))
    return phases.prepare(opts, stage=said.append)


@pytest.fixture(scope="module")
def loaded(prepared: Prepared) -> Loaded:
    return phases.load(prepared)


@pytest.fixture(scope="module")
def tuning(prepared: Prepared, loaded: Loaded) -> Tuning:
    """A pre-check verdict written here: fp32, the plain graph, a budget of BUDGET_MB."""
    space = dataclasses.replace(prepared.space, precisions=("fp32",), graphs=("plain",))
    objective = Objective(loaded.pool, prepared.workload, loaded.reference, space, prepared.settings,
                          memory_budget_mb=BUDGET_MB)
    return Tuning(prepared, loaded, Checked(space, [], None, False, objective))


def _config(batch: int) -> EngineConfig:
    return EngineConfig(batch_size=batch, intra_op_threads=0, length_sort=False, precision="fp32")


@pytest.fixture(scope="module")
def searched() -> Searched:
    """A study holding the trials written here: batch 4 the fastest, batch 8 next, batch 2 infeasible."""
    study = optuna.create_study(study_name="autotune-onnx-written")
    for batch, value, parity in ((4, 10.0, 0.0), (8, 12.0, 0.0), (2, 5.0, 1.0)):
        params = _config(batch).to_dict()
        study.add_trial(optuna.trial.create_trial(
            params=params, value=value, constraints={"parity": parity, "memory": 0.0},
            distributions={k: optuna.distributions.CategoricalDistribution([v]) for k, v in params.items()}))
    return Searched(study, study.study_name, 3, 0)


def _finalist(tuning: Tuning, config: EngineConfig, p95_ms: float, *, baseline: bool = False) -> Finalist:
    parity = compare(tuning.reference, tuning.reference, tuning.settings.tolerance("fp32"))
    return Finalist(config, Latency(p95_ms / 2, p95_ms, p95_ms), [p95_ms], parity, is_baseline=baseline)


@pytest.fixture(scope="module")
def raced(tuning: Tuning) -> Raced:
    """Hindsight's defaults at 30 ms, batch 4 the winner at 10 ms."""
    baseline = _finalist(tuning, tuning.space.baseline(), 30.0, baseline=True)
    winner = _finalist(tuning, _config(4), 10.0)
    return Raced([baseline, winner], winner, [], None, None)


@pytest.fixture(scope="module")
def scoped(raced: Raced) -> Scoped:
    whole = Scope()
    n = 3
    outcome = ScopeOutcome(whole, whole, False, ResultGate(), Agreement([1.0] * n, [True] * n, 0, [1.0] * n),
                           note="written by the test")
    return Scoped(outcome, raced.winner, raced.finalists[0])


@pytest.fixture(scope="module")
def judged(tuning: Tuning, searched: Searched, raced: Raced, scoped: Scoped) -> Judged:
    result = SearchResult(searched.study_name, scoped.winner, scoped.baseline, raced.finalists, [],
                          scope=scoped.outcome, phases_s={"search": 1.0})
    return Judged(result, Conditions(run_conditions(), NoiseSample(), True), None)


def test_prepare_reads_every_input_before_a_model_loads(prepared):
    assert prepared.workload.queries and prepared.space.size() > 1 and prepared.committed is None
    assert prepared.cap is None and prepared.traffic.concurrency == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.space = prepared.space  # type: ignore[misc]


def test_load_gives_the_model_its_pool_and_the_fp32_reference(prepared, loaded):
    assert len(loaded.reference) == len(prepared.workload.queries)
    assert [len(r) for r in loaded.reference] == [len(q.documents) for q in prepared.workload.queries]
    assert loaded.recording is None  # no recorded Hindsight scores in this workload
    assert loaded.pool.bundle is loaded.bundle


def test_precheck_narrows_the_space_and_builds_the_objective(prepared, loaded):
    checked: Checked = phases.precheck(prepared, loaded, optuna.storages.InMemoryStorage())
    assert set(checked.space.precisions) <= set(prepared.space.precisions)
    assert checked.objective.space is checked.space and checked.budget_mb > 0
    assert checked.int8_considered == ("int8" in prepared.space.precisions)
    assert (checked.int8 is not None) == checked.int8_considered


def test_search_runs_the_study_and_names_it(tuning):
    searched = phases.search(tuning, open_storage(None))
    assert searched.study_name.startswith("autotune-onnx-") and searched.trials == 3
    assert len(searched.study.get_trials(deepcopy=False)) >= 3


def test_refine_climbs_from_the_best_feasible_trial_it_is_handed(tuning, searched):
    refined = phases.refine(tuning, searched.study)
    assert refined is not None and refined.start == _config(4)  # batch 2 was faster, and failed parity
    assert tuning.space.fits(refined.best) and refined.steps


def test_race_puts_hindsights_defaults_first_and_checks_parity_again(tuning, searched):
    raced = phases.race(tuning, searched.study, None)
    assert raced.finalists[0].config == tuning.space.baseline() and raced.baseline_skipped is None
    assert {f.config for f in raced.finalists[1:]} == {_config(4), _config(8)}  # the infeasible trial never races
    assert all(f.parity is not None for f in raced.finalists)
    assert raced.winner in raced.passing and raced.rerun is None


def test_scope_keeps_the_whole_pool_without_a_recorded_one(tuning, raced):
    scoped = phases.scope(tuning, raced)
    assert scoped.winner is raced.winner and scoped.baseline is raced.finalists[0]
    assert scoped.outcome.note is not None and "no recorded pool" in scoped.outcome.note


def test_judge_returns_typed_figures(tuning, searched, raced, scoped):
    judged = phases.judge(tuning, searched, None, raced, scoped, NoiseSample(), {"search": 1.0})
    result = judged.result
    assert result.winner is scoped.winner and result.scope is scoped.outcome
    assert result.memory.budget_mb == BUDGET_MB  # the one budget the objective holds
    assert isinstance(result.memory, MemoryReport) and result.memory.served_mb is not None
    assert result.load is None or isinstance(result.load, ServedLoad)  # the onnx target: no client to size
    assert isinstance(judged.conditions, Conditions) and judged.conditions.note is not None  # one final round
    assert result.phases_s == {"search": 1.0}
    assert [t.config for t in result.trials] == [_config(4), _config(8), _config(2)]  # the study it was handed


def test_commit_writes_what_judge_decided(work, tuning, judged):
    outcome = phases.commit(tuning, judged)
    profile: dict[str, Any] = outcome.profile
    assert outcome.profile_path.is_file() and (work / ".env").is_file()
    assert profile["config"] == judged.result.winner.config.to_dict()
    assert profile["metrics"]["baseline_p95_ms"] == 30.0 and profile["metrics"]["speedup_p95"] == 3.0
    assert json.dumps(profile["noise"])  # the conditions, as plain values


def test_the_study_is_another_when_the_int8_graph_is_another(prepared, loaded, tuning):
    """A study resumed over another int8 variant would race one graph's timings against another's."""
    from autotune.gates.int8_judge import Int8Verdict
    from autotune.runtime.quantize import Int8Variant

    def digest(variant: Int8Variant | None) -> str:
        checked = dataclasses.replace(tuning.checked, int8=Int8Verdict((), variant))
        return phases.timed_digest(prepared, loaded, checked)

    assert len({digest(Int8Variant("per-token")), digest(Int8Variant("per-channel")), digest(None)}) == 3
