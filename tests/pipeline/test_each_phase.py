"""Each phase of `autotune run` called on its own, with the typed values the one before hands it (issue 45).

The values are made once for the module, each by its own phase, on the tiny model; every test calls exactly
one phase and checks what it returns. No phase fills a field of another's value: the hand-offs are frozen.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.pipeline import phases
from autotune.pipeline.handoffs import Checked, Judged, Loaded, Prepared, Raced, Scoped, Searched, Tuning
from autotune.pipeline.options import RunOptions
from autotune.search.client_sizing import ServedLoad
from autotune.search.memory_report import MemoryReport
from autotune.search.noise import Conditions, NoiseSample
from autotune.search.space import SearchSettings
from autotune.search.storage import open_storage
from tests.support.models import write_workload


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
    return Tuning(prepared, loaded, phases.precheck(prepared, loaded))


@pytest.fixture(scope="module")
def searched(tuning: Tuning) -> Searched:
    return phases.search(tuning, open_storage(None))


@pytest.fixture(scope="module")
def raced(tuning: Tuning, searched: Searched) -> Raced:
    return phases.race(tuning, searched.study, None)


@pytest.fixture(scope="module")
def scoped(tuning: Tuning, raced: Raced) -> Scoped:
    return phases.scope(tuning, raced)


@pytest.fixture(scope="module")
def judged(tuning: Tuning, searched: Searched, raced: Raced, scoped: Scoped) -> Judged:
    return phases.judge(tuning, searched, None, raced, scoped, NoiseSample(), {"search": 1.0})


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


def test_precheck_narrows_the_space_and_builds_the_objective(prepared, tuning):
    checked: Checked = tuning.checked
    assert set(checked.space.precisions) <= set(prepared.space.precisions)
    assert checked.objective.space is checked.space and checked.budget_mb > 0
    assert checked.int8_considered == ("int8" in prepared.space.precisions)
    assert (checked.int8 is not None) == checked.int8_considered


def test_search_runs_the_study_and_names_it(tuning, searched):
    assert searched.study_name.startswith("autotune-onnx-") and searched.trials == 3
    assert len(searched.study.get_trials(deepcopy=False)) >= 3


def test_refine_climbs_from_the_searchs_best(tuning, searched):
    refined = phases.refine(tuning, searched.study)
    assert refined is not None and tuning.space.fits(refined.best) and refined.steps


def test_race_puts_hindsights_defaults_first_and_checks_parity_again(tuning, raced):
    assert raced.finalists[0].config == tuning.space.baseline() and raced.baseline_skipped is None
    assert all(f.parity is not None for f in raced.finalists)
    assert raced.winner in raced.passing and raced.rerun is None


def test_scope_keeps_the_whole_pool_without_a_recorded_one(raced, scoped):
    assert scoped.winner is raced.winner and scoped.baseline is not None
    assert scoped.outcome.note is not None and "no recorded pool" in scoped.outcome.note


def test_judge_returns_typed_figures(judged, scoped):
    result = judged.result
    assert result.winner is scoped.winner and result.scope is scoped.outcome
    assert isinstance(result.memory, MemoryReport) and result.memory.served_mb is not None
    assert result.load is None or isinstance(result.load, ServedLoad)  # the onnx target: no client to size
    assert isinstance(judged.conditions, Conditions) and judged.conditions.note is not None  # one final round
    assert result.phases_s == {"search": 1.0}


def test_commit_writes_what_judge_decided(work, tuning, judged):
    outcome = phases.commit(tuning, judged)
    profile: dict[str, Any] = outcome.profile
    assert outcome.profile_path.is_file() and (work / ".env").is_file()
    assert profile["config"] == judged.result.winner.config.to_dict()
    assert profile["memory"]["served_mb"] == pytest.approx(judged.result.memory.served_mb, abs=0.1)
    assert json.dumps(profile["noise"])  # the conditions, as plain values


def test_the_study_is_another_when_the_int8_graph_is_another(prepared, loaded, tuning):
    """A study resumed over another int8 variant would race one graph's timings against another's."""
    from autotune.runtime.quantize import Int8Variant
    from autotune.search.int8_judge import Int8Verdict

    def digest(variant: Int8Variant | None) -> str:
        checked = dataclasses.replace(tuning.checked, int8=Int8Verdict((), variant))
        return phases.timed_digest(prepared, loaded, checked)

    assert len({digest(Int8Variant("per-token")), digest(Int8Variant("per-channel")), digest(None)}) == 3
