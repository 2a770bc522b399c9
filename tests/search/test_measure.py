from __future__ import annotations

from autotune.search.measure import interleaved, time_queries
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
