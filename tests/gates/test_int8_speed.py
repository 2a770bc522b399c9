"""int8's speed is measured before its results are judged, and a slow int8 is never judged (issue 51)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.gates import prechecks
from autotune.gates.int8_judge import INT8, INT8_BATCHED
from autotune.gates.int8_speed import Int8Speed, int8_speed, speed_sample
from autotune.gates.parity import FP32_TOLERANCE, INT8_TOLERANCE, compare
from autotune.measure.timing import scores_of
from autotune.runtime.quantize import Int8Variant
from tests.support.setting import SPACE

SLOW = Int8Speed((("per-token", 0.99, 2), ("per-channel", 1.04, 3)), 5, 300, 4.0, "no VNNI, u8u8")
FAST = Int8Speed((("per-token", 1.32, 5), ("per-channel", 1.08, 4)), 5, 300, 4.0, "avx512_vnni, u8s8")


def test_only_a_variant_faster_beyond_the_noise_is_worth_judging():
    assert SLOW.worth_judging() == () and "not faster on this host" in SLOW.line() and "0.99x" in SLOW.line()
    assert "no VNNI, u8u8" in SLOW.line()
    assert FAST.worth_judging() == ("per-token",)  # per-channel's 1.08x is within the noise
    lucky = Int8Speed((("per-token", 1.5, 3),), 5, 300, 4.0, "x")  # fast in the median, slower in two rounds
    assert lucky.worth_judging() == ()


def test_a_slow_int8_leaves_the_space_unjudged(setup, monkeypatch):
    pool, workload, reference = setup
    monkeypatch.setattr(prechecks, "int8_speed", lambda *a, **k: SLOW)

    def never(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("int8 was judged on a host where it is not faster")

    monkeypatch.setattr(prechecks, "judge_int8", never)
    space = SPACE.narrowed(precisions=("fp32", "int8"))
    narrowed, dropped, verdict = prechecks.prechecked(space, pool, workload, reference, INT8_TOLERANCE,
                                                      has_vnni=False, speed_first=True)
    assert narrowed.precisions == ("fp32",) and verdict is not None and verdict.chosen is None
    assert verdict.reports == () and verdict.lines() == [SLOW.line()]
    assert [d.knob for d in dropped] == ["precision"] and "not judged" in dropped[0].reason


def test_a_fast_int8_is_judged_variant_by_variant_as_fast_as_it_measured(setup, monkeypatch):
    pool, workload, reference = setup
    monkeypatch.setattr(prechecks, "int8_speed", lambda *a, **k: FAST)
    space = SPACE.narrowed(precisions=("fp32", "int8"))
    _, _, verdict = prechecks.prechecked(space, pool, workload, reference, INT8_TOLERANCE, has_vnni=False,
                                         speed_first=True)
    assert verdict is not None and verdict.speed is FAST
    assert {v.scales for v, _ in verdict.reports} <= {"per-token"} and verdict.lines()[0] == FAST.line()


def test_the_speed_is_measured_side_by_side_on_a_sample(setup):
    pool, workload, _ = setup
    speed = int8_speed(pool, workload, host="test", rounds=3)
    assert [s for s, _, _ in speed.ratios] == ["per-token", "per-channel"]
    assert all(r > 0 and 0 <= won <= 3 for _, r, won in speed.ratios) and speed.rounds == 3
    assert 0 < len(speed_sample(workload, pairs=6).queries) < len(workload.queries)


def test_timing_leaves_no_session_alive_for_the_search(setup, monkeypatch):
    """The three timed sessions are freed when the pool is released, before the search measures memory: a loop
    variable once held the last one past the release."""
    import weakref

    pool, workload, _ = setup
    made: list[weakref.ref[object]] = []
    alive_at_release: list[int] = []
    for name in ("engine", "engine_on"):
        real = getattr(pool, name)
        monkeypatch.setattr(pool, name, lambda *a, real=real: made.append(weakref.ref((e := real(*a)).backend)) or e)
    release = pool.release
    monkeypatch.setattr(pool, "release", lambda: alive_at_release.append(sum(r() is not None for r in made))
                        or release())
    int8_speed(pool, workload, host="test", rounds=1)
    assert len(made) == 3 and alive_at_release == [1]  # the pooled fp32 session, which the release drops


def test_per_token_judged_in_batches_gives_the_batch_one_verdict(setup):
    pool, workload, reference = setup
    pool.use_int8(Int8Variant("per-token"))
    one = scores_of(pool, INT8, workload)
    batched = scores_of(pool, INT8_BATCHED, workload)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(one, batched, strict=True)) < 0.01
    for tolerance in (INT8_TOLERANCE, FP32_TOLERANCE):
        a, b = compare(reference, one, tolerance), compare(reference, batched, tolerance)
        assert a.passed == b.passed and a.topk_mean == pytest.approx(b.topk_mean, abs=0.02)


def test_the_fallback_runs_only_where_its_cost_fits_the_plan_and_the_speed_can_pay(setup, monkeypatch):
    """Issue 51: the fallback once measured 36 MatMuls alone for 23 minutes on a host where int8 cannot pay."""
    import time

    from autotune.gates import int8_judge
    from autotune.gates.int8_judge import judge_int8
    from autotune.gates.parity import Tolerance

    def never(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("the fallback measured sensitivities")

    monkeypatch.setattr(int8_judge, "sensitivities", never)
    pool, workload, reference = setup
    strict = Tolerance(max_abs=0.0, min_spearman=1.0, min_topk=1.0)  # no variant passes
    out_of_time = judge_int8(pool, workload, reference, strict, has_vnni=False, until=time.monotonic())
    assert out_of_time.chosen is None and "time plan" in str(out_of_time.fallback_skipped)
    slow = Int8Speed((("per-token", 1.12, 5),), 5, 300, 4.0, "no VNNI, u8u8")  # judged, but too slow to refine
    cannot_pay = judge_int8(pool, workload, reference, strict, has_vnni=False, speed=slow)
    assert cannot_pay.chosen is None and "too little to pay" in str(cannot_pay.fallback_skipped)
    assert any("fallback not run" in line for line in cannot_pay.lines())


def test_sensitivities_are_taken_on_queries_spread_over_the_workload():
    from autotune.gates.int8_judge import SENSITIVITY_QUERIES, sensitivity_sample
    from autotune.workload.queries import Query, Workload

    queries = [Query(f"q{i}", ["x" * (10 * i + 1)] * (i % 5 + 1)) for i in range(30)]
    picked = sensitivity_sample(Workload(queries, "w"))
    sizes = sorted(range(30), key=lambda i: sum(len(d) for d in queries[i].documents))
    assert len(picked) == SENSITIVITY_QUERIES and sizes[0] in picked and sizes[-1] in picked
    assert picked != list(range(SENSITIVITY_QUERIES))  # not the first few


def test_a_sample_of_large_pools_spreads_over_queries_and_their_documents():
    """A recording's pools are hundreds of pairs: the sample once was its one smallest query, and the cost of a
    pair came out four times too low on issue 51's recording."""
    from autotune.workload.queries import Query, Workload

    queries = [Query(f"q{i}", [("memory " * (k % 50 + 1 + i)).strip() for k in range(200)]) for i in range(16)]
    sample = speed_sample(Workload(queries, "w"), pairs=48)
    assert len(sample.queries) == 8 and sum(len(q.documents) for q in sample.queries) == 48
    assert sample.queries[-1].query == "q15" and sample.queries[0].query == "q0"  # smallest to largest
    lengths = [len(d) for d in sample.queries[0].documents]
    assert min(lengths) == min(len(d) for d in queries[0].documents)  # its shortest and its longest documents
    assert max(lengths) == max(len(d) for d in queries[0].documents)


def test_a_sample_leaves_out_long_context_pairs():
    """A batch of 8 pairs at 8,192 tokens is gigabytes of attention: no timing sample holds one."""
    from autotune.workload.queries import Query, Workload

    long = "word " * 20_000
    sample = speed_sample(Workload([Query("q", ["short one", long, "short two"]), Query("r", [long])], "w"), 48)
    assert all(len(d) <= 2048 for q in sample.queries for d in q.documents)
    assert sample.queries[0].documents == ["short one", "short two"] and len(sample.queries[1].documents) == 1
