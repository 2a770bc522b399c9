"""What the scope phase chose, in the profile's words: it holds the engine's pick on the whole pool (a race's
`Finalist`), so it lives with the search, above the gate (`gates.scope`) that judged each scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.gates.scope import Agreement, FrontierPoint, ResultGate, Scope
from autotune.search.finalists import Finalist


@dataclass(frozen=True)
class ScopeOutcome:
    """What the scope phase chose and why: the profile's `scope` section, and the run's frontier table."""

    scope: Scope  # the chosen one, the user's fixed caps included
    fixed: Scope  # what the user's own `.env` lines fix (respected, never rewritten)
    tokens_fixed: bool
    gate: ResultGate
    agreement: Agreement  # the winner's, against fp32 on the pool as recorded
    points: tuple[FrontierPoint, ...] = ()
    engine_only: Finalist | None = None  # the engine's pick on the whole pool, in the same race as the winner
    pairs_whole: int = 0
    pairs_scored: int = 0
    recorded_queries: int = 0
    note: str | None = None  # why the pool was not tuned, when it was not

    def env_keys(self) -> dict[str, str]:
        """Only what autotune chose: a level or a token cut the user fixed stays in the user's lines."""
        fixed_levels = {level for level, _ in self.fixed.caps}
        chosen = Scope(tuple((lv, c) for lv, c in self.scope.caps if lv not in fixed_levels),
                       None if self.tokens_fixed else self.scope.tokens)
        return chosen.env_keys()

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.scope.to_dict(), "fixed_by_user": {**self.fixed.to_dict(),
                                                                 "tokens_fixed": self.tokens_fixed},
                "gate": self.gate.to_dict(), "agreement": self.agreement.to_dict(),
                "pairs": {"whole_pool": self.pairs_whole, "scored": self.pairs_scored},
                "recorded_queries": self.recorded_queries, "note": self.note,
                "engine_only_p95_ms": None if self.engine_only is None else round(self.engine_only.latency.p95_ms, 3),
                "frontier": [p.to_dict() for p in self.points]}

