"""`autotune verify`: after a cutover, measure the live reranking phase against what was recorded before.

Recalls run with `trace: true`, warmed up, then in interleaved rounds (the order rotates each
round). The reranking phase is Hindsight's own measurement (`phase_metrics`, `reranking`). Its
p95 is compared with the `hindsight_rerank_s` recorded before the cutover for the same queries
and budgets; the live scores go through the same self-check as a recording.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune.errors import OptionsError, UpstreamError, WorkloadError
from autotune.gates.scope import Agreement, compare_results
from autotune.gates.selfcheck import SelfCheck
from autotune.hindsight.client import check_url, post_with_retry, recall_path, server_version
from autotune.hindsight.keys import DEFAULT_ENCODING
from autotune.hindsight.trace import positive_seconds, rerank_phase_seconds
from autotune.measure.stats import percentile, relative_spread
from autotune.runtime.targets.key_spec import env_texts
from autotune.workload.candidate_cap import CAP_KEY, CandidateCap, cap_from_env
from autotune.workload.queries import Workload, parse_line
from autotune.workload.record import line_from_recall, recall_body

Job = tuple[str, str]  # (query, budget)


@dataclass
class VerifyResult:
    version: str | None
    jobs: int
    rounds: int
    after_p50_ms: float
    after_p95_ms: float
    round_p95_ms: list[float]
    scale: str  # what the live scores look like: logits (onnx) or probabilities (local, tei)
    before_p95_ms: float | None = None
    matched: int = 0
    predicted_gain: float | None = None
    self_check: SelfCheck | None = None
    notes: list[str] = field(default_factory=list)
    agreement: Agreement | None = None  # the live results after against the recorded results before

    @property
    def gain(self) -> float | None:
        """> 1 means the live reranking phase is faster than before the cutover."""
        return None if self.before_p95_ms is None else self.before_p95_ms / self.after_p95_ms

    @property
    def spread(self) -> float:
        return relative_spread(self.round_p95_ms)


def _rerank_seconds(response: dict[str, Any]) -> float:
    found = response.get("trace") if isinstance(response, dict) else None
    trace: dict[str, Any] = found if isinstance(found, dict) else {}
    try:
        value = rerank_phase_seconds(trace)
    except ValueError as exc:
        raise UpstreamError(f"the recall's trace: {exc}") from exc
    if value is not None:
        return value
    raise UpstreamError("the recall's trace has no reranking phase: is the reranker on (reranking mode "
                        "cross_encoder), and was the recall made with trace: true?")


def _recall(client: Any, path: str, job: Job, max_tokens: int | None = None) -> dict[str, Any]:
    """One recall, no retry: after a cutover every recall must answer 200 the first time."""
    query, budget = job
    return post_with_retry(client, path, recall_body(query, budget, max_tokens), 0)


def before_results(before: Workload) -> dict[Job, tuple[list[str], int]]:
    """The results Hindsight returned per (query, budget) before the cutover, and the max_tokens they were
    asked with, where the recording kept them (`autotune record` >= the pool knobs)."""
    out = {}
    for q in before.queries:
        facts = q.extra.get("replay")
        if isinstance(facts, dict) and isinstance(facts.get("results"), list) and isinstance(
                facts.get("max_tokens"), int):
            out[(q.query, q.budget or "mid")] = ([str(r) for r in facts["results"]], facts["max_tokens"])
    return out


def result_ids(response: dict[str, Any]) -> list[str]:
    results = response.get("results") if isinstance(response, dict) else None
    if not isinstance(results, list):
        raise UpstreamError("the recall's response has no results list")
    return [str(r.get("id")) for r in results if isinstance(r, dict)]


def before_seconds(before: Workload) -> dict[Job, float]:
    """The recorded reranking phase per (query, budget); a recorded value that is not a duration is refused."""
    out = {}
    for n, q in enumerate(before.queries, start=1):
        if "hindsight_rerank_s" in q.extra:
            try:
                out[(q.query, q.budget or "mid")] = positive_seconds(q.extra["hindsight_rerank_s"],
                                                                     f"--before line {n}'s hindsight_rerank_s")
            except ValueError as exc:
                raise WorkloadError(str(exc)) from exc
    return out


def verify_cutover(url: str, bank: str, queries: Sequence[str], budgets: Sequence[str], *, api_key: str | None,
                   rounds: int = 3, before: Workload | None = None, profile: dict[str, Any] | None = None,
                   model_dir: Any = None, check_scores: bool = True, timeout_s: float = 60.0) -> VerifyResult:
    import httpx

    if rounds < 1:
        raise OptionsError(f"--rounds must be at least 1, got {rounds}")
    path = recall_path(bank)
    jobs: list[Job] = [(q, b) for q in queries for b in budgets]
    earlier = before_results(before) if before is not None else {}
    tokens = {job: earlier[job][1] for job in jobs if job in earlier}  # asked as the recording asked
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    seconds: dict[Job, list[float]] = {job: [] for job in jobs}
    last: dict[Job, dict[str, Any]] = {}
    per_round: list[list[float]] = []
    with httpx.Client(base_url=check_url(url), headers=headers, timeout=timeout_s) as client:
        version = server_version(client)
        for job in jobs:  # warm-up: sessions, arenas, caches
            _recall(client, path, job, tokens.get(job))
        for r in range(rounds):
            order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
            this_round = []
            for job in order:
                response = _recall(client, path, job, tokens.get(job))
                value = _rerank_seconds(response)
                seconds[job].append(value)
                this_round.append(value)
                last[job] = response
            per_round.append(this_round)
    medians = [float(np.median(v)) for v in seconds.values()]
    result = VerifyResult(version=version, jobs=len(jobs), rounds=rounds,
                          after_p50_ms=percentile(medians, 50) * 1000.0, after_p95_ms=percentile(medians, 95) * 1000.0,
                          round_p95_ms=[percentile(r, 95) * 1000.0 for r in per_round], scale=_scale(last.values()))
    if before is not None:
        recorded = before_seconds(before)
        matched = [job for job in jobs if job in recorded]
        if not matched:
            raise OptionsError("--before has no recorded reranking time for these queries and budgets: record it "
                               "with the same --queries and --budget before the cutover")
        result.matched = len(matched)
        after = [float(np.median(seconds[job])) for job in matched]
        result.before_p95_ms = percentile([recorded[job] for job in matched], 95) * 1000.0
        result.after_p95_ms = percentile(after, 95) * 1000.0
        if len(matched) < len(jobs):
            result.notes.append(f"{len(jobs) - len(matched)} of {len(jobs)} recalls had no recorded time before; "
                                "the ratio uses the others")
    compared = [job for job in jobs if job in earlier]
    if compared:
        result.agreement = compare_results([earlier[job][0] for job in compared],
                                           [result_ids(last[job]) for job in compared], len(compared))
    elif before is not None:
        result.notes.append("--before holds no recorded results (record with this autotune): live result "
                            "agreement cannot be judged")
    if profile is not None:
        result.predicted_gain = (profile.get("metrics") or {}).get("speedup_p95")
    if check_scores:
        lines = [parse_line(json.dumps(line_from_recall(last[job], budget=job[1], version=version),
                                       ensure_ascii=False), 0) for job in jobs]
        from autotune.gates.selfcheck import check_recording

        result.self_check = check_recording(lines, model_dir, batching=profile_batching(profile),
                                            cap=profile_cap(profile))
    return result


def profile_cap(profile: dict[str, Any] | None) -> CandidateCap | None:
    """The `MAX_TOKENS_PER_CANDIDATE` cut Hindsight runs under this profile: the profile's own, else the one the
    user's `.env` already set when it was tuned; None without one."""
    if profile is None:
        return None
    env = env_texts(profile.get("env") or {})
    if CAP_KEY in env:
        return cap_from_env(env)
    tuned = (profile.get("workload") or {}).get("candidate_cap") or {}
    if isinstance(tuned, dict) and isinstance(tuned.get("max_tokens_per_candidate"), int):
        return CandidateCap(tuned["max_tokens_per_candidate"], str(tuned.get("encoding") or DEFAULT_ENCODING))
    return None


def profile_batching(profile: dict[str, Any] | None) -> tuple[Any, str] | None:
    """How the profile's Hindsight batches pairs (its configuration and its target's sort key), for a replay
    that must give its very scores; None without a profile (a batch-1 replay)."""
    if profile is None:
        return None
    from autotune.outputs.profile import profile_config, profile_target
    from autotune.runtime.targets import get_target

    config = profile_config(profile)
    traits = get_target(profile_target(profile)).traits(1, 1 << 20)
    return config, traits.sort_key


def _scale(responses: Any) -> str:
    values = []
    for response in responses:
        for cand in ((response.get("trace") or {}).get("reranked") or []):
            score = (cand.get("score_components") or {}).get("cross_encoder_score") if isinstance(cand, dict) else None
            if isinstance(score, (int, float)):
                values.append(float(score))
    if not values:
        return "unknown (no cross_encoder_score in the traces)"
    if min(values) < 0.0 or max(values) > 1.0:
        return "raw logits: an in-process provider that returns logits (onnx)"
    return "within [0, 1]: probabilities (local, tei), or logits that happen to fall there"
