"""int8's speed verdict is kept in the study storage: the first host's holds for every host sharing the study, so
they search one space (CI of session 23: two hosts timed a borderline int8 apart and split into two studies)."""

from __future__ import annotations

import optuna
import pytest

from autotune.gates import prechecks
from autotune.gates.int8_speed import Int8Speed
from autotune.gates.parity import INT8_TOLERANCE
from autotune.paths import read_caches
from autotune.search.study import study_summaries
from autotune.search.verdicts import VERDICTS_STUDY, StoredSpeed
from tests.support.setting import SPACE

SLOW = Int8Speed((("per-token", 0.98, 2), ("per-channel", 1.05, 3)), 5, 300, 4.0, "avx512_vnni, u8s8")
FAST = Int8Speed((("per-token", 1.12, 5), ("per-channel", 1.04, 3)), 5, 300, 4.0, "avx512_vnni, u8s8")


@pytest.fixture
def store() -> optuna.storages.BaseStorage:
    return optuna.storages.InMemoryStorage()


def test_the_first_verdict_kept_holds_for_a_host_that_measured_another(store):
    a, b = StoredSpeed(store, "host|model|ort|512"), StoredSpeed(store, "host|model|ort|512")
    assert a.recall() is None and b.recall() is None  # both measure at once
    assert a.keep(SLOW) is SLOW
    agreed = b.keep(FAST)
    assert agreed.ratios == SLOW.ratios and agreed.remembered and "earlier run" in agreed.line()
    assert b.recall() == agreed
    assert StoredSpeed(store, "host|model|ort|256").recall() is None  # another token cut: timed again


def test_fresh_reads_nothing_and_replaces_the_verdict(store):
    StoredSpeed(store, "k").keep(SLOW)
    read_caches(False)
    try:
        assert StoredSpeed(store, "k").recall() is None
        assert StoredSpeed(store, "k").keep(FAST) is FAST
    finally:
        read_caches(True)
    assert StoredSpeed(store, "k").recall().ratios == FAST.ratios  # type: ignore[union-attr]  # kept above


def test_a_second_host_searches_the_first_hosts_space_where_its_own_timing_differs(setup, store, monkeypatch):
    pool, workload, reference = setup
    timings = iter([SLOW, FAST])
    monkeypatch.setattr(prechecks, "int8_speed", lambda *a, **k: next(timings))
    space = SPACE.narrowed(precisions=("fp32", "int8"))
    spaces = [prechecks.prechecked(space, pool, workload, reference, INT8_TOLERANCE, speed_first=True,
                                   memory=StoredSpeed(store, "k"))[0] for _host in ("a", "b")]
    assert spaces[0] == spaces[1] and spaces[0].precisions == ("fp32",)
    assert next(timings) is FAST  # the second host never timed int8: it read the first's verdict


def test_the_verdicts_are_no_study_to_list(store):
    StoredSpeed(store, "k").keep(SLOW)
    optuna.create_study(study_name="autotune-tei-fp-model-work-digest", storage=store)
    assert [s.name for s in study_summaries(store)] == ["autotune-tei-fp-model-work-digest"]
    assert VERDICTS_STUDY in [s.study_name for s in optuna.get_all_study_summaries(store)]
