"""The reranking engine: tokenize, optionally length-sort, batch, pad per batch, run, calibrate.

The tuner, the server and the benchmarks all score through `RerankEngine.score`, so what is
measured is what is served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from autotune.errors import ModelError, OptionsError
from autotune.runtime.model import PRECISIONS, ModelBundle

if TYPE_CHECKING:
    from autotune.runtime.backends import Backend
    from autotune.runtime.quantize import Int8Variant
    from autotune.runtime.tokenize import PairTokenizer

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
HINDSIGHT_DEFAULT_BATCH = 32
GRAPHS = ("plain", "fused")  # the model as given, or with attention fused into onnxruntime's contrib op


MAX_BATCH_SIZE = 4096  # pairs per session.run: past this, a batch only holds more activations at once
MAX_THREADS = 1024  # intra-op threads or workers: more than any host's cores


@dataclass(frozen=True)
class EngineConfig:
    """One point of the search space. `intra_op_threads=0` is onnxruntime's default."""

    batch_size: int
    intra_op_threads: int
    length_sort: bool
    precision: str
    mem_arena: bool = True  # onnxruntime's CPU arena: faster reuse, but it never gives memory back
    graph: str = "plain"
    spinning: bool = True  # idle intra-op threads busy-wait (fast hand-off) or sleep (kind to a shared host)
    workers: int = 1  # requests served at once, each by its own session (the `tei` sidecar's AUTOTUNE_WORKERS)

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_THREADS:
            raise OptionsError(f"workers must be between 1 and {MAX_THREADS}, got {self.workers}")
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise OptionsError(f"batch size must be between 1 and {MAX_BATCH_SIZE}, got {self.batch_size}")
        if not 0 <= self.intra_op_threads <= MAX_THREADS:
            raise OptionsError(f"intra-op threads must be 0 (default) to {MAX_THREADS}, got {self.intra_op_threads}")
        if self.precision not in PRECISIONS:
            raise OptionsError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.graph not in GRAPHS:
            raise OptionsError(f"graph must be one of {', '.join(GRAPHS)}, got {self.graph!r}")

    def label(self) -> str:
        threads = "default" if self.intra_op_threads == 0 else str(self.intra_op_threads)
        extras = "".join((" arena=off" if not self.mem_arena else "",
                          " fused" if self.graph == "fused" else "",
                          " spin=off" if not self.spinning else "",
                          f" workers={self.workers}" if self.workers > 1 else ""))
        return (f"bs={self.batch_size} threads={threads} sort={'on' if self.length_sort else 'off'} "
                f"{self.precision}{extras}")

    def to_dict(self) -> dict[str, object]:
        return {"batch_size": self.batch_size, "intra_op_threads": self.intra_op_threads,
                "length_sort": self.length_sort, "precision": self.precision, "mem_arena": self.mem_arena,
                "graph": self.graph, "spinning": self.spinning, "workers": self.workers}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> EngineConfig:
        """The inverse of `to_dict`; knobs a profile predates take onnxruntime's defaults."""
        return cls(batch_size=_whole(data["batch_size"], "batch_size"),
                   intra_op_threads=_whole(data["intra_op_threads"], "intra_op_threads"),
                   length_sort=_flag(data["length_sort"], "length_sort"), precision=str(data["precision"]),
                   mem_arena=_flag(data.get("mem_arena", True), "mem_arena"), graph=str(data.get("graph", "plain")),
                   spinning=_flag(data.get("spinning", True), "spinning"),
                   workers=_whole(data.get("workers", 1), "workers"))


def _whole(value: object, name: str) -> int:
    """A count from a profile: an integer (YAML's 1e9 is a float, and `int()` would take 2.5 as 2)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def _flag(value: object, name: str) -> bool:
    """A switch from a profile: a YAML boolean (`bool("false")` is True)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


SORT_KEYS = ("tokens", "chars_desc", "chars_asc")


@dataclass(frozen=True)
class EngineTraits:
    """What a target fixes about scoring, whatever knobs the search turns.

    `sort_key` is what `length_sort` sorts by: token count ascending (autotune's engine), or
    `len(query) + len(doc)` in characters, longest first (Hindsight's onnx provider) or shortest
    first (Hindsight's local bucket batching). `spinning`, when set, is fixed by the target
    whatever the configuration says (Hindsight's onnx provider always turns it off).
    `zero_threads` is what `intra_op_threads=0` becomes (0 keeps onnxruntime's own default).
    `max_tokens` truncates pairs (None: the model's limit). `shared_session`: a configuration's
    workers all run on one session (Hindsight's onnx provider: a pool of `ONNX_MAX_CONCURRENT` threads
    over one `InferenceSession`), rather than each on its own (the sidecar's).
    """

    sort_key: str = "tokens"
    spinning: bool | None = None
    zero_threads: int = 0
    max_tokens: int | None = None
    max_batch_tokens: int | None = None  # TEI's budget: rows x longest per batch (None: count alone)
    shared_session: bool = False

    def __post_init__(self) -> None:
        if self.sort_key not in SORT_KEYS:
            raise OptionsError(f"sort key must be one of {', '.join(SORT_KEYS)}, got {self.sort_key!r}")
        if self.max_batch_tokens is not None and self.max_batch_tokens < 1:
            raise OptionsError(f"the batch token budget must be at least 1, got {self.max_batch_tokens}")

    def threads(self, config: EngineConfig) -> int:
        return config.intra_op_threads or self.zero_threads

    def spins(self, config: EngineConfig) -> bool:
        return config.spinning if self.spinning is None else self.spinning


BASELINE = EngineConfig(batch_size=HINDSIGHT_DEFAULT_BATCH, intra_op_threads=0, length_sort=False, precision="fp32")
REFERENCE = EngineConfig(batch_size=1, intra_op_threads=0, length_sort=False, precision="fp32")


class Cancelled(Exception):
    """The caller gave up (its client disconnected): scoring stopped between batches."""

    def __init__(self, inference_s: float) -> None:
        super().__init__("cancelled")
        self.inference_s = inference_s  # spent before the stop, for nobody


@dataclass
class ScoreResult:
    scores: np.ndarray  # calibrated, in the caller's document order
    raw: np.ndarray  # logit (or logit difference for 2-logit heads); sigmoid(raw) == scores
    total_s: float
    tokenize_s: float
    inference_s: float
    real_tokens: int
    padded_tokens: int
    lengths: list[int]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def logit(p: np.ndarray) -> np.ndarray:
    """The inverse of `sigmoid`, clipped so that 0 and 1 stay finite."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


def calibrate(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sigmoid applied exactly once: 1 logit -> sigmoid, 2 logits -> softmax[:, 1]."""
    if logits.ndim != 2 or logits.shape[1] not in (1, 2):
        raise ModelError(f"model output has shape {list(logits.shape)}; expected [batch, 1] or [batch, 2]")
    raw = logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0]
    raw = raw.astype(np.float64)
    return sigmoid(raw), raw


def plan_batches(order: list[int], lengths: list[int], batch_size: int,
                 max_batch_tokens: int | None = None) -> list[list[int]]:
    """Cut pairs, in `order`, into batches. A batch closes when it holds `batch_size` pairs, or when the
    next pair would take its padded size (rows x longest) past `max_batch_tokens`; a pair longer
    than the budget runs alone. Padded size is what a batch's activations (and attention, squared)
    grow with, so the budget bounds each batch's memory whatever the batch size."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        grown = max(longest, lengths[i])
        full = len(current) >= batch_size
        over = max_batch_tokens is not None and current and (len(current) + 1) * grown > max_batch_tokens
        if current and (full or over):
            batches.append(current)
            current, grown = [], lengths[i]
        current.append(i)
        longest = grown
    if current:
        batches.append(current)
    return batches


class RerankEngine:
    def __init__(self, backend: Backend, tokenizer: PairTokenizer, *, batch_size: int, length_sort: bool,
                 sort_key: str = "tokens", max_batch_tokens: int | None = None) -> None:
        self.backend = backend
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.length_sort = length_sort
        self.sort_key = sort_key
        self.max_batch_tokens = max_batch_tokens
        if backend.vocab_rows is not None and tokenizer.vocab_size > backend.vocab_rows:
            raise ModelError(
                f"tokenizer has {tokenizer.vocab_size} tokens but the model's embedding has "
                f"{backend.vocab_rows} rows: tokenizer.json does not match model.onnx"
            )

    def score(self, query: str, documents: list[str], *, tokenizer: PairTokenizer | None = None,
              should_stop: Callable[[], bool] | None = None) -> ScoreResult:
        """Scores in the caller's order. `should_stop` is asked before each batch; when it answers true,
        `Cancelled` is raised, so no more inference is spent on an answer nobody will read."""
        start = time.perf_counter()
        tok = tokenizer or self.tokenizer
        encodings = tok.encode(query, documents)
        tokenized = time.perf_counter()
        lengths = [len(e.ids) for e in encodings]
        order = self._order(query, documents, lengths)
        raw = np.empty(len(encodings), dtype=np.float64)
        scores = np.empty(len(encodings), dtype=np.float64)
        inference = 0.0
        real = padded = 0
        for idx in plan_batches(order, lengths, self.batch_size, self.max_batch_tokens):
            if should_stop is not None and should_stop():
                raise Cancelled(inference)
            batch = tok.pad([encodings[i] for i in idx], self.backend.input_names)
            rows = self.backend.vocab_rows
            if rows is not None and int(batch.feeds["input_ids"].max()) >= rows:
                raise ModelError(f"token id out of range for the model's {rows}-row embedding")
            t0 = time.perf_counter()
            logits = self.backend.run(batch.feeds)
            inference += time.perf_counter() - t0
            batch_scores, batch_raw = calibrate(logits)
            scores[idx] = batch_scores
            raw[idx] = batch_raw
            real += batch.real_tokens
            padded += batch.padded_tokens
        end = time.perf_counter()
        if not np.all(np.isfinite(raw)):
            raise ModelError("the model produced non-finite scores (NaN or inf): it is broken, or its inputs "
                             "do not match it")
        return ScoreResult(scores, raw, end - start, tokenized - start, inference, real, padded, lengths)

    def _order(self, query: str, documents: list[str], lengths: list[int]) -> list[int]:
        """The order pairs are batched in; Python's sort is stable, as Hindsight's is, so ties keep theirs."""
        indices = list(range(len(documents)))
        if not self.length_sort:
            return indices
        if self.sort_key == "tokens":
            return sorted(indices, key=lengths.__getitem__)
        chars = [len(query) + len(d) for d in documents]
        return sorted(indices, key=chars.__getitem__, reverse=self.sort_key == "chars_desc")


class Scoring(Protocol):
    """Anything the tuner can time and compare: the ONNX engine, or a PyTorch target's scorer."""

    def score(self, query: str, documents: list[str]) -> ScoreResult: ...


class Pairs(Protocol):
    """One query and its documents (a workload's `Query`, which lives a layer above), read only."""

    @property
    def query(self) -> str: ...

    @property
    def documents(self) -> list[str]: ...


class ScoringPool(Protocol):
    """Makes a scorer for each configuration; implementations reuse sessions where they can.

    Everything a caller needs to know of a pool is here, so no caller asks which kind it has."""

    bundle: ModelBundle  # the model it scores (and the parity reference's)
    traits: EngineTraits
    checkpoint: Path | None  # the PyTorch weights it runs, where it runs PyTorch
    int8_variant: Int8Variant  # which int8 graph `precision="int8"` runs, where it runs one
    max_sessions: int  # sessions (each a copy of the weights) it keeps alive at once

    def engine(self, config: EngineConfig) -> Scoring: ...

    def keep_sessions(self, n: int) -> None:
        """Keep at most `n` sessions alive from now on."""
        ...

    def serving(self, config: EngineConfig) -> Sequence[Scoring]:
        """One scorer per worker of `config` (refused where the pool cannot serve that many)."""
        ...

    def model_path(self, config: EngineConfig) -> Path | None:
        """The ONNX graph a configuration runs (made if need be), or None where the pool runs none."""
        ...

    def pair_lengths(self, queries: Sequence[Pairs]) -> list[list[int]] | None:
        """Each pair's tokens after truncation, for the memory estimate; None where there is none."""
        ...

    def effective(self, config: EngineConfig) -> EngineConfig:
        """The configuration as it runs; equal effective forms are one measurement."""
        ...

    def release(self) -> None:
        """Free what the pool holds between measurements (sessions, arenas)."""
        ...


@runtime_checkable
class OnnxPool(ScoringPool, Protocol):
    """A pool that runs ONNX graphs (the `onnx` and `tei` targets; not PyTorch's): besides scoring, the int8
    judge chooses which int8 graph it runs, and times a graph of its own outside the pooled sessions."""

    def model_path(self, config: EngineConfig) -> Path:
        """The ONNX graph a configuration runs, made if need be."""
        ...

    def use_int8(self, variant: Int8Variant) -> None:
        """Run `variant` for every int8 configuration from now on."""
        ...

    def engine_on(self, path: Path, config: EngineConfig) -> Scoring:
        """A scorer on a graph file of the caller's, outside the pooled sessions."""
        ...


def onnx_pool(pool: ScoringPool) -> OnnxPool | None:
    """The pool as one that runs ONNX graphs, or None where it runs none: asked of the type, not guessed from
    what `model_path` returns."""
    return pool if isinstance(pool, OnnxPool) else None  # seam-ok: the declared interface, asked here alone


def engines_for(pool: ScoringPool, config: EngineConfig) -> list[Scoring]:
    """One scorer per worker, each on its own session (pools without workers serve one)."""
    if config.workers == 1:
        return [pool.engine(config)]
    return list(pool.serving(config))
