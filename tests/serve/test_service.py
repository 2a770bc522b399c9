"""The service behind the routes: the bounded queue, the token budget per batch, and the wait it tells a
refused client."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.corpus import DOCS
from tests.support.http import LiveServer
from tests.support.serving import make_service, slow


def test_the_token_budget_bounds_every_batch_and_info_reports_it(tiny_model_dir):
    service = make_service(tiny_model_dir, max_batch_tokens=150)
    with LiveServer(service) as live:
        assert httpx.get(live.url + "/info").json()["max_batch_tokens"] == 150
        shapes = []
        backend = service.engine.backend
        run = backend.run
        backend.run = lambda feeds: (shapes.append(feeds["input_ids"].shape), run(feeds))[1]
        texts = ["word " * 60] * 12 + ["short"] * 20
        assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": texts}).status_code == 200
    assert any(rows < 4 for rows, _ in shapes)  # the budget, not the batch size, closed some batches
    assert all(rows * longest <= 150 or rows == 1 for rows, longest in shapes)


def test_queue_bound_answers_429(tiny_model_dir):
    service = slow(tiny_model_dir, max_queue=1)
    with LiveServer(service) as live:
        async def burst() -> list[int]:
            async with httpx.AsyncClient(timeout=60) as client:
                reqs = [client.post(live.url + "/rerank", json={"query": "q", "texts": DOCS}) for _ in range(8)]
                return [r.status_code for r in await asyncio.gather(*reqs)]

        codes = asyncio.run(burst())
    assert 429 in codes and 200 in codes and set(codes) <= {200, 429}


def test_retry_after_is_bounded(tiny_model_dir):
    from autotune.serve.errors import ApiError

    service = make_service(tiny_model_dir)
    from autotune.serve.cost import Work

    service.cost.observe(Work(1, 10), 1.0, real_tokens=10)  # as if a slow request had just been measured
    service._in_system = {1: Work(10**4, 10**6)}  # and a worker were busy with a huge one
    with pytest.raises(ApiError) as refused:
        asyncio.run(service.rerank("q", ["a"], truncate=True, direction="right", raw=False))
    assert refused.value.status == 429 and 1 <= refused.value.retry_after <= 60  # at most a minute


def test_truncate_false_decides_without_tokenizing_a_huge_query_whole(tiny_model_dir, monkeypatch):
    """Issue 46, item 9: four 7 MB queries at once peaked at 1.4 GB; the decision needs one token past the length."""
    from autotune.runtime.tokenize import PairTokenizer

    handed: list[int] = []
    original = PairTokenizer.pairs

    def recording(self, query, documents):  # type: ignore[no-untyped-def]
        pairs = original(self, query, documents)
        handed.extend(len(q) + len(d) for q, d in pairs)
        return pairs

    monkeypatch.setattr(PairTokenizer, "pairs", recording)
    service = make_service(tiny_model_dir)
    huge = "memory " * 1_000_000  # 7 MB
    with LiveServer(service) as live:
        refused = httpx.post(live.url + "/rerank", json={"query": huge, "texts": ["a b"], "truncate": False},
                             timeout=60)
        fits = httpx.post(live.url + "/rerank", json={"query": "q", "texts": ["a b"], "truncate": False})
    assert refused.status_code == 422 and refused.json()["error_type"] == "Validation"
    assert fits.status_code == 200
    assert handed and max(handed) < 100_000  # the query was cut before tokenizing, not handed over whole
