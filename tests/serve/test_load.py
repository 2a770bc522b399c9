"""The sidecar under concurrent recalls: workers, dropped disconnects, 429 before a wait past the client's
time-out, and a client that behaves as Hindsight's does. A deliberately slow service makes each
request take a known while, so the outcomes do not depend on this machine's speed."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import pytest

from autotune.serve.tei_client import ClientSettings, HindsightLikeClient
from tests.support.corpus import DOCS
from tests.support.http import LiveServer
from tests.support.serving import SlowService, metric, slow


def until(condition, limit_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Wait for a state of the server rather than for a length of time (a loaded host is slow to get there)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "the server never got there"
        time.sleep(0.01)


async def burst(url: str, n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*(client.post(url + "/rerank", json={"query": "q", "texts": DOCS})
                                      for _ in range(n)))


@pytest.mark.parametrize("workers", [1, 2])
def test_n_workers_serve_n_requests_at_once(tiny_model_dir, workers):
    service = slow(tiny_model_dir, workers=workers)
    with LiveServer(service) as live:
        assert httpx.get(live.url + "/info").json()["autotune"]["workers"] == workers
        codes = [r.status_code for r in asyncio.run(burst(live.url, 4))]
    assert codes == [200] * 4
    assert service.peak == workers and service.ran == 4


def test_a_queued_request_whose_client_left_is_dropped_before_inference(tiny_model_dir):
    service = slow(tiny_model_dir)
    service.delay = 1.5  # time enough, on a loaded host, to see the second client leave while the first runs
    with LiveServer(service) as live:
        port = int(live.url.rsplit(":", 1)[1])
        first = threading.Thread(target=lambda: httpx.post(live.url + "/rerank", json={"query": "q", "texts": DOCS},
                                                           timeout=30))
        first.start()
        until(lambda: service.running == 1)  # the first is running: the next one queues behind it
        body = b'{"query": "q", "texts": ["a", "b"]}'
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /rerank HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            until(lambda: metric(live.url, "te_queue_size") == 2)  # queued, the first still running
        first.join()
        until(lambda: metric(live.url, "te_queue_size") == 0)  # the worker has passed over the abandoned one
        assert metric(live.url, "autotune_dropped_requests") == 1
        assert metric(live.url, "autotune_abandoned_inference_seconds") == 0
        assert httpx.get(live.url + "/health").status_code == 200
    assert service.ran == 1  # the abandoned request never reached a worker's engine


def test_a_wait_past_the_clients_time_out_is_refused_at_once_with_retry_after(tiny_model_dir):
    service = slow(tiny_model_dir, client_timeout_s=1.0)
    with LiveServer(service) as live:
        assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": DOCS}).status_code == 200  # measured
        responses = asyncio.run(burst(live.url, 6))
        refused = [r for r in responses if r.status_code == 429]
        assert refused and all(r.status_code in (200, 429) for r in responses)
        assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
        assert all(r.json()["error_type"] == "Overloaded" for r in refused)
        # what was accepted could be answered within the client's time-out: counted, not timed on a busy host
        accepted = len(responses) - len(refused)
        assert accepted * SlowService.delay <= 1.0 + SlowService.delay
        assert service.ran == 1 + accepted


def recalls(url: str, settings: ClientSettings, n: int, texts: list[str]) -> list:  # type: ignore[type-arg]
    async def go() -> list:  # type: ignore[type-arg]
        async with HindsightLikeClient(url, settings) as client:
            return await asyncio.gather(*(client.recall(f"query {i}", texts) for i in range(n)))
    return asyncio.run(go())


def test_eight_hindsight_recalls_fail_with_its_defaults_and_all_succeed_with_the_sized_keys(tiny_model_dir):
    """Service 0.4 s a request, a client time-out of 1 s. Hindsight's defaults put 8 requests in the server
    at once; the sized keys (one permit per worker) keep the queue in Hindsight's semaphore, for free."""
    texts = DOCS * 3
    defaults = ClientSettings(batch_size=128, max_concurrent=8, http_timeout_s=1.0, retries=1, retry_delay_s=0.1)
    sized = ClientSettings(batch_size=128, max_concurrent=1, http_timeout_s=1.0, retries=1, retry_delay_s=0.1)

    service = slow(tiny_model_dir, max_queue=16, client_timeout_s=1000.0)  # no refusals: the old behaviour
    with LiveServer(service) as live:
        before = recalls(live.url, defaults, 8, texts)
        time.sleep(8 * SlowService.delay)  # let the server finish what it still holds
        wasted = metric(live.url, "autotune_dropped_requests")
    assert sum(o.ok for o in before) < 8 and wasted > 0

    service = slow(tiny_model_dir, max_queue=16, client_timeout_s=1.0)
    with LiveServer(service) as live:
        after = recalls(live.url, sized, 8, texts)
        assert metric(live.url, "autotune_dropped_requests") == 0
        assert metric(live.url, "autotune_abandoned_inference_seconds") == 0
    assert all(o.ok for o in after) and sum(o.attempts for o in after) == 8
    # for free: one permit per worker, so the server never held a second request to queue behind the first
    assert service.ran == 8 and service.most_held == 1


def test_shutdown_refuses_new_requests_with_503(tiny_model_dir):
    service = slow(tiny_model_dir)
    with LiveServer(service) as live:
        service.stopping = True
        resp = httpx.post(live.url + "/rerank", json={"query": "q", "texts": DOCS})
        assert resp.status_code == 503 and resp.json()["error_type"] == "Unhealthy"


def test_a_request_a_free_worker_can_start_is_never_refused_on_an_estimate(tiny_model_dir):
    service = slow(tiny_model_dir, client_timeout_s=0.01)  # every estimate would pass this time-out
    with LiveServer(service) as live:
        for _ in range(3):  # one at a time: a worker is always free
            assert httpx.post(live.url + "/rerank", json={"query": "q", "texts": DOCS}).status_code == 200
        codes = [r.status_code for r in asyncio.run(burst(live.url, 3))]
    assert codes.count(200) >= 1 and set(codes) <= {200, 429} and 429 in codes
