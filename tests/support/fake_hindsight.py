"""Fakes of a Hindsight 1.1.0 server that answer with the recall responses captured from a real one
(`tests/support/captured.py`): one for `record` (a failing and a slow query), one for `verify` (set statuses and
reranking time). Each resets its class state when served, so no test sees another's requests."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import ClassVar

from tests.support.captured import captured_recall
from tests.support.http import JsonHandler, serving

SECRET = "sk-do-not-leak-42"


class FakeHindsight(JsonHandler):
    """Answers every recall with a response captured from a real Hindsight 1.1.0, under the query it was asked."""

    seen_auth: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._json(200, {"version": "1.1.0"}) if self.path == "/version" else self._json(404, {})

    def do_POST(self) -> None:
        FakeHindsight.seen_auth.append(self.headers.get("authorization", ""))
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        assert self.path == "/v1/default/banks/bank1/memories/recall" and body["trace"] is True
        if body["query"] == "explode":
            return self._json(500, {"detail": "boom"})
        if body["query"] == "slow":
            time.sleep(1.5)
        self._json(200, captured_recall(asked=body["query"]))


def serve_record_fake() -> Iterator[str]:
    FakeHindsight.seen_auth = []  # each test sees only its own requests
    with serving(FakeHindsight) as url:
        yield url


class FakeHindsight11(JsonHandler):
    """Answers with recall responses captured from a real Hindsight 1.1.0 on the embedded default model (so its
    scores are the ones autotune's default reproduces), with a set reranking time."""

    rerank_s: ClassVar[float] = 0.2
    statuses: ClassVar[list[int]] = []
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self._json(200, {"api_version": "1.1.0", "features": {}})

    def do_POST(self) -> None:
        FakeHindsight11.paths.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.statuses:
            return self._json(self.statuses.pop(0), {"detail": "down"})
        self._json(200, captured_recall(body["query"], rerank_s=self.rerank_s, asked=body["query"]))


def serve_verify_fake() -> Iterator[str]:
    FakeHindsight11.statuses, FakeHindsight11.paths, FakeHindsight11.rerank_s = [], [], 0.2  # no test's state leaks
    with serving(FakeHindsight11) as url:
        yield url
