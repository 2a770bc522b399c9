"""The served worst case: every worker holding its largest batch of the longest input at once.

A burst of the longest requests is what takes a reranker's process to its peak: each worker scores one
batch at a time, and at one input length the largest batch is `rows_at(length)` rows (TEI's token budget
cuts it). Where the workers share one session (Hindsight in-process) its weights count once; where each
has its own (the sidecar), once per worker. The sidecar can also cut its inputs shorter than the model's
positions (`AUTOTUNE_MAX_INPUT_LENGTH`), which is how a long-context model is served within a budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.measure.memory import ESTIMATE_MARGIN, RUNTIME_MB, ModelMemory


@dataclass(frozen=True)
class BurstShape:
    """How the served process is loaded at its worst."""

    workers: int
    shared_session: bool
    batch_size: int
    max_batch_tokens: int | None

    def rows_at(self, length: int) -> int:
        """Rows of the largest batch when every input has `length` tokens, as `plan_batches` cuts them."""
        if self.max_batch_tokens is None:
            return self.batch_size
        return max(1, min(self.batch_size, self.max_batch_tokens // max(length, 1)))

    def estimate_mb(self, model: ModelMemory, length: int) -> float:
        sessions = 1 if self.shared_session else self.workers
        return (sessions * (model.resident_mb() + RUNTIME_MB)
                + self.workers * model.batch_mb(self.rows_at(length), length))

    def longest_within(self, model: ModelMemory, model_max: int, room_mb: float) -> int | None:
        """The longest input length up to `model_max` whose burst, with the estimate's margin, fits in
        `room_mb`; None when not even one token's does. The burst grows with the length (rows x length^2
        while the count binds, about tokens x length once the token budget does), so a bisection finds it."""
        def fits(length: int) -> bool:
            return ESTIMATE_MARGIN * self.estimate_mb(model, length) <= room_mb

        if fits(model_max):
            return model_max
        if not fits(1):
            return None
        low, high = 1, model_max  # fits(low), not fits(high)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        return low
