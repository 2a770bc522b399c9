"""The shape of what Hindsight answers, checked once where it enters autotune.

A server can answer anything: `[]`, `phase_metrics: 5`, a 400-digit score, a `/version` nested a hundred
thousand deep. Each once crashed a command far from the HTTP call. Every recall response and `/version`
body is validated here instead, so the rest of autotune reads only plain dicts of the right types, and a
bad answer is one line naming the field. The models list only what autotune reads; other fields pass
through unchecked. The JSON parser itself refuses nesting deeper than 200 levels.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["BadAnswer", "parse_recall", "parse_version_body"]

Id = str | int
Seconds = float  # positive_seconds() checks the range where a duration is used
Score = float


class _Part(BaseModel):
    # strict: true is not 1.0 and "5" is not 5; inf, NaN and integers too large for a float are refused
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _Query(_Part):
    query_text: str | None = None
    budget: int | None = Field(default=None, ge=0, le=10**9)
    max_tokens: int | None = Field(default=None, ge=0, le=10**9)
    timestamp: str | None = None


class _Components(_Part):
    cross_encoder_score: Score | None = None
    cross_encoder_score_normalized: Score | None = None
    combined_score: Score | None = None
    recency: Score | None = None
    temporal: Score | None = None
    proof_norm: Score | None = None


class _Candidate(_Part):
    node_id: Id | None = None
    text: str | None = None
    rerank_score: Score | None = None
    score_components: _Components | None = None


class _Fused(_Part):
    node_id: Id | None = None
    rrf_score: Score | None = None


class _Hit(_Part):
    node_id: Id | None = None
    context: str | None = None
    event_date: str | None = None


class _Arm(_Part):
    results: list[_Hit] | None = None


class _Prefilter(_Part):
    max_candidates: int | None = Field(default=None, ge=0, le=10**9)


class _Phase(_Part):
    phase_name: str | None = None
    phase: str | None = None
    duration_seconds: Seconds | None = None
    details: _Prefilter | None = None


class _Summary(_Part):
    phase_metrics: list[_Phase] | None = None


class _Trace(_Part):
    query: _Query | None = None
    reranked: list[_Candidate] | None = None
    rrf_merged: list[_Fused] | None = None
    retrieval_results: list[_Arm] | None = None
    summary: _Summary | None = None


class _Result(_Part):
    id: Id | None = None
    text: str | None = None
    occurred_start: str | None = None


class _Recall(_Part):
    results: list[_Result] | None = None
    trace: _Trace | None = None


class _Version(_Part):
    version: str | None = Field(default=None, max_length=64)
    api_version: str | None = Field(default=None, max_length=64)


_VERSION = re.compile(r"v?\d{1,4}(\.\d{1,4}){0,3}([.+-]?[A-Za-z0-9]{1,16}){0,3}")


class BadAnswer(ValueError):
    """A server's answer that is not what Hindsight sends; the message names the first wrong field."""


def _one_line(exc: ValidationError, what: str) -> BadAnswer:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".") or "the body"
    return BadAnswer(f"{what} does not look like Hindsight's: {where}: {first['msg'].lower()}")


def parse_recall(body: bytes | str) -> dict[str, Any]:
    """A recall response, or a bare trace as `record --from-traces` reads, as plain dicts holding only the
    keys the server sent; a BadAnswer when it is not JSON or a field autotune reads has the wrong type."""
    import pydantic_core

    try:
        value = pydantic_core.from_json(body)
    except ValueError as exc:
        raise BadAnswer(f"the response is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadAnswer(f"the response is a JSON {type(value).__name__}, not an object")
    model = _Trace if "trace" not in value and "reranked" in value else _Recall
    try:
        return model.model_validate(value).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise _one_line(exc, "the response") from None


def parse_version_body(body: bytes) -> str | None:
    """`/version`'s answer (`{"api_version": ...}`, `{"version": ...}` or a bare string) when it names a
    version such as `1.1.0` or `v0.9.2rc1`; None for anything else: the version picks how `record` rebuilds
    documents and labels the report, and a junk one must not pass for a release."""
    import pydantic_core

    try:
        value = pydantic_core.from_json(body)
    except ValueError:
        value = body[:64].decode("utf-8", "replace")
    if isinstance(value, dict):
        try:
            info = _Version.model_validate(value)
        except ValidationError:
            return None
        value = info.version or info.api_version
    if not isinstance(value, str) or not _VERSION.fullmatch(value.strip()):
        return None
    return value.strip()
