"""`/metrics`: TEI's metric names, so dashboards built for TEI read autotune's server too."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """TEI's metric names, in a registry of the app's own (several apps can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.duration = Histogram("te_request_duration", "Request duration (s)", registry=r)
        self.tokenization = Histogram("te_request_tokenization_duration", "Tokenization (s)", registry=r)
        self.queue = Histogram("te_request_queue_duration", "Time queued (s)", registry=r)
        self.inference = Histogram("te_request_inference_duration", "Inference (s)", registry=r)
        self.queue_size = Gauge("te_queue_size", "Requests waiting or running", registry=r)
        self.count = Counter("te_request_count", "Requests", ["method"], registry=r)
        self.success = Counter("te_request_success", "Successful requests", ["method"], registry=r)
        self.failure = Counter("te_request_failure", "Failed requests", ["err"], registry=r)
        self.dropped = Counter("autotune_dropped_requests", "Requests dropped because their client had gone",
                               registry=r)
        self.abandoned_inference = Counter("autotune_abandoned_inference_seconds",
                                           "Inference seconds spent on requests whose client had gone", registry=r)
