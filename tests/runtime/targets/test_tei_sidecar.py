"""The `tei` target: `autotune serve` as a sidecar, and Hindsight's own TEI client sized by what `run` writes."""

from __future__ import annotations

import time

import pytest

from tests.support.hindsight_classes import hindsight_burst

hindsight = pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")


def test_hindsights_tei_client_survives_eight_recalls_with_the_sized_keys(tiny_model_dir, monkeypatch):
    """Hindsight's real client, its semaphore and its retries; a server that takes 0.4 s a request and a
    1 s time-out. With one permit per worker (what `run` writes) all eight recalls succeed, each request
    sent once, and the server drops nothing; with Hindsight's 8 permits, requests queue in the server
    past the time-out, and the client gives up on them and sends them again."""
    from autotune.measure.client_sizing import HTTP_TIMEOUT_KEY, MAX_CONCURRENT_KEY
    from tests.support.http import LiveServer
    from tests.support.serving import SlowService, metric, slow

    texts = ["Paris is the capital of France.", "Berlin is in Germany.", "The sky is blue."] * 4
    base = {"HINDSIGHT_API_RERANKER_PROVIDER": "tei", "HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE": "300",
            HTTP_TIMEOUT_KEY: "1"}
    with LiveServer(slow(tiny_model_dir, max_queue=16, client_timeout_s=1000.0)) as live:
        before = hindsight_burst({**base, "HINDSIGHT_API_RERANKER_TEI_URL": live.url, MAX_CONCURRENT_KEY: "8"}, 8,
                                 texts, monkeypatch)
        time.sleep(8 * SlowService.delay)
        assert metric(live.url, "autotune_dropped_requests") > 0
        assert metric(live.url, "te_request_count", '{method="batch"}') > 8  # retries
    assert len(before) == 8
    service = slow(tiny_model_dir, max_queue=16, client_timeout_s=1.0)
    with LiveServer(service) as live:
        after = hindsight_burst({**base, "HINDSIGHT_API_RERANKER_TEI_URL": live.url, MAX_CONCURRENT_KEY: "1"}, 8,
                                texts, monkeypatch)
        assert metric(live.url, "autotune_dropped_requests") == 0
        assert metric(live.url, "autotune_abandoned_inference_seconds") == 0
        assert metric(live.url, "te_request_count", '{method="batch"}') == 8
    assert all(after) and service.ran == 8
