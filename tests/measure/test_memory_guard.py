"""The RSS watchdog (issue 37): a run stops with one line naming what it measured, before passing the budget."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from autotune.errors import ExitStatus, OptionsError
from autotune.measure.memory import rss_mb
from autotune.measure.memory_guard import MemoryGuard, check, measuring
from autotune.measure.timing import replay_loaded
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.workload.queries import load_workload
from tests.support.cli import run_cli
from tests.support.models import write_workload


def _tripped(guard: MemoryGuard) -> None:
    deadline = time.monotonic() + 10
    while guard.tripped_mb is None and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_guard_below_the_rss_trips_and_names_what_was_measured():
    with MemoryGuard(budget_mb=rss_mb() / 2) as guard:
        measuring("trial 3 (bs=4 threads=1)")
        _tripped(guard)
        with pytest.raises(OptionsError, match=r"stopped while measuring trial 3 \(bs=4 threads=1\)"):
            check()
    check()  # no guard, nothing to stop


def test_a_guard_with_room_never_trips():
    with MemoryGuard(budget_mb=rss_mb() * 4 + 1024) as guard:
        time.sleep(0.05)
        check()
    assert guard.tripped_mb is None


def test_concurrent_workers_stop_between_queries(tiny_model_dir, tmp_path):
    workload = load_workload(write_workload(tmp_path / "q.jsonl", n_queries=8))
    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(shared_session=False))
    config = replace(EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32"), workers=2)
    engines = pool.serving(config)
    with MemoryGuard(budget_mb=rss_mb() / 2) as guard:
        _tripped(guard)
        with pytest.raises(OptionsError, match="stopped while measuring"):
            replay_loaded(engines, workload.queries, 8)


def test_a_run_whose_rss_reaches_the_budget_stops_in_one_line_and_writes_nothing(tmp_path, tiny_model_dir,
                                                                                  workload_file, monkeypatch):
    """The budget is generous enough for every estimate; the measured RSS is what the guard holds to."""
    monkeypatch.setattr(MemoryGuard, "__init__", _tight(MemoryGuard.__init__))
    status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                              "--env-file", str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"),
                              "--no-compose", "--trials", "2", "--repeats", "1", "--final-rounds", "1"])
    errors = [ln for ln in err.splitlines() if ln.startswith("autotune: error:")]
    assert status == ExitStatus.BAD_OPTIONS and errors == [err.strip().splitlines()[-1]], err
    assert "stopped while measuring trial 0 (" in errors[0] and "--max-memory" in errors[0] and "Traceback" not in err
    assert not (tmp_path / ".env").exists() and not (tmp_path / "p").exists()


def _tight(init):  # type: ignore[no-untyped-def]
    """The guard's own limit set well under the RSS the run already holds, whatever the budget says."""
    def tight_init(self, budget_mb, **kwargs):  # type: ignore[no-untyped-def]
        init(self, budget_mb, **kwargs)
        self.limit_mb = rss_mb() * 0.5  # so far under that freeing a trial's sessions cannot get back under it
    return tight_init
