"""Is int8 faster than fp32 on this host at all? Measured first, in seconds, because judging what int8 keeps of
the results costs minutes, and on a host without VNNI it cannot pay (issue 51: an AVX2 EPYC spent 23 minutes
judging an int8 that ran at 0.89x-1.08x fp32).

fp32 and each int8 variant score the same stratified sample of the workload (queries spread over its lengths) at
one reasonable configuration (Hindsight's sort, a middling batch, every usable core), interleaved round by round so
that a change in the host's load falls on all of them alike. A variant is worth judging when it is faster beyond
the noise: its median paired ratio at least `WORTH`, and faster in all rounds but one.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from autotune.errors import ModelError
from autotune.measure.timing import replay
from autotune.runtime.engine import EngineConfig, OnnxPool, Scoring
from autotune.runtime.quantize import Int8Variant
from autotune.workload.queries import Query, Workload

SPEED_CONFIG = EngineConfig(batch_size=8, intra_op_threads=0, length_sort=True, precision="fp32")
ROUNDS = 5
WORTH = 1.10  # int8 must save a tenth of the time to be worth minutes of judging
FALLBACK_WORTH = 1.25  # the fallback keeps the most sensitive MatMuls in fp32 and gives back part of the gain
SAMPLE_PAIRS = 300  # about one recall's pool: seconds on any host this runs on
SAMPLE_MAX_CHARS = 2048  # about 512 tokens: longer pairs are no part of a timing sample (memory)
TIMED = ("per-token", "per-channel")  # per-tensor runs per-channel's GEMM: timed as one


@dataclass(frozen=True)
class Int8Speed:
    """Each timed variant's speed against fp32, measured side by side in this run."""

    ratios: tuple[tuple[str, float, int], ...]  # (scales, median of fp32 / int8 over paired rounds, rounds won)
    rounds: int
    pairs: int
    seconds: float
    host: str  # the ISA and int8 format the figures come from: "avx512_vnni, u8s8"
    unbuilt: tuple[tuple[str, str], ...] = ()
    remembered: bool = False  # read from an earlier run on this host type, not measured now

    def worth(self, scales: str, floor: float = WORTH) -> bool:
        timed = "per-channel" if scales == "per-tensor" else scales
        return any(s == timed and ratio >= floor and won >= self.rounds - 1 for s, ratio, won in self.ratios)

    def worth_judging(self) -> tuple[str, ...]:
        from autotune.runtime.quantize import SCALES

        return tuple(s for s in SCALES if self.worth(s))

    def best(self) -> float:
        return max((ratio for _, ratio, _ in self.ratios), default=0.0)

    def line(self) -> str:
        figures = ", ".join(f"{s} {ratio:.2f}x" for s, ratio, _ in self.ratios) or "no variant could be built"
        how = "as an earlier run on this host type measured it; --fresh measures again" if self.remembered else (
            f"{self.seconds:.0f} s")
        head = (f"int8 speed against fp32 ({self.host}; {self.pairs} pairs, {self.rounds} interleaved rounds, "
                f"{how}): {figures}")
        judged = self.worth_judging()
        if not judged:
            return f"{head}: int8 is not faster on this host beyond the noise (needs {WORTH:.2f}x); not judged"
        return f"{head}: judging {', '.join(judged)}"

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "pairs": self.pairs, "rounds": self.rounds, "seconds": round(self.seconds, 1),
                "worth": WORTH, "ratios": {s: round(r, 4) for s, r, _ in self.ratios},
                "rounds_won": {s: w for s, _, w in self.ratios}, "judged": list(self.worth_judging())}


class SpeedMemory(Protocol):
    """Where a host type's verdict on int8's speed is kept: a rerun keeps the same space (and so resumes its
    study) rather than flip on a borderline timing, and hosts sharing a study race one space."""

    def recall(self) -> Int8Speed | None:
        """The verdict kept, or None (none kept, or `--fresh`)."""

    def keep(self, speed: Int8Speed) -> Int8Speed:
        """Keep `speed`, and return the verdict that holds: another host's, where it kept one first."""


def speed_text(speed: Int8Speed) -> str:
    return json.dumps({"ratios": [list(r) for r in speed.ratios], "rounds": speed.rounds, "pairs": speed.pairs,
                       "seconds": speed.seconds, "host": speed.host})


def speed_from_text(text: str) -> Int8Speed | None:
    """A kept verdict, marked remembered; None where it does not parse (kept by another version)."""
    try:
        data = json.loads(text)
        return Int8Speed(tuple((str(s), float(r), int(w)) for s, r, w in data["ratios"]), int(data["rounds"]),
                         int(data["pairs"]), float(data["seconds"]), str(data["host"]), remembered=True)
    except (TypeError, KeyError, ValueError):
        return None


T = TypeVar("T")
SAMPLE_QUERIES = 8  # queries a sample spreads over


def evenly(items: Sequence[T], n: int) -> list[T]:
    """`n` of `items` spread evenly from the first to the last (repeats where `n` passes their count)."""
    return [items[round(k * (len(items) - 1) / max(1, n - 1))] for k in range(n)]


def speed_sample(workload: Workload, pairs: int = SAMPLE_PAIRS, max_chars: int = SAMPLE_MAX_CHARS) -> Workload:
    """About `pairs` pairs spread over the workload: up to `SAMPLE_QUERIES` queries, evenly from the smallest to
    the largest, and within each its documents evenly from the shortest to the longest. A recall's pool is
    hundreds of pairs: a sample of whole queries was its one smallest (issue 51's cost came out 4x low).
    Documents past `max_chars` (about 512 tokens) are left out where others remain, and cut to it where none
    do: a batch of 8 long-context pairs is gigabytes of attention, more than the memory budget a run keeps."""
    qs = workload.queries
    order = sorted(range(len(qs)), key=lambda i: (sum(len(d) for d in qs[i].documents) + len(qs[i].query), i))
    count = max(1, min(len(order), SAMPLE_QUERIES, pairs // 4))
    picked = sorted(set(evenly(order, count)))
    per_query = max(1, pairs // len(picked))
    out = []
    for i in picked:
        docs = sorted(qs[i].documents, key=len)
        docs = [d for d in docs if len(d) <= max_chars] or [d[:max_chars] for d in docs]
        if len(docs) > per_query:
            docs = evenly(docs, per_query)
        out.append(Query(qs[i].query[:max_chars], docs))
    return Workload(out, workload.sha256)


def _interleaved(engines: dict[str, Scoring], queries: list[Query], rounds: int) -> dict[str, list[float]]:
    """Each engine's time over `queries`, `rounds` times, each going first in turn, after a warming pass. A
    function of its own, so that no loop variable holds an engine (and its session) past it."""
    for engine in engines.values():
        replay(engine, queries[:1])  # warm: thread pools up, arenas grown
    times: dict[str, list[float]] = {name: [] for name in engines}
    names = list(engines)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            clock = time.perf_counter()
            replay(engines[name], queries)
            times[name].append(time.perf_counter() - clock)
    return times


def mean_chars(workload: Workload) -> float:
    """Characters per pair, query included: how much longer a workload's pairs are than a sample's."""
    pairs = [(len(q.query), len(d)) for q in workload.queries for d in q.documents]
    return sum(a + b for a, b in pairs) / max(1, len(pairs))


def int8_speed(pool: OnnxPool, workload: Workload, *, host: str, rounds: int = ROUNDS) -> Int8Speed:
    """fp32 and each int8 variant of `TIMED`, interleaved over `rounds` on a stratified sample."""
    started = time.monotonic()
    sample = speed_sample(workload)
    fp32 = pool.engine(SPEED_CONFIG)
    int8_config = replace(SPEED_CONFIG, precision="int8")
    engines, unbuilt = {}, []
    previous = pool.int8_variant
    for scales in TIMED:
        try:
            pool.use_int8(Int8Variant(scales))
            engines[scales] = pool.engine_on(pool.model_path(int8_config), int8_config)
        except ModelError as exc:
            unbuilt.append((scales, str(exc)))
    pool.use_int8(previous)
    times = _interleaved({"fp32": fp32, **engines}, sample.queries, rounds)
    ratios = []
    for scales in engines:
        paired = [f / i for f, i in zip(times["fp32"], times[scales], strict=True) if i > 0]
        ratios.append((scales, statistics.median(paired), sum(p > 1.0 for p in paired)))
    del fp32, engines  # three sessions: freed, and the heap given back, before the search measures memory
    pool.release()  # which gives the heap back
    return Int8Speed(tuple(ratios), rounds, sum(len(q.documents) for q in sample.queries),
                     time.monotonic() - started, host, tuple(unbuilt))
