"""What a request will cost the sidecar, so that a wait past the client's time-out is refused honestly.

A running mean of seconds per character was blown up by small requests (their fixed per-batch cost spread over
a few characters) and then refused large ones that would have finished in 2.5 s. The cost here is what the
engine does: a fixed cost per batch and a cost per token after truncation, both fitted online by least squares
over the requests served (older ones weigh less), and a request's tokens are estimated from its characters at
the characters-per-token this model's tokenizer has shown, each pair capped at the model's length.

Nothing a client sends may break the estimate (issue 50): an empty request once taught a ratio of 0 characters
per token and every later request failed on a division by zero. So a ratio is learnt only from pairs that had
characters, it is held to a plausible range, a fit is made only once two distinct request shapes were seen (one
shape cannot tell a batch's cost from a token's), and a fit that comes out non-finite or negative keeps the last
good one, or the prior the server measured at start.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

DECAY = 0.9  # each observation's weight after the next: the fit follows a host whose load changes
START_CHARS_PER_TOKEN = 4.0  # a usual WordPiece/BPE ratio on English, until the tokenizer has shown its own
CHARS_PER_TOKEN_RANGE = (1.0, 16.0)  # what any subword tokenizer gives on text; a learnt ratio is held inside it
DISTINCT = 1.25  # two shapes are distinct when their tokens per batch differ by this factor


@dataclass(frozen=True)
class Work:
    """A request's size as the engine will see it."""

    batches: int
    tokens: int


Fit = tuple[float, float]  # (seconds per batch, seconds per token)


def _usable(fit: Fit | None) -> bool:
    return fit is not None and all(math.isfinite(x) and x >= 0 for x in fit) and fit[0] + fit[1] > 0


class CostModel:
    """seconds = per_batch x batches + per_token x tokens, fitted on the requests served; thread-safe.

    `prior` is what the server measured on itself at start (`RerankService.calibrate`): the estimate until two
    distinct shapes were served, and the fallback when a fit fails."""

    def __init__(self, prior: Fit | None = None) -> None:
        self._lock = threading.Lock()
        self._sums = [0.0] * 5  # decayed sums of bb, bt, tt, by, ty
        self._chars = self._tokens = 0.0
        self._shapes: list[float] = []  # tokens per batch of the distinct shapes seen (two are enough)
        self._last_good: Fit | None = None
        self.prior = prior if _usable(prior) else None
        self.observed = 0

    def set_prior(self, prior: Fit | None) -> None:
        with self._lock:
            self.prior = prior if _usable(prior) else None

    def chars_per_token(self) -> float:
        with self._lock:
            chars, tokens = self._chars, self._tokens
        ratio = chars / tokens if tokens > 0 and chars > 0 else START_CHARS_PER_TOKEN
        low, high = CHARS_PER_TOKEN_RANGE
        return min(high, max(low, ratio)) if math.isfinite(ratio) else START_CHARS_PER_TOKEN

    def work(self, query: str, texts: Sequence[str], *, batch_size: int, max_length: int) -> Work:
        ratio = self.chars_per_token()
        tokens = sum(min(max_length, math.ceil((len(query) + len(t)) / ratio) + 3) for t in texts)
        return Work(math.ceil(len(texts) / max(1, batch_size)), tokens)

    def observe(self, work: Work, seconds: float, *, real_tokens: int, sample: tuple[int, int] = (0, 0)) -> None:
        """One request served: its batches, the tokens it really had, and (`sample`) the characters and tokens
        of its pairs that truncation left whole, from which the characters per token are learnt."""
        b, t = float(work.batches), float(real_tokens)
        if not (math.isfinite(seconds) and seconds >= 0 and b > 0 and t >= 0):
            return  # nothing to learn from a request that did no work, or a clock that went wrong
        chars, tokens = sample
        with self._lock:
            s = [x * DECAY for x in self._sums]
            self._sums = [s[0] + b * b, s[1] + b * t, s[2] + t * t, s[3] + b * seconds, s[4] + t * seconds]
            if chars > 0 and tokens > 0:  # an empty pair has special tokens and no characters: no ratio in it
                self._chars = self._chars * DECAY + chars
                self._tokens = self._tokens * DECAY + tokens
            per_batch = t / b
            if len(self._shapes) < 2 and all(max(per_batch, s) > DISTINCT * max(min(per_batch, s), 1.0)
                                             for s in self._shapes):
                self._shapes.append(per_batch)
            self.observed += 1

    def coefficients(self) -> Fit | None:
        """(seconds per batch, seconds per token), both >= 0 and finite; None before anything was served and
        with no prior."""
        with self._lock:
            bb, bt, tt, by, ty = self._sums
            shapes = len(self._shapes)
        if bb <= 0:
            return self.prior
        if shapes < 2:  # one shape cannot tell the two costs apart: the prior's split, at the level measured
            fit = _scaled(self.prior, bb, bt, tt, by, ty) if self.prior else (
                (0.0, ty / tt) if tt > 0 else (by / bb, 0.0))
            return fit if _usable(fit) else self.prior or self._last_good
        fit = _least_squares(bb, bt, tt, by, ty)
        if _usable(fit):
            with self._lock:
                self._last_good = fit
            return fit
        return self._last_good or self.prior

    def seconds(self, work: Work) -> float | None:
        """The estimate, or None where there is none; never raises (an estimate must not fail a request)."""
        try:
            fit = self.coefficients()
            if fit is None:
                return None
            value = fit[0] * work.batches + fit[1] * work.tokens
            return value if math.isfinite(value) else None
        except (ArithmeticError, ValueError):
            return None


def _scaled(prior: Fit, bb: float, bt: float, tt: float, by: float, ty: float) -> Fit | None:
    """The prior times the one factor that best explains what was served (a busier host than at start, or a
    slower one, scales both costs alike): least squares for s in seconds = s x prior's prediction."""
    p0, p1 = prior
    denominator = p0 * p0 * bb + 2 * p0 * p1 * bt + p1 * p1 * tt
    if denominator <= 0:
        return None
    scale = (p0 * by + p1 * ty) / denominator
    return (p0 * scale, p1 * scale)


def _least_squares(bb: float, bt: float, tt: float, by: float, ty: float) -> Fit | None:
    det = bb * tt - bt * bt
    if det > 1e-9 * bb * tt:
        per_batch, per_token = (by * tt - ty * bt) / det, (ty * bb - by * bt) / det
        if per_batch >= 0 and per_token >= 0:
            return per_batch, per_token
    # collinear so far, or a negative part: the better of the one-term fits
    only_batch, only_token = max(0.0, by / bb), max(0.0, ty / tt) if tt > 0 else 0.0
    return (only_batch, 0.0) if only_token == 0.0 or by * only_batch >= ty * only_token else (0.0, only_token)


def fit_two(a: tuple[Work, float], b: tuple[Work, float]) -> Fit | None:
    """The costs that explain two measured shapes exactly (the server's own prior, measured at start)."""
    (wa, sa), (wb, sb) = a, b
    det = wa.batches * wb.tokens - wb.batches * wa.tokens
    if det == 0:
        return None
    per_batch = (sa * wb.tokens - sb * wa.tokens) / det
    per_token = (wa.batches * sb - wb.batches * sa) / det
    if per_batch < 0:  # timing noise on a cheap batch: all of it per token, from the larger shape
        per_batch, per_token = 0.0, max(sa, sb) / max(wa.tokens, wb.tokens, 1)
    fit = (per_batch, max(0.0, per_token))
    return fit if _usable(fit) else None
