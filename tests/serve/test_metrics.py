"""`/metrics` under TEI's names, each app with a registry of its own."""

from __future__ import annotations

from prometheus_client import generate_latest

from autotune.serve.metrics import Metrics


def test_two_apps_in_one_process_count_apart():
    first, second = Metrics(), Metrics()
    first.count.labels(method="batch").inc()
    assert first.registry.get_sample_value("te_request_count_total", {"method": "batch"}) == 1
    assert second.registry.get_sample_value("te_request_count_total", {"method": "batch"}) is None


def test_the_names_dashboards_built_for_tei_read():
    text = generate_latest(Metrics().registry).decode()
    for name in ("te_request_duration", "te_request_tokenization_duration", "te_request_queue_duration",
                 "te_request_inference_duration", "te_queue_size"):
        assert f"# TYPE {name} " in text, name
