"""Reading Hindsight's recall traces: durations that must be durations, and the facts a replay needs."""

from __future__ import annotations

import math
from typing import Any

MAX_SECONDS = 86_400.0  # a day: no recall's phase takes longer


def positive_seconds(value: Any, what: str) -> float:
    """A duration from outside (a server's trace, a recording): a finite number of seconds above zero, or a
    ValueError that names it. NaN, 1e308-as-infinity, negatives and zero would make every ratio a lie."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is not a number of seconds ({type(value).__name__})")
    try:
        seconds = float(value)
    except OverflowError:
        raise ValueError(f"{what} is too large to be a duration") from None
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise ValueError(f"{what} is {seconds!r}, not a duration between 0 and {MAX_SECONDS:.0f} seconds")
    return seconds


def rerank_phase_seconds(trace: dict[str, Any]) -> float | None:
    """Hindsight's own time for the reranking phase (`summary.phase_metrics`), or None when the trace has
    none; a ValueError when it has one that is not a duration."""
    summary = trace.get("summary") if isinstance(trace.get("summary"), dict) else {}
    metrics = summary.get("phase_metrics") if isinstance(summary, dict) else None
    for m in metrics if isinstance(metrics, list) else []:
        if isinstance(m, dict) and (m.get("phase_name") or m.get("phase")) == "reranking":
            return positive_seconds(m.get("duration_seconds"), "the reranking phase's duration_seconds")
    return None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ValueError(f"{what} is not a finite number")
    return float(value)


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} is not a count")
    return value


def pool_facts(response: dict[str, Any], encoding: str) -> dict[str, Any]:
    """What a replay of Hindsight's ordering needs from one recall with `trace: true`, in the reranked
    candidates' order: the whole fused pool (`rrf_merged`, fusion order), each candidate's boosts and its
    text's token count (in `encoding`, Hindsight's TOKENIZER_ENCODING), the thinking budget and
    `max_tokens`, the results Hindsight returned, and what would make a replay wrong (a pool the recording's
    Hindsight already cut, scores a deadline left at 0). Only ids, numbers and counts: no text."""
    from toktok import batch_count

    trace = response["trace"]
    merged = trace.get("rrf_merged")
    if not isinstance(merged, list) or not merged:
        raise ValueError("trace.rrf_merged is missing: the recall's fused pool is needed to replay a smaller one")
    pool = [str(m.get("node_id")) for m in merged if isinstance(m, dict)]
    rrf = [_number(m.get("rrf_score"), "an rrf_score") for m in merged if isinstance(m, dict)]
    signals, texts, deadline_zeros = [], [], 0
    for cand in trace["reranked"]:
        parts = cand.get("score_components") if isinstance(cand.get("score_components"), dict) else {}
        combined = parts.get("combined_score", 0.0)
        stage2 = _number(cand.get("rerank_score", combined), "a rerank_score") - _number(combined, "a combined_score")
        signals.append([_number(parts.get(k, 0.5), k) for k in ("recency", "temporal", "proof_norm")] + [stage2])
        texts.append(str(cand.get("text") or ""))
        if parts.get("cross_encoder_score") == 0.0 and parts.get("cross_encoder_score_normalized") == 0.0:
            deadline_zeros += 1
    info = trace.get("query") if isinstance(trace.get("query"), dict) else {}
    metrics = (trace.get("summary") or {}).get("phase_metrics") if isinstance(trace.get("summary"), dict) else None
    prefilter = next((m for m in metrics or [] if isinstance(m, dict) and m.get("phase_name") == "rerank_prefilter"),
                     None)
    results = response.get("results")
    if not isinstance(results, list):
        raise ValueError("the response has no results list")
    facts = {"pool": pool, "rrf": rrf, "signals": signals,
             "text_tokens": [int(n) for n in batch_count(texts, encoding)], "encoding": encoding,
             "thinking_budget": _count(info.get("budget"), "trace.query.budget"),
             "max_tokens": _count(info.get("max_tokens"), "trace.query.max_tokens"),
             "timestamp": info.get("timestamp"),
             "results": [str(r.get("id")) for r in results if isinstance(r, dict)]}
    if prefilter is not None:
        facts["recorded_cap"] = _count((prefilter.get("details") or {}).get("max_candidates"),
                                       "the rerank_prefilter's max_candidates")
    if deadline_zeros:
        facts["deadline_zeros"] = deadline_zeros
    if any(s[3] for s in signals) or (prefilter is not None and (prefilter.get("details") or {}).get(
            "strategy_boosts")):
        facts["boosted"] = True  # RECALL_STRATEGY_BOOSTS reorder the trim: a replay would cap the wrong pool
    return facts


def recall_pool(facts: Any, node_ids: list[str]) -> Any:
    """The `RecallPool` a workload line's `replay` object describes (a ValueError naming what is wrong:
    the file is the user's, and may have been edited)."""
    from autotune.hindsight.ordering import RecallPool, Signals

    if not isinstance(facts, dict):
        raise ValueError("\"replay\" must be an object")
    fused, rrf, signals, tokens = (facts.get(k) for k in ("pool", "rrf", "signals", "text_tokens"))
    if not (isinstance(fused, list) and isinstance(rrf, list) and isinstance(signals, list)
            and isinstance(tokens, list)):
        raise ValueError("\"replay\" needs the lists pool, rrf, signals and text_tokens")
    if len(signals) != len(node_ids) or len(tokens) != len(node_ids):
        raise ValueError("\"replay\" needs one signals entry and one text_tokens count per document")
    if not all(isinstance(s, list) and len(s) == 4 for s in signals):
        raise ValueError("each \"replay\" signals entry is [recency, temporal, proof_norm, stage2]")
    return RecallPool(
        node_ids=tuple(node_ids),
        signals=tuple(Signals(*(_number(v, "a replay signal") for v in s)) for s in signals),
        text_tokens=tuple(_count(n, "a text_tokens entry") for n in tokens),
        pool=tuple(str(p) for p in fused), rrf=tuple(_number(r, "an rrf score") for r in rrf),
        thinking_budget=_count(facts.get("thinking_budget"), "thinking_budget"),
        max_tokens=_count(facts.get("max_tokens"), "max_tokens"))
