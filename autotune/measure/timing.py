"""Replay a workload through an engine and time it, warmups kept apart from values."""

from __future__ import annotations

import functools
import itertools
import math
import queue
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from autotune.measure.memory_guard import check as check_memory
from autotune.runtime.engine import EngineConfig, ScoreResult, Scoring, ScoringPool, engines_for
from autotune.workload.queries import Query, Workload

Scorer = Callable[[str, list[str]], object]
PassTimer = Callable[[Sequence[Query]], list[float]]  # one pass over queries: each one's seconds


@dataclass
class Pass:
    """One replay of the workload: per-query seconds and (optionally) per-query scores."""

    seconds: list[float]
    scores: list[np.ndarray]
    inference_s: float
    real_tokens: int
    padded_tokens: int
    lengths: list[list[int]]


def replay(engine: Scoring, queries: Sequence[Query], *, keep_scores: bool = False) -> Pass:
    """One query at a time, as a lone recall sees the reranker."""
    results = []
    for q in queries:
        check_memory()
        results.append(engine.score(q.query, q.documents))
    return _pass(results, [r.total_s for r in results], keep_scores)


def seconds_per_pair(engine: Scoring, queries: Sequence[Query]) -> float:
    """What one pair costs this engine on these queries, after one warm-up query (thread pools, arenas)."""
    replay(engine, queries[:1])
    pairs = sum(len(q.documents) for q in queries)
    started = time.perf_counter()
    replay(engine, queries)
    return (time.perf_counter() - started) / max(1, pairs)


def scores_of(pool: ScoringPool, config: EngineConfig, workload: Workload) -> list[np.ndarray]:
    """A configuration's scores for every query of the workload, one query at a time."""
    return replay(pool.engine(config), workload.queries, keep_scores=True).scores


def replay_loaded(engines: Sequence[Scoring], queries: Sequence[Query], concurrency: int, *,
                  keep_scores: bool = False) -> Pass:
    """`concurrency` closed-loop clients, each sending the next query as soon as its last one is answered,
    served first come first served by one thread per engine (a worker with its own session).

    Each query's seconds run from its submission to its answer, so they include the wait in the queue:
    what a recall sees when others reranked at the same moment. All clients start at once, as a burst.
    With fewer queries than clients, the workload is sent several times over, so that every client has
    a request; a query's seconds are then its slowest copy's.
    """
    copies = max(1, math.ceil(concurrency / max(len(queries), 1)))
    sent = [i for _ in range(copies) for i in range(len(queries))]
    jobs: queue.SimpleQueue[tuple[int, float, threading.Event] | None] = queue.SimpleQueue()
    results: list[ScoreResult | None] = [None] * len(sent)
    seconds = [0.0] * len(sent)
    failures: list[BaseException] = []
    counter = itertools.count()
    lock = threading.Lock()

    def work(engine: Scoring) -> None:
        while (job := jobs.get()) is not None:
            k, submitted, done = job
            try:
                if not failures:
                    check_memory()
                    q = queries[sent[k]]
                    results[k] = engine.score(q.query, q.documents)
            except BaseException as exc:  # re-raised in the caller, after every thread has stopped
                failures.append(exc)
            seconds[k] = time.perf_counter() - submitted
            done.set()

    def client() -> None:
        while True:
            with lock:
                k = next(counter)
            if k >= len(sent) or failures:
                return
            done = threading.Event()
            jobs.put((k, time.perf_counter(), done))
            done.wait()

    workers = [threading.Thread(target=work, args=(e,), daemon=True) for e in engines]
    clients = [threading.Thread(target=client, daemon=True) for _ in range(max(1, concurrency))]
    for t in workers + clients:
        t.start()
    for t in clients:
        t.join()
    for _ in workers:
        jobs.put(None)
    for t in workers:
        t.join()
    if failures:
        raise failures[0]
    slowest = [max(seconds[k] for k in range(len(sent)) if sent[k] == i) for i in range(len(queries))]
    return _pass([r for r in results[:len(queries)] if r is not None], slowest, keep_scores)


def _pass(results: Sequence[ScoreResult], seconds: list[float], keep_scores: bool) -> Pass:
    return Pass(seconds, [r.scores for r in results] if keep_scores else [],
                sum(r.inference_s for r in results), sum(r.real_tokens for r in results),
                sum(r.padded_tokens for r in results), [r.lengths for r in results])


@dataclass(frozen=True)
class Load:
    """How a configuration is driven while it is timed: one query at a time (1), or as a server under
    `concurrency` simultaneous recalls, with as many workers as the configuration has."""

    concurrency: int = 1

    def raced(self) -> list[Load]:
        """The loads a race times each configuration under: this one, and one query at a time beside it."""
        return [self] if self.concurrency == 1 else [self, Load()]

    def runner(self, pool: ScoringPool, config: EngineConfig) -> Callable[..., Pass]:
        """`runner(queries, keep_scores=False)` replays them; the sessions are made now, once."""
        if self.concurrency == 1 and config.workers == 1:
            engine = pool.engine(config)
            return lambda queries, keep_scores=False: replay(engine, queries, keep_scores=keep_scores)
        engines = engines_for(pool, config)
        return lambda queries, keep_scores=False: replay_loaded(engines, queries, self.concurrency,
                                                                keep_scores=keep_scores)

    def timer(self, pool: ScoringPool, config: EngineConfig) -> PassTimer:
        """Times one pass; the sessions are made now, outside any timed pass. Where the pool keeps one session
        at a time (a large model, two of whose sessions pass the memory budget), holding every contender's
        session through an interleaved race would hold them all at once: there each pass asks the pool for
        its session (made again if another took its place) and warms it on two pairs, untimed."""
        if self.concurrency == 1 and config.workers == 1 and pool.max_sessions == 1:
            def one_at_a_time(queries: Sequence[Query]) -> list[float]:
                engine = pool.engine(config)
                for q in queries[:1]:
                    engine.score(q.query, q.documents[:2])
                return time_queries(engine.score, queries)

            pool.engine(config)
            return one_at_a_time
        if self.concurrency == 1 and config.workers == 1:
            score = pool.engine(config).score
            return lambda queries: time_queries(score, queries)
        run = self.runner(pool, config)
        return lambda queries: run(queries).seconds


def warm_up(engine: Scoring, queries: Sequence[Query], n: int = 2) -> None:
    """Let ORT allocate its arenas and spin up its thread pool before any value is kept."""
    for q in queries[:n]:
        engine.score(q.query, q.documents)


def measure(
    engine: Scoring,
    queries: Sequence[Query],
    repeats: int,
    on_pass: Callable[[int, list[list[float]]], None] | None = None,
) -> list[list[float]]:
    """Run `repeats` timed passes; `on_pass` may raise to stop early (pruning)."""
    passes: list[list[float]] = []
    for r in range(repeats):
        passes.append(replay(engine, queries).seconds)
        if on_pass is not None:
            on_pass(r, passes)
    return passes


def time_queries(score: Scorer, queries: Sequence[Query]) -> list[float]:
    """Per-query wall time of any scorer (the engine, or a reference such as PyTorch)."""
    seconds = []
    for q in queries:
        check_memory()
        start = time.perf_counter()
        score(q.query, q.documents)
        seconds.append(time.perf_counter() - start)
    return seconds


def interleaved(scorers: Sequence[Scorer], queries: Sequence[Query], rounds: int,
                warmup_queries: int = 2) -> list[list[list[float]]]:
    """`interleaved_passes` for scorers timed one query at a time."""
    return interleaved_passes([functools.partial(time_queries, s) for s in scorers], queries, rounds,
                              warmup_queries)


def interleaved_passes(timers: Sequence[PassTimer], queries: Sequence[Query], rounds: int,
                       warmup_queries: int = 2,
                       still_in: Callable[[list[list[list[float]]]], Collection[int]] | None = None,
                       ) -> list[list[list[float]]]:
    """A B C A B C ...: each round replays the workload once per contender, rotating who goes first.

    Returns passes[contender][round][query] in seconds. Side by side in one process, so a
    machine that slows down mid-run slows every contender alike. `still_in`, called after each
    round, names the contenders worth another round (the rest keep the rounds they ran).
    """
    for timer in timers if warmup_queries else ():
        timer(queries[:warmup_queries])
    passes: list[list[list[float]]] = [[] for _ in timers]
    alive = list(range(len(timers)))
    for r in range(rounds):
        for i in [alive[(r + k) % len(alive)] for k in range(len(alive))]:
            passes[i].append(timers[i](queries))
        if still_in is not None:
            kept = set(still_in(passes))
            alive = [i for i in alive if i in kept]
        if not alive:
            break
    return passes
