"""A client that loads a reranker the way Hindsight's TEI client does, for benchmarks and tests.

The semantics that decide whether a burst of recalls survives (Hindsight 1.1's
`RemoteTEICrossEncoder`): one semaphore of `TEI_MAX_CONCURRENT` permits shared by every recall,
whose wait has no time-out; a recall's candidates in chunks of `TEI_BATCH_SIZE`, all sent at
once; each read under `TEI_HTTP_TIMEOUT`; time-outs, 429 and 5xx retried 3 times, 0.5 s doubling
or the server's `Retry-After` capped at 5 s (and at the time-out), jittered, with the permit held.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from autotune.measure.client_sizing import (
    HINDSIGHT_HTTP_TIMEOUT,
    HINDSIGHT_MAX_CONCURRENT,
    HTTP_TIMEOUT_KEY,
    hindsight_concurrency,
    positive_float,
)
from autotune.runtime.targets.key_spec import positive_int

BATCH_SIZE_KEY = "HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE"
RETRY_AFTER_CAP_S = 5.0
JITTER = 0.5


@dataclass(frozen=True)
class ClientSettings:
    batch_size: int = 128
    max_concurrent: int = HINDSIGHT_MAX_CONCURRENT
    http_timeout_s: float = HINDSIGHT_HTTP_TIMEOUT
    retries: int = 3
    retry_delay_s: float = 0.5

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ClientSettings:
        """What Hindsight reads from its environment (defaults where a key is absent)."""
        return cls(batch_size=positive_int(env.get(BATCH_SIZE_KEY)) or 128,
                   max_concurrent=hindsight_concurrency(env),
                   http_timeout_s=positive_float(env.get(HTTP_TIMEOUT_KEY)) or HINDSIGHT_HTTP_TIMEOUT)


@dataclass
class RecallOutcome:
    ok: bool
    seconds: float
    requests: int = 0
    attempts: int = 0  # requests sent, retries included
    errors: list[str] = field(default_factory=list)


def retry_delay(headers: Mapping[str, str], fallback: float, timeout_s: float) -> float:
    """Retry-After (seconds or an HTTP date) wins over the backoff; both capped; jittered as Hindsight does."""
    limit = min(timeout_s, RETRY_AFTER_CAP_S)
    asked = 0.0
    value = headers.get("retry-after")
    if value:
        try:
            asked = float(value)
        except ValueError:
            try:  # an HTTP date; anything else is no hint at all, as a missing header is
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            asked = 0.0 if when is None else max(0.0, when.timestamp() - time.time())
    wanted = max(fallback, asked, 0.0)
    delay = min(wanted, limit)
    spread = delay * JITTER
    if wanted >= limit:
        return delay - random.uniform(0.0, spread)
    return delay + random.uniform(0.0, min(spread, limit - delay))


class HindsightLikeClient:
    """One per process, as Hindsight's semaphore is: every recall made through it shares the permits."""

    def __init__(self, url: str, settings: ClientSettings) -> None:
        self.url = url.rstrip("/")
        self.settings = settings
        self._permits = asyncio.Semaphore(settings.max_concurrent)
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(settings.http_timeout_s, pool=None),
                                       limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

    async def __aenter__(self) -> HindsightLikeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def recall(self, query: str, texts: list[str]) -> RecallOutcome:
        """Rerank one recall's candidates; it fails when any of its chunks fails after the retries."""
        started = time.perf_counter()
        step = self.settings.batch_size
        chunks = [texts[i:i + step] for i in range(0, len(texts), step)]
        outcome = RecallOutcome(ok=True, seconds=0.0, requests=len(chunks))
        results = await asyncio.gather(*(self._post(query, chunk, outcome) for chunk in chunks))
        outcome.ok = all(results)
        outcome.seconds = time.perf_counter() - started
        return outcome

    async def _post(self, query: str, texts: list[str], outcome: RecallOutcome) -> bool:
        delay = self.settings.retry_delay_s
        async with self._permits:  # held through the retries' sleeps, as Hindsight holds it
            for attempt in range(self.settings.retries + 1):
                outcome.attempts += 1
                headers: Mapping[str, str] | None = None  # a time-out backs off plainly; 429 and 5xx may say how long
                try:
                    resp = await self._http.post(self.url + "/rerank",
                                                 json={"query": query, "texts": texts, "return_text": False})
                    if resp.status_code == 200:
                        return True
                    outcome.errors.append(f"HTTP {resp.status_code}")
                    if resp.status_code != 429 and resp.status_code < 500:
                        return False
                    headers = resp.headers
                except httpx.TimeoutException:
                    outcome.errors.append("time-out")
                except httpx.TransportError as exc:
                    outcome.errors.append(type(exc).__name__)
                if attempt < self.settings.retries:
                    await asyncio.sleep(delay if headers is None else
                                        retry_delay(headers, delay, self.settings.http_timeout_s))
                    delay *= 2
        return False
