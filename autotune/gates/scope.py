"""How much Hindsight scores: the pool cap per budget level (`MAX_CANDIDATES_<LEVEL>`) and the per-candidate
token cut (`MAX_TOKENS_PER_CANDIDATE`), and the result-quality gate they are chosen under.

The reranking phase costs (pairs scored) x (tokens per pair). The engine knobs make a pair cheaper; these
make fewer and shorter pairs, and so they change what a recall returns. Each candidate scope is judged by
what Hindsight would return with it: `hindsight.ordering` replays the trim, the boosts and the token-budget
fill for the scores the candidate gets, and the gate compares those results with what the fp32 model
returns on the whole recorded pool. A pair's score does not depend on the rest of the pool, so a smaller
pool is judged on a subset of scores already computed: nothing is scored twice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from autotune.errors import OptionsError, SettingError
from autotune.fileio import sha256_bytes
from autotune.hindsight.keys import DEFAULT_LEVEL, LEVELS, TOKENS_PER_CANDIDATE, level_key
from autotune.hindsight.ordering import RecallPool, Signals, agreement
from autotune.hindsight.trace import recall_pool
from autotune.workload.candidate_cap import cut_documents
from autotune.workload.queries import Workload

# Every fifth cap (round numbers) from 10: judging a cap costs a replay, never a score, so a level whose
# results hold at 130 is not left at 150 for want of a grid point.
CAP_GRID = tuple(range(10, 300, 5))
TOKEN_GRID = (256, 160, 128, 96, 64, 48, 32)
NEUTRAL_TOP = 10  # without a recorded pool, the gate compares each query's top 10 by score
HEAD = 10  # the results an agent reads first: their overlap is gated too


@dataclass(frozen=True)
class Scope:
    """What Hindsight hands the reranker: a cap per budget level (absent: the pool as recorded) and a
    per-candidate token cut (None: whole candidates)."""

    caps: tuple[tuple[str, int], ...] = ()
    tokens: int | None = None

    def __post_init__(self) -> None:
        if any(level not in LEVELS or cap < 1 for level, cap in self.caps):
            raise OptionsError(f"a pool cap is a budget level ({', '.join(LEVELS)}) and 1 or more: {self.caps}")
        if self.tokens is not None and self.tokens < 1:
            raise OptionsError(f"{TOKENS_PER_CANDIDATE} of 0 cuts every candidate to nothing")

    def cap(self, level: str | None) -> int | None:
        return dict(self.caps).get(level or DEFAULT_LEVEL)

    def with_cap(self, level: str, cap: int | None) -> Scope:
        caps = {**dict(self.caps), level: cap}
        return replace(self, caps=tuple((lvl, c) for lvl in LEVELS if (c := caps.get(lvl)) is not None))

    def label(self) -> str:
        parts = [f"{level} pool {cap}" for level, cap in self.caps]
        parts.append(f"{self.tokens} tokens/candidate" if self.tokens else "whole candidates")
        return ", ".join(parts) if self.caps else "whole pool, " + parts[-1]

    def env_keys(self) -> dict[str, str]:
        """The keys that set it: per level (never the flat value, which also governs levels not measured), and
        the token cut when there is one. No value is ever 0 or empty."""
        keys = {level_key(level): str(cap) for level, cap in self.caps}
        if self.tokens is not None:
            keys[TOKENS_PER_CANDIDATE] = str(self.tokens)
        return keys

    def to_dict(self) -> dict[str, Any]:
        return {"max_candidates": dict(self.caps), "max_tokens_per_candidate": self.tokens}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Scope:
        data = data or {}
        caps = data.get("max_candidates") or {}
        return cls(tuple((level, int(caps[level])) for level in LEVELS if level in caps),
                   None if data.get("max_tokens_per_candidate") is None else int(data["max_tokens_per_candidate"]))


@dataclass(frozen=True)
class ResultGate:
    """The floor on result agreement: the mean over queries, and the worst single query."""

    min_mean: float = 0.95
    min_query: float = 0.8

    def __post_init__(self) -> None:
        for name, value in (("min_mean", self.min_mean), ("min_query", self.min_query)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 < value <= 1.0):
                raise SettingError(name, f"must be above 0 and at most 1, got {value}")

    def to_dict(self) -> dict[str, float]:
        return {"min_mean": self.min_mean, "min_query": self.min_query}


@dataclass(frozen=True)
class Agreement:
    """Per query, the share of the fp32 whole-pool results a candidate still returns; the share of fp32's
    first HEAD results among the candidate's first HEAD; and whether fp32's first result is still first.

    The share alone is blind where Hindsight returns the whole pool (a bank whose pools fit `max_tokens`):
    any scores then return the same set. The head's overlap is not, so both are gated."""

    per_query: list[float]
    top_kept: list[bool]
    recorded: int  # queries judged on a recorded replay (the rest: their top NEUTRAL_TOP by score)
    head: list[float] = field(default_factory=list)

    @property
    def head_mean(self) -> float:
        return float(np.mean(self.head)) if self.head else 1.0

    @property
    def mean(self) -> float:
        return float(np.mean(self.per_query)) if self.per_query else 1.0

    @property
    def worst(self) -> float:
        return min(self.per_query, default=1.0)

    @property
    def top1(self) -> float:
        return float(np.mean(self.top_kept)) if self.top_kept else 1.0

    def passes(self, gate: ResultGate) -> bool:
        return self.mean >= gate.min_mean and self.worst >= gate.min_query and self.head_mean >= gate.min_mean

    def reason(self, gate: ResultGate) -> str:
        if self.mean < gate.min_mean:
            return f"result agreement {self.mean:.3f} is below the floor of {gate.min_mean:g}"
        if self.worst < gate.min_query:
            return f"one query keeps {self.worst:.3f} of its results, below the floor of {gate.min_query:g}"
        return f"the first {HEAD} results overlap {self.head_mean:.3f}, below the floor of {gate.min_mean:g}"

    def summary(self) -> str:
        return (f"agreement mean {self.mean:.3f}, worst {self.worst:.3f}, first {HEAD} {self.head_mean:.3f}, "
                f"top result still first {self.top1:.0%}")

    def to_dict(self) -> dict[str, Any]:
        return {"mean": round(self.mean, 4), "worst": round(self.worst, 4), f"head{HEAD}": round(self.head_mean, 4),
                "top1_first": round(self.top1, 4), "queries": len(self.per_query), "recorded_queries": self.recorded}


def compare_results(reference: Sequence[Sequence[str]], candidate: Sequence[Sequence[str]],
                    recorded: int) -> Agreement:
    pairs = list(zip(reference, candidate, strict=True))
    shares = [agreement(ref, cand) for ref, cand in pairs]
    heads = [agreement(ref[:HEAD], cand[:HEAD]) for ref, cand in pairs]
    firsts = [not ref or (bool(cand) and cand[0] == ref[0]) for ref, cand in pairs]
    return Agreement(shares, firsts, recorded, heads)


class Replays:
    """Each query's pool: the recorded one where the recording replays to what Hindsight returned, else a
    neutral stand-in (documents in the given order, neutral boosts, the top NEUTRAL_TOP returned), which no
    cap may apply to."""

    def __init__(self, workload: Workload) -> None:
        self.pools: list[RecallPool] = []
        self.recorded: list[bool] = []
        for q in workload.queries:
            facts = q.extra.get("replay")
            pool = None
            if (isinstance(facts, dict) and facts.get("reproduced") and not facts.get("boosted")
                    and isinstance(q.extra.get("node_ids"), list)):
                try:
                    pool = recall_pool(facts, [str(n) for n in q.extra["node_ids"]])
                except ValueError:
                    pool = None
            self.recorded.append(pool is not None)
            self.pools.append(pool or _neutral(len(q.documents)))
        self.levels: dict[str, list[int]] = {}
        for i, q in enumerate(workload.queries):
            self.levels.setdefault(q.budget or DEFAULT_LEVEL, []).append(i)

    @property
    def any_recorded(self) -> bool:
        return any(self.recorded)

    def cappable(self, level: str) -> bool:
        """A level's pool can be capped only when every one of its queries has a recorded pool."""
        return level in self.levels and all(self.recorded[i] for i in self.levels[level])

    def largest(self, level: str) -> int:
        return max(len(self.pools[i].full()) for i in self.levels.get(level, []))

    def kept(self, i: int, level: str | None, scope: Scope) -> list[int]:
        cap = scope.cap(level)
        return self.pools[i].kept(cap) if cap is not None and self.recorded[i] else self.pools[i].full()

    def results(self, i: int, kept: Sequence[int], scores: Sequence[float]) -> list[str]:
        return self.pools[i].results(kept, scores)


def _neutral(n: int) -> RecallPool:
    ids = tuple(str(i) for i in range(n))
    return RecallPool(node_ids=ids, signals=(Signals(),) * n, text_tokens=(0,) * n, pool=ids,
                      rrf=tuple(float(n - i) for i in range(n)), thinking_budget=math.ceil(NEUTRAL_TOP / 2),
                      max_tokens=1)


@dataclass(frozen=True)
class Shaped:
    """The workload as Hindsight hands it to the reranker under a scope, and which recorded documents each
    query kept (indices into the recorded documents, in the order Hindsight hands them over)."""

    workload: Workload
    kept: list[list[int]]

    @property
    def pairs(self) -> int:
        return sum(len(k) for k in self.kept)


def shape(workload: Workload, replays: Replays, scope: Scope, encoding: str) -> Shaped:
    queries, kept_all = [], []
    for i, q in enumerate(workload.queries):
        kept = replays.kept(i, q.budget, scope)
        documents = [q.documents[k] for k in kept]
        if scope.tokens is not None:
            documents = cut_documents(documents, scope.tokens, encoding)
        queries.append(replace(q, documents=documents))
        kept_all.append(kept)
    identity = f"{workload.sha256}|{sorted(scope.to_dict().items())!r}|{encoding}".encode()
    return Shaped(Workload(queries, sha256_bytes(identity)), kept_all)


def final_results(replays: Replays, shaped: Shaped, scores: Sequence[np.ndarray]) -> list[list[str]]:
    """What Hindsight returns per query when the shaped workload's pairs score `scores`."""
    return [replays.results(i, kept, [float(s) for s in scores[i]]) for i, kept in enumerate(shaped.kept)]


def scoring_on(score: Callable[[str, list[str]], Any], workload: Workload,
               form: Workload | None) -> Callable[[str, list[str]], Any]:
    """A scorer handed its own form of each query of `workload` (matched by the documents list it is given):
    a profile's pool and token cut, timed beside contenders that score the whole pool."""
    if form is None:
        return score
    own = {id(q.documents): f for q, f in zip(workload.queries, form.queries, strict=True)}
    return lambda query, documents: score(query, own[id(documents)].documents)


def profile_form(profile: dict[str, Any], workload: Workload, *, tokens: bool = True) -> Workload | None:
    """The workload as Hindsight hands it over under a profile's chosen scope (None: the whole pool)."""
    from autotune.hindsight.keys import DEFAULT_ENCODING

    chosen = Scope.from_dict((profile.get("scope") or {}).get("chosen"))
    if not tokens:
        chosen = Scope(chosen.caps)
    replays = Replays(workload)
    if chosen.tokens is None and not (chosen.caps and replays.any_recorded):
        return None
    return shape(workload, replays, chosen, DEFAULT_ENCODING).workload


@dataclass(frozen=True)
class FrontierPoint:
    scope: Scope
    agreement: Agreement
    pairs: int
    passed: bool
    reason: str | None = None
    p95_ms: float | None = None  # timed only for the candidates that pass

    def to_dict(self) -> dict[str, Any]:
        return {**self.scope.to_dict(), "pairs": self.pairs, "agreement": self.agreement.to_dict(),
                "passed": self.passed, "reason": self.reason,
                "p95_ms": None if self.p95_ms is None else round(self.p95_ms, 3)}


@dataclass
class Exploration:
    """Every scope the gate judged, and the smallest passing one for each token cut (the ones worth timing)."""

    points: list[FrontierPoint] = field(default_factory=list)
    candidates: list[FrontierPoint] = field(default_factory=list)


Scorer = Callable[[Workload], list[np.ndarray]]


def explore(workload: Workload, replays: Replays, reference: Sequence[Sequence[str]], score: Scorer,
            gate: ResultGate, *, fixed: Scope, encoding: str, cap_grid: Sequence[int] = CAP_GRID,
            token_grid: Sequence[int] = TOKEN_GRID) -> Exploration:
    """For each token cut (whole candidates first; none other when `token_grid` is empty), score the whole
    pool once, then for each level that can be capped and is not fixed, find the smallest cap that keeps
    that level's queries above the floor. Caps are judged level by level: a level's queries see only their
    own level's cap. A cut no candidate reaches is skipped; the cuts go from long to short and stop at the
    first that fails the gate (a shorter one keeps less)."""
    from toktok import batch_count

    out = Exploration()
    free = [level for level in LEVELS if replays.cappable(level) and fixed.cap(level) is None]
    longest = max((max(batch_count(q.documents, encoding), default=0) for q in workload.queries), default=0)
    for cut in [None, *sorted((t for t in token_grid if t < longest), reverse=True)]:
        whole = shape(workload, replays, replace(fixed, tokens=cut), encoding)
        scores = score(whole.workload)
        by_doc = [dict(zip(kept, s, strict=True)) for kept, s in zip(whole.kept, scores, strict=True)]
        scope = replace(fixed, tokens=cut)
        point = _judged(workload, replays, reference, by_doc, scope, gate)
        out.points.append(point)
        if not point.passed:
            break
        for level in free:
            for cap in (c for c in sorted(cap_grid) if c < replays.largest(level)):
                trial = _judged(workload, replays, reference, by_doc, scope.with_cap(level, cap), gate,
                                replays.levels[level])
                out.points.append(trial)
                if trial.passed:
                    scope = trial.scope
                    break
        out.candidates.append(_judged(workload, replays, reference, by_doc, scope, gate))
    return out


def _judged(workload: Workload, replays: Replays, reference: Sequence[Sequence[str]],
            by_doc: Sequence[dict[int, float]], scope: Scope, gate: ResultGate,
            only: Sequence[int] | None = None) -> FrontierPoint:
    """The scope's results against the reference, on every query or `only` some (one level's)."""
    picked = range(len(workload.queries)) if only is None else only
    finals, refs, pairs = [], [], 0
    for i in picked:
        kept = replays.kept(i, workload.queries[i].budget, scope)
        finals.append(replays.results(i, kept, [float(by_doc[i][k]) for k in kept]))
        refs.append(reference[i])
        pairs += len(kept)
    result = compare_results(refs, finals, sum(replays.recorded[i] for i in picked))
    passed = result.passes(gate)
    return FrontierPoint(scope, result, pairs, passed, None if passed else result.reason(gate))
