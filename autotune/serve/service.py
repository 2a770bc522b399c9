"""The queue between HTTP and the model: a bounded queue in front of one worker thread per tuned worker, each
on its own session with the thread count it was tuned for, first come first served."""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune import __version__
from autotune.runtime.engine import Cancelled, EngineTraits, RerankEngine
from autotune.runtime.model import ModelBundle, resolve_model
from autotune.runtime.sessions import EnginePool, warm_up
from autotune.runtime.tokenize import CLIP_CHARS_PER_TOKEN, PairTokenizer
from autotune.serve.cost import CostModel, Work, fit_two
from autotune.serve.errors import ApiError
from autotune.serve.metrics import Metrics
from autotune.serve.settings import ServeSettings

MAX_RETRY_AFTER_S = 60  # Retry-After: an estimate of minutes ahead is no estimate; the client asks again
UNHEALTHY_AFTER = 3  # scoring failures in a row, on requests that passed validation, that turn /health 503
CALIBRATION_ROUNDS = 2  # each start-up shape is timed this often, the fastest kept


@dataclass
class Job:
    """One /rerank request, from the queue to a worker; `abandoned` is set when its client has gone."""

    query: str
    texts: list[str]
    truncate: bool
    direction: str
    raw: bool
    chars: int
    work: Work
    enqueued: float
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[tuple[np.ndarray, dict[str, float]]]
    abandoned: threading.Event = field(default_factory=threading.Event)
    real_tokens: int = 0  # set once scored: what the cost model learns from
    sample: tuple[int, int] = (0, 0)  # characters and tokens of the pairs truncation left whole

    def resolve(self, value: tuple[np.ndarray, dict[str, float]] | None = None,
                error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)  # type: ignore[arg-type]  # set with no error: a value
        self.loop.call_soon_threadsafe(settle)


class RerankService:
    """Loads the model off the event loop, then serves one request per worker, each on its own session
    with the thread count it was tuned for, first come first served.

    Work nobody will read is never done: a request whose client disconnected is dropped before
    inference (or between batches), and a request that would wait past the client's time-out is
    answered 429 with `Retry-After` at once rather than queued.
    """

    def __init__(self, settings: ServeSettings, *, bundle: ModelBundle | None = None, has_vnni: bool | None = None):
        self.settings = settings
        self._bundle = bundle
        self._has_vnni = has_vnni
        self.pool: EnginePool | None = None
        self.engines: list[RerankEngine] = []
        self.ready = threading.Event()
        self.load_error: str | None = None
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_system: dict[int, Work] = {}  # id(job) -> its size, queued or running
        self.cost = CostModel()  # measured service time per batch and per token, for the wait estimate
        self._tokenizers: dict[tuple[str, bool], PairTokenizer] = {}
        self.metrics = Metrics()
        self.stopping = False  # set on shutdown: requests not yet started answer 503 instead of running
        self.failures_in_a_row = 0  # scoring failures since the last success: /health tells the truth
        self.last_failure: str | None = None

    @property
    def engine(self) -> RerankEngine | None:
        return self.engines[0] if self.engines else None

    def load(self) -> None:
        try:
            if self._has_vnni is None:
                from autotune.host import default_probe

                self._has_vnni = default_probe().probe().has_vnni
            bundle = self._bundle or resolve_model(None if self.settings.model == "default"
                                                   else Path(self.settings.model))
            self.pool = EnginePool(bundle, has_vnni=self._has_vnni,
                                   traits=EngineTraits(max_batch_tokens=self.settings.max_batch_tokens,
                                                       max_tokens=self.settings.max_input_length),
                                   max_sessions=1)
            self.engines = self.pool.serving(self.settings.config)
            warm_up(self.engines, min(self.settings.config.batch_size, self.settings.max_client_batch_size))
            self.calibrate(self.engines[0])
            for i, engine in enumerate(self.engines):
                threading.Thread(target=self._work, args=(engine,), name=f"autotune-infer-{i}", daemon=True).start()
            self.ready.set()
        except Exception as exc:  # reported by /health and /info, and logged, never a crash
            self.load_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            import sys

            print(f"autotune serve: error: the model did not load: {self.load_error}", file=sys.stderr, flush=True)

    def calibrate(self, engine: RerankEngine) -> None:
        """The cost model's prior, measured on this host and configuration before the first request: a batch of
        one-word texts and one text at the model's length, each one batch. With one request shape served the fit
        cannot tell a batch's cost from a token's (a cold server once refused three small requests after one large
        one). One long text, not a batch of them: at 8,192 positions a batch of four held a ModernBERT's start-up
        for 30 s on 2 cores, and one such text already gives the token's cost at that length."""
        rows = max(1, min(self.settings.config.batch_size, self.settings.max_client_batch_size))
        length = self.pool.max_length if self.pool else 512
        shapes = []
        for texts in (["memory"] * rows, [" ".join(["memory"] * length)]):
            best: tuple[Work, float] | None = None
            for _ in range(CALIBRATION_ROUNDS):
                started = time.perf_counter()
                result = engine.score("what do I remember", texts)
                took = time.perf_counter() - started
                if best is None or took < best[1]:
                    best = (Work(math.ceil(len(texts) / max(1, self.settings.config.batch_size)),
                                 result.real_tokens), took)
            assert best is not None
            shapes.append(best)
        self.cost.set_prior(fit_two(shapes[0], shapes[1]))

    def healthy(self) -> str | None:
        """None when the server can answer; else why not, in a few words."""
        if not self.ready.is_set():
            return self.load_error or "model is loading"
        if self.failures_in_a_row >= UNHEALTHY_AFTER:
            return f"scoring failed {self.failures_in_a_row} times in a row: {self.last_failure}"
        return None

    def scored(self, error: str | None = None) -> None:
        """A request that passed validation was scored (`error`: or failed to be)."""
        with self._lock:
            if error is None:
                self.failures_in_a_row, self.last_failure = 0, None
            else:
                self.failures_in_a_row += 1
                self.last_failure = error

    def close(self) -> None:
        for _ in self.engines:
            self._jobs.put(None)

    def tokenizer(self, direction: str, truncate: bool) -> PairTokenizer:
        assert self.pool is not None
        key = (direction, truncate)
        if key == ("right", True):
            return self.pool.tokenizer
        with self._lock:
            if key not in self._tokenizers:
                self._tokenizers[key] = PairTokenizer(self.pool.bundle.tokenizer_path, self.pool.max_length,
                                                      direction=direction, truncate=truncate)
            return self._tokenizers[key]

    def length_probe(self) -> PairTokenizer:
        """Pairs cut at one token past the model's length: a pair it leaves longer than the model was too long
        whole, and one it leaves within the length is whole (truncation only cuts what passes it), so
        `truncate: false` is decided exactly on texts first cut to what such a length can hold."""
        assert self.pool is not None
        with self._lock:
            if ("probe", True) not in self._tokenizers:
                self._tokenizers[("probe", True)] = PairTokenizer(self.pool.bundle.tokenizer_path,
                                                                  self.pool.max_length + 1)
            return self._tokenizers[("probe", True)]

    def info(self) -> dict[str, Any]:
        bundle = self.pool.bundle if self.pool else None
        cfg = self.settings.config
        return {
            "model_id": bundle.name if bundle else self.settings.model,
            "model_sha": bundle.sha256 if bundle else None,
            "model_dtype": "float32" if cfg.precision == "fp32" else "int8",
            "served_model_name": bundle.name if bundle else self.settings.model,
            "model_type": {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}},
            "prompts": None, "default_prompt_name": None, "default_prompt": None,
            "max_concurrent_requests": self.settings.max_queue,
            "max_input_length": self.pool.max_length if self.pool else None,
            "max_batch_tokens": self.settings.max_batch_tokens,
            "max_batch_requests": None,
            "max_client_batch_size": self.settings.max_client_batch_size,
            "auto_truncate": self.settings.auto_truncate,
            "tokenization_workers": 1,
            "version": __version__,
            "sha": None, "docker_label": None,
            "autotune": {"config": cfg.to_dict(), "workers": cfg.workers,
                         "client_timeout_s": self.settings.client_timeout_s},
        }

    def work_chars(self, query: str, texts: list[str]) -> int:
        """What a request costs, in characters the model will see: a text past the model's length is cut
        before tokenizing (`PairTokenizer.pairs`), so a 7 MB query costs what its first tokens cost."""
        cap = (self.pool.max_length if self.pool else 512) * CLIP_CHARS_PER_TOKEN
        return min(len(query), cap) * len(texts) + sum(min(len(t), cap) for t in texts)

    def work(self, query: str, texts: list[str]) -> Work:
        cap = (self.pool.max_length if self.pool else 512)
        try:
            return self._work_estimate(query, texts, cap)
        except (ArithmeticError, ValueError):  # an estimate never fails a request: the plain upper bound
            return Work(math.ceil(len(texts) / max(1, self.settings.config.batch_size)), cap * len(texts))

    def _work_estimate(self, query: str, texts: list[str], cap: int) -> Work:
        return self.cost.work(query[:cap * CLIP_CHARS_PER_TOKEN], [t[:cap * CLIP_CHARS_PER_TOKEN] for t in texts],
                              batch_size=self.settings.config.batch_size, max_length=cap)

    def estimated_wait_s(self, work: Work) -> float | None:
        """Until this request would be answered: the work ahead shared by the workers, then its own.

        None before anything was measured, and when a worker is free: a request that would start at
        once is never refused on an estimate (its client's time-out and the disconnect check bound it).
        """
        with self._lock:
            ahead = list(self._in_system.values())
        if len(ahead) < self.settings.config.workers:
            return None
        own = self.cost.seconds(work)
        if own is None:
            return None
        queued = sum(self.cost.seconds(w) or 0.0 for w in ahead)
        return queued / self.settings.config.workers + own

    async def rerank(self, query: str, texts: list[str], *, truncate: bool, direction: str, raw: bool,
                     disconnected: Callable[[], Awaitable[None]] | None = None
                     ) -> tuple[np.ndarray, dict[str, float]]:
        chars = self.work_chars(query, texts)
        work = self.work(query, texts)
        if len(self._in_system) >= self.settings.max_queue:
            raise ApiError("Overloaded", "Model is overloaded", retry_after=1)
        wait = self.estimated_wait_s(work)
        if wait is not None and wait > self.settings.client_timeout_s:
            raise ApiError("Overloaded", f"Model is overloaded: about {wait:.0f} s of work is queued, more than the "
                                         f"client's {self.settings.client_timeout_s:.0f} s time-out",
                           retry_after=min(MAX_RETRY_AFTER_S, max(1, math.ceil(wait - self.settings.client_timeout_s))))
        loop = asyncio.get_running_loop()
        job = Job(query, texts, truncate, direction, raw, chars, work, time.perf_counter(), loop, loop.create_future())
        with self._lock:
            self._in_system[id(job)] = work
            self.metrics.queue_size.set(len(self._in_system))
        self._jobs.put(job)
        if disconnected is None:
            return await job.future
        watch = asyncio.ensure_future(disconnected())
        try:
            waiting: set[asyncio.Future[Any]] = {job.future, watch}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if not job.future.done():  # the client has gone: the worker drops it, or stops between batches
            job.abandoned.set()
            job.future.cancel()  # nobody will read what the worker settles
            raise ApiError("Disconnected", "the client disconnected")
        return job.future.result()

    def _work(self, engine: RerankEngine) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if job.abandoned.is_set():
                    self.metrics.dropped.inc()
                    job.resolve(error=ApiError("Disconnected", "the client disconnected"))
                elif self.stopping:
                    job.resolve(error=ApiError("Unhealthy", "the server is shutting down"))
                else:
                    started = time.perf_counter()
                    answer = self._score(engine, job)
                    job.resolve(answer)
                    self._learn(job, time.perf_counter() - started)
            except Cancelled as stop:
                self.metrics.dropped.inc()
                self.metrics.abandoned_inference.inc(stop.inference_s)
                job.resolve(error=ApiError("Disconnected", "the client disconnected"))
            except BaseException as exc:  # reported to this request only; the worker lives on
                job.resolve(error=exc)
            finally:
                with self._lock:
                    self._in_system.pop(id(job), None)
                    self.metrics.queue_size.set(len(self._in_system))

    def _learn(self, job: Job, seconds: float) -> None:
        """What the cost model learns from a request served; a failure here is logged, never the request's."""
        try:
            self.cost.observe(job.work, seconds, real_tokens=job.real_tokens, sample=job.sample)
        except Exception as exc:  # the answer is already out; the estimate keeps its last fit
            import sys

            print(f"autotune serve: warning: the cost model skipped a request: {exc}", file=sys.stderr, flush=True)

    def _score(self, engine: RerankEngine, job: Job) -> tuple[np.ndarray, dict[str, float]]:
        started = time.perf_counter()
        tok = self.tokenizer(job.direction, job.truncate)
        if not job.truncate:  # decided on a cut one past the length: a 7 MB query is never tokenized whole
            longest = max(len(e.ids) for e in self.length_probe().encode(job.query, job.texts))
            if longest > tok.max_length:
                raise ApiError("Validation", f"`inputs` must have less than {tok.max_length} tokens. "
                                             f"Given: more than {tok.max_length}")
        result = engine.score(job.query, job.texts, tokenizer=tok, should_stop=job.abandoned.is_set)
        job.real_tokens = result.real_tokens
        whole = [(len(job.query) + len(t), n) for t, n in zip(job.texts, result.lengths, strict=True)
                 if n < tok.max_length]
        job.sample = (sum(c for c, _ in whole), sum(n for _, n in whole))
        if job.abandoned.is_set():  # finished as its client left: the seconds were spent for nobody
            self.metrics.abandoned_inference.inc(result.inference_s)
        timing = {"queue": started - job.enqueued, "tokenization": result.tokenize_s, "inference": result.inference_s}
        return (result.raw if job.raw else result.scores), timing
