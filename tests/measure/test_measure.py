from __future__ import annotations

from autotune.measure.timing import interleaved, time_queries
from autotune.workload.queries import Query

QUERIES = [Query("q1", ["a"]), Query("q2", ["b", "c"])]


def test_interleaved_rotates_who_goes_first_and_keeps_warmups_apart():
    calls: list[str] = []

    def scorer(name: str):
        def score(query: str, docs: list[str]) -> None:
            calls.append(name)
        return score

    passes = interleaved([scorer("A"), scorer("B"), scorer("C")], QUERIES, rounds=3, warmup_queries=1)
    assert calls[:3] == ["A", "B", "C"]  # one warm-up query each, not timed
    timed = calls[3:]
    firsts = [timed[i] for i in range(0, len(timed), 2 * 3)]
    assert firsts == ["A", "B", "C"]
    assert [len(p) for p in passes] == [3, 3, 3] and all(len(r) == 2 for p in passes for r in p)


def test_time_queries_is_per_query():
    assert len(time_queries(lambda q, d: None, QUERIES)) == 2


class Sleeper:
    """A scorer that takes `seconds` a query and remembers how many ran at once."""

    running = 0
    peak = 0

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def score(self, query: str, documents: list[str]):  # type: ignore[no-untyped-def]
        import time

        import numpy as np

        from autotune.runtime.engine import ScoreResult

        Sleeper.running += 1
        Sleeper.peak = max(Sleeper.peak, Sleeper.running)
        time.sleep(self.seconds)
        Sleeper.running -= 1
        n = len(documents)
        return ScoreResult(np.zeros(n), np.zeros(n), self.seconds, 0.0, self.seconds, n, n, [1] * n)


def test_a_loaded_replay_counts_the_queue_in_each_latency_and_serves_one_query_per_worker():
    from autotune.measure.timing import replay_loaded

    queries = [Query(f"q{i}", ["a"]) for i in range(4)]
    Sleeper.peak = 0
    one = replay_loaded([Sleeper(0.1)], queries, concurrency=4)
    assert Sleeper.peak == 1
    assert max(one.seconds) >= 0.35  # the last waited behind three others (a VM's sleep can end a little early)
    Sleeper.peak = 0
    two = replay_loaded([Sleeper(0.1), Sleeper(0.1)], queries, concurrency=4, keep_scores=True)
    assert Sleeper.peak == 2 and len(two.scores) == 4  # two workers served two queries at once


def test_a_loaded_replay_raises_what_a_worker_raised():
    import pytest

    from autotune.measure.timing import replay_loaded

    class Broken:
        def score(self, query: str, documents: list[str]):  # type: ignore[no-untyped-def]
            raise ValueError("broken model")

    with pytest.raises(ValueError, match="broken model"):
        replay_loaded([Broken()], QUERIES, concurrency=2)


def test_fewer_queries_than_clients_are_sent_until_every_client_has_one():
    from autotune.measure.timing import replay_loaded

    Sleeper.peak = 0
    calls = []

    class Counting(Sleeper):
        def score(self, query, documents):  # type: ignore[no-untyped-def]
            calls.append(query)
            return super().score(query, documents)

    result = replay_loaded([Counting(0.05)], [Query("a", ["x"]), Query("b", ["y"])], concurrency=6)
    assert len(calls) == 6 and sorted(set(calls)) == ["a", "b"]
    assert len(result.seconds) == 2 and max(result.seconds) >= 0.25  # the slowest copy waited behind five


def test_a_contender_left_out_after_a_round_keeps_the_rounds_it_ran():
    from autotune.measure.timing import interleaved_passes

    calls: list[str] = []

    def timer(name: str):
        def run(queries):
            calls.append(name)
            return [0.0 for _ in queries]
        return run

    passes = interleaved_passes([timer("A"), timer("B"), timer("C")], QUERIES, rounds=3, warmup_queries=0,
                                still_in=lambda p: [0, 2])  # B goes after the first round
    assert [len(p) for p in passes] == [3, 1, 3]
    assert calls.count("B") == 1 and calls.count("A") == calls.count("C") == 3
    stopped = interleaved_passes([timer("A"), timer("B")], QUERIES, rounds=3, warmup_queries=0,
                                 still_in=lambda p: [])
    assert [len(p) for p in stopped] == [1, 1]  # nobody left: no more rounds


def test_where_the_pool_keeps_one_session_a_race_never_holds_two(setup):
    """Issue 52: an interleaved race held every contender's session (each timer kept its engine), so a pool
    told to keep one 2.2 GB session at a time still held two, and the run stopped at the memory guard."""
    import gc
    import weakref

    from autotune.measure.timing import Load, interleaved_passes
    from autotune.runtime.engine import EngineConfig

    pool, workload, _ = setup
    pool.keep_sessions(1)
    configs = [EngineConfig(batch_size=b, intra_op_threads=1, length_sort=True, precision="fp32", mem_arena=arena)
               for b, arena in ((1, True), (4, False))]  # the arena is part of a session's key: two sessions
    alive: list[int] = []
    made = []
    real_new = pool._new_backend

    def counted(config: EngineConfig) -> object:
        gc.collect()
        alive.append(sum(ref() is not None for ref in made))  # sessions still alive when another is made
        backend = real_new(config)
        made.append(weakref.ref(backend))
        return backend

    pool._new_backend = counted  # type: ignore[method-assign]
    timers = [Load().timer(pool, c) for c in configs]
    passes = interleaved_passes(timers, workload.queries, rounds=2)
    assert [len(p) for p in passes] == [2, 2]
    assert len(made) >= 4 and max(alive) == 0  # made again each turn, never beside another
