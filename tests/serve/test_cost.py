"""The wait estimate behind serve's 429 (issue 46, item 5): small requests must not make large ones look slow."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from autotune.serve.cost import CostModel, Work
from tests.support.http import LiveServer
from tests.support.serving import make_service

WORDS = " ".join(["memory"] * 3000)


def test_per_batch_and_per_token_costs_are_told_apart():
    model = CostModel()
    for batches, tokens in ((1, 10), (1, 12), (4, 2000), (8, 4000), (2, 600), (1, 9)):
        model.observe(Work(batches, tokens), 0.002 * batches + 0.0001 * tokens, real_tokens=tokens)
    per_batch, per_token = model.coefficients()  # type: ignore[misc]
    assert per_batch == pytest.approx(0.002, rel=1e-3) and per_token == pytest.approx(0.0001, rel=1e-3)
    assert model.seconds(Work(16, 8192)) == pytest.approx(0.032 + 0.8192, rel=1e-3)


def test_requests_of_one_shape_still_give_an_estimate():
    model = CostModel()
    for _ in range(3):
        model.observe(Work(1, 10), 0.01, real_tokens=10)
    assert model.seconds(Work(1, 10)) == pytest.approx(0.01, rel=1e-6)


def test_tokens_are_estimated_at_the_tokenizers_own_ratio_and_capped_at_the_model():
    model = CostModel()
    model.observe(Work(1, 10), 0.01, real_tokens=10, sample=(60, 10))  # 6 characters a token, as seen
    work = model.work("q" * 10, ["d" * 50, "d" * 10_000], batch_size=1, max_length=512)
    assert work.batches == 2 and work.tokens == (10 + 3) + 512


def test_a_mixed_load_the_server_can_finish_in_time_gets_no_429(tiny_model_dir):
    """Three one-text requests measured first, then two concurrent requests of 16 x 3,000 words: each is a
    fraction of a second of work, well within the client's time-out, so neither may be refused."""
    service = make_service(tiny_model_dir, client_timeout_s=2.0)
    with LiveServer(service) as live:
        for _ in range(3):
            assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": ["a b"]}).status_code == 200

        async def burst() -> list[int]:
            async with httpx.AsyncClient(timeout=60) as client:
                body = {"query": "what do I remember", "texts": [WORDS] * 16}
                answers = await asyncio.gather(*(client.post(live.url + "/rerank", json=body) for _ in range(2)))
                return [a.status_code for a in answers]

        assert asyncio.run(burst()) == [200, 200]
        for _ in range(4):  # and small ones beside large ones
            assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": ["a b"]}).status_code == 200


# ---- issue 50, items 1 and 2: nothing a client sends breaks the estimate; a cold start has a prior ----------


def test_an_empty_pair_teaches_no_characters_per_token():
    """`{"query":"","texts":[""]}` has three special tokens and no characters: it once set the ratio to 0."""
    model = CostModel()
    model.observe(Work(1, 3), 0.001, real_tokens=3, sample=(0, 3))
    assert model.chars_per_token() == pytest.approx(4.0)
    assert model.work("what do I remember", ["a memory"], batch_size=4, max_length=512).tokens > 0


def test_odd_observations_never_poison_the_fit():
    model = CostModel(prior=(0.002, 0.0001))
    for seconds in (float("nan"), float("inf"), -1.0):
        model.observe(Work(2, 100), seconds, real_tokens=100, sample=(400, 100))
    assert model.observed == 0 and model.coefficients() == (0.002, 0.0001)
    for _ in range(5):  # identical observations: one shape, so the prior's split at the measured level
        model.observe(Work(2, 100), 0.028, real_tokens=100, sample=(400, 100))
    per_batch, per_token = model.coefficients()  # type: ignore[misc]
    assert per_batch / per_token == pytest.approx(20.0) and model.seconds(Work(2, 100)) == pytest.approx(0.028)


def test_one_large_request_does_not_make_small_ones_look_slow():
    """The cold start of issue 50: one request of 32 x 512 tokens (16.9 s), then 64 one-word texts. Fitted on the
    one shape alone, the small request was estimated at a minute; with the start-up prior it costs its tokens."""
    model = CostModel(prior=(0.01, 0.001))
    model.observe(Work(16, 16384), 16.9, real_tokens=16384)
    small = model.seconds(Work(32, 384))
    assert small is not None and small < 1.0


def test_the_prior_solves_the_two_start_up_shapes_exactly():
    from autotune.serve.cost import fit_two

    fit = fit_two((Work(1, 40), 0.002 + 40 * 1e-4), (Work(1, 2000), 0.002 + 2000 * 1e-4))
    assert fit == pytest.approx((0.002, 1e-4))
    assert fit_two((Work(1, 40), 0.01), (Work(2, 80), 0.02)) is None  # one shape twice: nothing to solve
