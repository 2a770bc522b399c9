"""`serve` answers normal requests after any sequence of odd ones, and `/health` tells the truth (issue 50)."""

from __future__ import annotations

import httpx

from autotune.serve.service import UNHEALTHY_AFTER, RerankService
from autotune.serve.settings import ServeSettings
from tests.support.http import LiveServer
from tests.support.serving import CONFIG, make_service

ODD = [{"query": "", "texts": [""]}, {"query": "", "texts": ["", ""]}, {"query": " ", "texts": ["\u200b"]},
       {"query": "q", "texts": [""]}, {"query": "", "texts": ["a memory"]}]
NORMAL = {"query": "when is the car insurance due", "texts": ["the insurance renews in March", "a cat"]}


def test_odd_requests_first_leave_every_later_request_served(tiny_model_dir):
    with LiveServer(make_service(tiny_model_dir)) as live:
        for body in ODD:
            assert httpx.post(live.url + "/rerank", json=body).status_code == 200, body
        for _ in range(3):
            answer = httpx.post(live.url + "/rerank", json=NORMAL)
            assert answer.status_code == 200, answer.text
        assert httpx.get(live.url + "/health").status_code == 200


def test_the_server_measures_its_own_prior_before_the_first_request(tiny_model_dir):
    service = make_service(tiny_model_dir)
    with LiveServer(service):
        assert service.cost.prior is not None and service.cost.prior[1] > 0


def test_the_prior_is_timed_on_one_text_at_the_models_length(tiny_model_dir):
    """Start-up stays cheap on a long-context model: one text at the model's length, not a batch of them (at
    8,192 positions a batch of four held a ModernBERT's start-up for 30 s on 2 cores)."""
    from autotune.serve.service import CALIBRATION_ROUNDS

    service = make_service(tiny_model_dir)
    with LiveServer(service):
        engine, seen = service.engines[0], []

        class Counted:
            def score(self, query, texts):  # type: ignore[no-untyped-def]
                seen.append((len(texts), max(len(t.split()) for t in texts)))
                return engine.score(query, texts)

        service.calibrate(Counted())  # type: ignore[arg-type]
    rows = min(service.settings.config.batch_size, service.settings.max_client_batch_size)
    assert rows > 1 and seen == [(rows, 1)] * CALIBRATION_ROUNDS + [(1, service.pool.max_length)] * CALIBRATION_ROUNDS


class _Failing(RerankService):
    """Scoring fails while `broken` is set, as a session whose memory went would."""

    broken = True

    def _score(self, engine, job):  # type: ignore[no-untyped-def]
        if self.broken:
            raise RuntimeError("onnxruntime: bad allocation")
        return super()._score(engine, job)


def test_health_turns_unhealthy_when_scoring_fails_repeatedly_and_back_when_it_works(tiny_model_dir):
    service = _Failing(ServeSettings(config=CONFIG, model=str(tiny_model_dir)), has_vnni=False)
    with LiveServer(service) as live:
        for _ in range(UNHEALTHY_AFTER - 1):
            assert httpx.post(live.url + "/rerank", json=NORMAL).status_code == 424
        assert httpx.get(live.url + "/health").status_code == 200  # one or two failures may be the input's
        assert httpx.post(live.url + "/rerank", json=NORMAL).status_code == 424
        health = httpx.get(live.url + "/health")
        assert health.status_code == 503 and "bad allocation" in health.json()["error"]
        service.broken = False
        assert httpx.post(live.url + "/rerank", json=NORMAL).status_code == 200
        assert httpx.get(live.url + "/health").status_code == 200


def test_requests_refused_for_their_own_input_do_not_turn_health_unhealthy(tiny_model_dir):
    with LiveServer(make_service(tiny_model_dir, max_client_batch_size=2)) as live:
        for _ in range(UNHEALTHY_AFTER + 2):
            assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": ["a"] * 3}).status_code == 422
        assert httpx.get(live.url + "/health").status_code == 200
