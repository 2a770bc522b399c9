"""Does a recording reproduce Hindsight's own scores? If not, say how many differ and the likely cause.

Hindsight records each candidate's raw provider score (`cross_encoder_score`): a logit from the
onnx provider, a probability from `local` or `tei`, which already applied a sigmoid. Each
recorded query is read on whichever scale fits it, and compared with autotune's logits for the
rebuilt pairs: Spearman over the candidates, and max |Δlogit|.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from autotune.gates.parity import spearman
from autotune.runtime.engine import EngineConfig, logit, sigmoid
from autotune.workload.candidate_cap import CandidateCap, cut_documents
from autotune.workload.queries import Query

LOGIT_TOLERANCE = 1e-4
# An int8 model's replay cannot be exact: Hindsight's stable sort by characters leaves ties in an order the trace
# does not keep, a pair's batch partners set its padding, and fp32 noise in the padding can flip an int8 rounding
# (per-token int8: 4 of 90 live scores off by up to 0.09 logits). A wrong tokenizer path or an uncut document
# moved scores by 2-4 logits on the same recording.
INT8_REPLAY_TOLERANCE = 0.15
SIGMOID_OF_UNIT = (0.5, float(sigmoid(np.array([1.0]))[0]))  # sigmoid([0, 1]): where twice-sigmoided scores land


@dataclass(frozen=True)
class SelfCheck:
    queries: int = 0
    candidates: int = 0
    differ: int = 0
    spearman_min: float = 1.0
    max_abs_logit: float = 0.0
    scales: dict[str, int] = field(default_factory=dict)  # how Hindsight's scores were read, per query
    cause: str | None = None
    tolerance: float = LOGIT_TOLERANCE

    @property
    def passed(self) -> bool:
        # every score within the tolerance: a rank can then only move between candidates that tie within it
        # (a large bank repeats memories, and batches add float noise to equal scores)
        # (an int8 replay's tolerance is wider: ranks may swap between candidates within 2 x 0.15 logits)
        return self.differ == 0 and (self.spearman_min >= 0.999 or self.tolerance > LOGIT_TOLERANCE)

    def summary(self) -> str:
        head = (f"{self.differ} of {self.candidates} recorded candidates in {self.queries} queries differ from "
                f"Hindsight's own scores (Spearman min {self.spearman_min:.4f}, max |Δlogit| "
                f"{self.max_abs_logit:.2e})")
        if self.passed:
            within = "" if self.tolerance <= LOGIT_TOLERANCE else f" within {self.tolerance:g} logits (int8)"
            return f"all {self.candidates} recorded candidates reproduce Hindsight's own scores{within} " \
                   f"(Spearman {self.spearman_min:.4f}, max |Δlogit| {self.max_abs_logit:.1e})"
        return f"{head}; likely cause: {self.cause}"

    def to_dict(self) -> dict[str, Any]:
        return {"queries": self.queries, "candidates": self.candidates, "differ": self.differ,
                "spearman_min": round(self.spearman_min, 6), "max_abs_logit": float(f"{self.max_abs_logit:.3e}"),
                "scales": self.scales, "passed": self.passed, "cause": self.cause}


def self_check(queries: Sequence[Query], ours: Sequence[np.ndarray], *,
               tolerance: float = LOGIT_TOLERANCE) -> SelfCheck | None:
    """`ours` are autotune's logits for each query's pairs; None when nothing recorded Hindsight's scores."""
    scales: dict[str, int] = {}
    n_queries = candidates = differ = 0
    spearman_min, max_abs = 1.0, 0.0
    differing_docs: list[str] = []
    twice = 0
    for query, logits in zip(queries, ours, strict=True):
        recorded = query.extra.get("hindsight_scores")
        if not isinstance(recorded, list) or len(recorded) != len(logits):
            continue
        keep = [i for i, s in enumerate(recorded) if isinstance(s, (int, float)) and np.isfinite(s)]
        if not keep:
            continue
        theirs = np.asarray([recorded[i] for i in keep], dtype=np.float64)
        mine = np.asarray(logits, dtype=np.float64)[keep]
        scale, theirs_logits = _read_scale(theirs, mine)
        scales[scale] = scales.get(scale, 0) + 1
        delta = np.abs(mine - theirs_logits)
        n_queries += 1
        candidates += len(keep)
        max_abs = max(max_abs, float(delta.max()))
        spearman_min = min(spearman_min, spearman(mine, theirs))
        bad = delta > tolerance
        differ += int(bad.sum())
        docs = [query.documents[i] for i in keep]
        differing_docs += [d for d, b in zip(docs, bad, strict=True) if b]
        lo, hi = SIGMOID_OF_UNIT
        if np.all((theirs >= lo - 1e-9) & (theirs <= hi + 1e-9)) and np.allclose(
                theirs, sigmoid(sigmoid(mine)), atol=1e-4):
            twice += 1
    if n_queries == 0:
        return None
    report = SelfCheck(n_queries, candidates, differ, spearman_min, max_abs, scales, tolerance=tolerance)
    return report if report.passed else replace(report, cause=_likely_cause(report, differing_docs, twice))


def _read_scale(theirs: np.ndarray, mine: np.ndarray) -> tuple[str, np.ndarray]:
    """Logits, or probabilities (a provider that already applied the sigmoid): whichever fits ours."""
    as_logits = float(np.max(np.abs(mine - theirs)))
    if np.all((theirs > 0) & (theirs < 1)):
        converted = logit(theirs)
        if float(np.max(np.abs(mine - converted))) < as_logits:
            return "probabilities", converted
    return "logits", theirs


def _likely_cause(report: SelfCheck, differing: list[str], twice: int) -> str:
    if twice and twice * 2 >= report.queries:
        return ("sigmoid applied twice: every score lies within [0.5, 0.731]; with Hindsight ≤ 0.6.2 set "
                "AUTOTUNE_RAW_SCORES=true")
    prefixed = sum(d.startswith("[Date:") for d in differing)
    if differing and prefixed >= 0.9 * len(differing):
        return ("the rebuilt text: every differing document carries a date prefix; Hindsight dated them "
                "otherwise (record again with the Hindsight that will run, so its version's rules apply)")
    if report.spearman_min < 0.5:
        return "another model: the recording's order is unrelated to this model's; tune with --model <your reranker>"
    return ("another tokenizer path or truncation (a wrong tokenizer once gave 55 tokens for 25): check "
            "ONNX_TOKENIZER_NAME_OR_PATH and ONNX_MAX_TOKENS, and whether Hindsight cut the documents "
            "(MAX_TOKENS_PER_CANDIDATE: pass the .env it ran with)")


def logits_from_scores(scores: Sequence[np.ndarray]) -> list[np.ndarray]:
    """autotune's calibrated scores back to logits (float64: exact enough for |logit| < 30)."""
    return [logit(np.asarray(s, dtype=np.float64)) for s in scores]


def check_recording(queries: Sequence[Query], model_dir: Any, *, max_tokens: int | None = None,
                    batching: tuple[EngineConfig, str] | None = None,
                    cap: CandidateCap | None = None) -> SelfCheck | None:
    """Score a recording's rebuilt pairs with a model and compare with Hindsight's scores: at batch size 1, or
    (`batching`: a configuration and its sort key) batched as the profile's Hindsight batches them. An int8
    model needs the latter: dynamic quantization scales activations per batch, so a pair's int8 score depends on
    the pairs batched with it. `cap` is the `MAX_TOKENS_PER_CANDIDATE` cut Hindsight ran with: a trace holds
    each document whole, and Hindsight scored it cut."""
    from autotune.runtime.engine import REFERENCE, EngineTraits
    from autotune.runtime.model import resolve_model
    from autotune.runtime.sessions import EnginePool
    from autotune.runtime.targets.hindsight_onnx import onnx_max_tokens

    if not any(isinstance(q.extra.get("hindsight_scores"), list) for q in queries):
        return None
    bundle = resolve_model(model_dir)
    tokens = max_tokens or onnx_max_tokens(bundle.max_length)
    config, sort_key = batching or (REFERENCE, "chars_desc")
    tolerance = INT8_REPLAY_TOLERANCE if config.precision == "int8" else LOGIT_TOLERANCE
    config = replace(config, precision="fp32", graph="plain", workers=1)  # the directory's model.onnx as it is
    engine = EnginePool(bundle, has_vnni=False, traits=EngineTraits(max_tokens=tokens, sort_key=sort_key),
                        max_sessions=1).engine(config)
    def documents(q: Query) -> list[str]:
        return q.documents if cap is None else cut_documents(q.documents, cap.max_tokens, cap.encoding)

    return self_check(queries, [engine.score(q.query, documents(q)).raw for q in queries], tolerance=tolerance)
