"""The sidecar's pick under Hindsight's concurrent recalls: its figures, and what its client must be told."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autotune.measure.client_sizing import ServedLoad, measure_client_sizing
from autotune.measure.timing import Load
from autotune.runtime.engine import ScoringPool
from autotune.search.finalists import Finalist
from autotune.workload.queries import Workload


def served_load(pool: ScoringPool, winner: Finalist, finalists: Sequence[Finalist], workload: Workload,
                user_env: Mapping[str, str], load: Load) -> ServedLoad:
    """The sidecar's figures under load, the client keys they call for, and why this pick over the
    single-query best when the two differ."""
    sizing = measure_client_sizing(pool, winner.config, workload, user_env)
    alone = min(finalists, key=lambda f: (f.single or f.latency).p95_ms)
    choice = f"{winner.config.label()}: the lowest p95 under {load.concurrency} concurrent recalls"
    if load.concurrency > 1 and alone.config != winner.config:
        choice += (f"; {alone.config.label()} is faster one query at a time "
                   f"({(alone.single or alone.latency).p95_ms:.0f} ms against "
                   f"{(winner.single or winner.latency).p95_ms:.0f} ms) but slower under load "
                   f"({alone.latency.p95_ms:.0f} ms against {winner.latency.p95_ms:.0f} ms)")
    return ServedLoad(concurrency=load.concurrency, p95_ms_loaded=winner.latency.p95_ms,
                      p95_ms_single=(winner.single or winner.latency).p95_ms,
                      throughput_pairs_per_s=dict(winner.throughput), choice=choice, client=sizing,
                      unsafe_user_values=sizing.unsafe(user_env))
