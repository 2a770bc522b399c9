"""Recall responses captured from a real Hindsight 1.1.0 (tests/fixtures/record_hindsight.py regenerates them):
what the fakes answer, so the code that reads a trace is tested on the shape Hindsight really sends."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

RESPONSES = Path(__file__).resolve().parents[1] / "fixtures" / "hindsight_responses.jsonl"


@cache
def _captured() -> tuple[tuple[str, dict[str, Any]], ...]:
    lines = [json.loads(line) for line in RESPONSES.read_text().splitlines() if line.strip()]
    return tuple((line["query"], line["response"]) for line in lines)


def captured_queries() -> list[str]:
    return [query for query, _ in _captured()]


def captured_recall(query: str | None = None, *, rerank_s: float | None = None, asked: str | None = None
                    ) -> dict[str, Any]:
    """A fresh copy of the response captured for `query` (else the first), its reranking phase set to `rerank_s`,
    and its trace's query text to `asked` (a fake answering a query it has no capture for)."""
    responses = dict(_captured())
    response = copy.deepcopy(responses.get(query or "", _captured()[0][1]))
    if asked is not None:
        response["trace"]["query"]["query_text"] = asked
    if rerank_s is not None:
        for phase in response["trace"]["summary"]["phase_metrics"]:
            if phase["phase_name"] == "reranking":
                phase["duration_seconds"] = rerank_s
    return response
