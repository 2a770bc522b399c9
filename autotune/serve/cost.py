"""What a request will cost the sidecar, so that a wait past the client's time-out is refused honestly.

A running mean of seconds per character was blown up by small requests (their fixed per-batch cost spread over
a few characters) and then refused large ones that would have finished in 2.5 s. The cost here is what the
engine does: a fixed cost per batch and a cost per token after truncation, both fitted online by least squares
over the requests served (older ones weigh less), and a request's tokens are estimated from its characters at
the characters-per-token this model's tokenizer has shown, each pair capped at the model's length.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

DECAY = 0.9  # each observation's weight after the next: the fit follows a host whose load changes
START_CHARS_PER_TOKEN = 4.0  # a usual WordPiece/BPE ratio on English, until the tokenizer has shown its own


@dataclass(frozen=True)
class Work:
    """A request's size as the engine will see it."""

    batches: int
    tokens: int


class CostModel:
    """seconds = per_batch x batches + per_token x tokens, fitted on the requests served; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums = [0.0] * 5  # decayed sums of bb, bt, tt, by, ty
        self._chars = self._tokens = 0.0
        self.observed = 0

    def work(self, query: str, texts: Sequence[str], *, batch_size: int, max_length: int) -> Work:
        with self._lock:
            ratio = self._chars / self._tokens if self._tokens else START_CHARS_PER_TOKEN
        tokens = sum(min(max_length, math.ceil((len(query) + len(t)) / ratio) + 3) for t in texts)
        return Work(math.ceil(len(texts) / max(1, batch_size)), tokens)

    def observe(self, work: Work, seconds: float, *, real_tokens: int, sample: tuple[int, int] = (0, 0)) -> None:
        """One request served: its batches, the tokens it really had, and (`sample`) the characters and tokens
        of its pairs that truncation left whole, from which the characters per token are learnt."""
        b, t = float(work.batches), float(real_tokens)
        chars, tokens = sample
        with self._lock:
            s = [x * DECAY for x in self._sums]
            self._sums = [s[0] + b * b, s[1] + b * t, s[2] + t * t, s[3] + b * seconds, s[4] + t * seconds]
            self._chars = self._chars * DECAY + chars
            self._tokens = self._tokens * DECAY + tokens
            self.observed += 1

    def coefficients(self) -> tuple[float, float] | None:
        """(seconds per batch, seconds per token), both >= 0; None before anything was served."""
        with self._lock:
            bb, bt, tt, by, ty = self._sums
        if bb <= 0:
            return None
        det = bb * tt - bt * bt
        if det > 1e-9 * bb * tt:
            per_batch, per_token = (by * tt - ty * bt) / det, (ty * bb - by * bt) / det
            if per_batch >= 0 and per_token >= 0:
                return per_batch, per_token
        # collinear so far (requests of one shape), or a negative part: the better of the one-term fits
        only_batch, only_token = max(0.0, by / bb), max(0.0, ty / tt) if tt > 0 else 0.0
        return (only_batch, 0.0) if only_token == 0.0 or by * only_batch >= ty * only_token else (0.0, only_token)

    def seconds(self, work: Work) -> float | None:
        fit = self.coefficients()
        return None if fit is None else fit[0] * work.batches + fit[1] * work.tokens
