"""Replay a workload through an engine and time it, warmups kept apart from values."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autotune.runtime.engine import ScoreResult, Scoring
from autotune.workload.queries import Query

Scorer = Callable[[str, list[str]], object]


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
    seconds: list[float] = []
    scores: list[np.ndarray] = []
    lengths: list[list[int]] = []
    inference = 0.0
    real = padded = 0
    for q in queries:
        result: ScoreResult = engine.score(q.query, q.documents)
        seconds.append(result.total_s)
        lengths.append(result.lengths)
        inference += result.inference_s
        real += result.real_tokens
        padded += result.padded_tokens
        if keep_scores:
            scores.append(result.scores)
    return Pass(seconds, scores, inference, real, padded, lengths)


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
        start = time.perf_counter()
        score(q.query, q.documents)
        seconds.append(time.perf_counter() - start)
    return seconds


def interleaved(scorers: Sequence[Scorer], queries: Sequence[Query], rounds: int,
                warmup_queries: int = 2) -> list[list[list[float]]]:
    """A B C A B C ...: each round replays the workload once per scorer, rotating who goes first.

    Returns passes[scorer][round][query] in seconds. Side by side in one process, so a
    machine that slows down mid-run slows every contender alike.
    """
    for score in scorers:
        for q in queries[:warmup_queries]:
            score(q.query, q.documents)
    passes: list[list[list[float]]] = [[] for _ in scorers]
    n = len(scorers)
    for r in range(rounds):
        for i in [(r + k) % n for k in range(n)]:
            passes[i].append(time_queries(scorers[i], queries))
    return passes
