"""Replay a workload through an engine and time it, warmups kept apart from values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autotune.engine import RerankEngine, ScoreResult
from autotune.workload import Query


@dataclass
class Pass:
    """One replay of the workload: per-query seconds and (optionally) per-query scores."""

    seconds: list[float]
    scores: list[np.ndarray]
    inference_s: float
    real_tokens: int
    padded_tokens: int


def replay(engine: RerankEngine, queries: Sequence[Query], *, keep_scores: bool = False) -> Pass:
    seconds: list[float] = []
    scores: list[np.ndarray] = []
    inference = 0.0
    real = padded = 0
    for q in queries:
        result: ScoreResult = engine.score(q.query, q.documents)
        seconds.append(result.total_s)
        inference += result.inference_s
        real += result.real_tokens
        padded += result.padded_tokens
        if keep_scores:
            scores.append(result.scores)
    return Pass(seconds, scores, inference, real, padded)


def warm_up(engine: RerankEngine, queries: Sequence[Query], n: int = 2) -> None:
    """Let ORT allocate its arenas and spin up its thread pool before any value is kept."""
    for q in queries[:n]:
        engine.score(q.query, q.documents)


def measure(
    engine: RerankEngine,
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
