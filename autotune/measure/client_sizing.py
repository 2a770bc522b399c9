"""What Hindsight's TEI client should be told, from what the sidecar was measured to do.

Hindsight holds a global semaphore of `TEI_MAX_CONCURRENT` permits over every recall, and gives
each request `TEI_HTTP_TIMEOUT` seconds. A request waiting in Hindsight's semaphore costs
nothing; one waiting in the server's queue runs down its time-out, and when that passes the
client retries while the server still computes the first copy. So: as many permits as the server
has workers, and a time-out that covers the slowest request the queue those permits allow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from autotune.measure.timing import replay_loaded
from autotune.runtime.engine import EngineConfig, ScoringPool, engines_for
from autotune.runtime.targets.base import PREFIX
from autotune.runtime.targets.key_spec import positive_int
from autotune.runtime.targets.tei_sidecar import (
    CLIENT_CONCURRENCY_KEY,
    HINDSIGHT_CLIENT_CONCURRENCY,
    client_concurrency,
)
from autotune.workload.queries import Query, Workload

MAX_CONCURRENT_KEY = CLIENT_CONCURRENCY_KEY
HTTP_TIMEOUT_KEY = f"{PREFIX}TEI_HTTP_TIMEOUT"
HINDSIGHT_MAX_CONCURRENT = HINDSIGHT_CLIENT_CONCURRENCY  # Hindsight's defaults
HINDSIGHT_HTTP_TIMEOUT = 30.0
SAFETY = 2.0  # the time-out covers twice the measured worst case, plus a margin, and never less than 30 s
MARGIN_S = 5.0


def positive_float(value: str | None) -> float | None:
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) and x > 0 else None


hindsight_concurrency = client_concurrency  # how many requests Hindsight's TEI client has in flight


def largest_request(workload: Workload, user_env: Mapping[str, str]) -> Query:
    """The workload's largest query (candidates, then characters), cut to the user's MAX_CANDIDATES keys."""
    caps = [n for suffix in ("", "_LOW", "_MID", "_HIGH")
            if (n := positive_int(user_env.get(f"{PREFIX}MAX_CANDIDATES{suffix}"))) is not None]
    query = max(workload.queries, key=lambda q: (len(q.documents), sum(map(len, q.documents))))
    if caps and len(query.documents) > max(caps):
        return Query(id=query.id, query=query.query, documents=query.documents[:max(caps)])
    return query


@dataclass(frozen=True)
class ClientSizing:
    workers: int
    service_p99_s: float  # the largest request's service time, with every worker busy
    largest_candidates: int
    concurrency: int  # what Hindsight will send at once (the load the search measured under)

    @property
    def max_concurrent(self) -> int:
        """Requests in flight the server takes at once: the rest wait in Hindsight's semaphore, for free."""
        return self.workers

    def timeout_for(self, max_concurrent: int) -> float:
        """The slowest request with `max_concurrent` in flight: its own service after the queue ahead."""
        return self.service_p99_s * math.ceil(max_concurrent / self.workers)

    @property
    def http_timeout(self) -> int:
        return max(int(HINDSIGHT_HTTP_TIMEOUT), math.ceil(SAFETY * self.timeout_for(self.max_concurrent) + MARGIN_S))

    def keys(self) -> dict[str, str]:
        return {MAX_CONCURRENT_KEY: str(self.max_concurrent), HTTP_TIMEOUT_KEY: str(self.http_timeout)}

    def unsafe(self, user_env: Mapping[str, str]) -> str | None:
        """One line when the user's own values (outside the block) let requests time out; never the values."""
        set_by_user = [k for k in (MAX_CONCURRENT_KEY, HTTP_TIMEOUT_KEY) if k in user_env]
        if not set_by_user:
            return None
        concurrent = positive_int(user_env.get(MAX_CONCURRENT_KEY)) or self.max_concurrent
        timeout = positive_float(user_env.get(HTTP_TIMEOUT_KEY)) or float(self.http_timeout)
        needed = self.timeout_for(concurrent)
        if timeout >= needed:
            return None
        return (f"{' and '.join(set_by_user)} set outside the autotune block is unsafe: with the measured service "
                f"time, requests queued behind the others would pass the time-out and be retried while the "
                f"server still computes them (remove it to use the measured value)")

    def to_dict(self) -> dict[str, object]:
        return {"workers": self.workers, "service_p99_ms": round(self.service_p99_s * 1000.0, 1),
                "largest_request_candidates": self.largest_candidates, "hindsight_concurrency": self.concurrency,
                "max_concurrent": self.max_concurrent, "http_timeout_s": self.http_timeout}


def measure_client_sizing(pool: ScoringPool, config: EngineConfig, workload: Workload,
                          user_env: Mapping[str, str], rounds: int = 3) -> ClientSizing:
    """Time the largest request on every worker at once, `rounds` times; the worst is the p99 at that count."""
    largest = largest_request(workload, user_env)
    engines = engines_for(pool, config)
    replay_loaded(engines, [largest] * len(engines), len(engines))  # warm-up
    seconds = replay_loaded(engines, [largest] * (len(engines) * rounds), len(engines)).seconds
    return ClientSizing(workers=config.workers, service_p99_s=float(np.max(seconds)),
                        largest_candidates=len(largest.documents), concurrency=hindsight_concurrency(user_env))


@dataclass(frozen=True)
class ServedLoad:
    """The sidecar's pick under Hindsight's concurrent recalls: its figures, its client's keys, and why it
    was chosen over the fastest one query at a time."""

    concurrency: int
    p95_ms_loaded: float
    p95_ms_single: float
    throughput_pairs_per_s: dict[int, float]
    choice: str
    client: ClientSizing
    unsafe_user_values: str | None  # one line when the user's own client keys let requests time out

    @property
    def client_keys(self) -> dict[str, str]:
        return self.client.keys()

    def to_dict(self) -> dict[str, object]:
        return {"concurrency": self.concurrency, "p95_ms_loaded": round(self.p95_ms_loaded, 3),
                "p95_ms_single": round(self.p95_ms_single, 3),
                "throughput_pairs_per_s": {str(k): round(v, 1) for k, v in self.throughput_pairs_per_s.items()},
                "choice": self.choice, "client": self.client.to_dict(), "client_keys": self.client_keys,
                "unsafe_user_values": self.unsafe_user_values}

