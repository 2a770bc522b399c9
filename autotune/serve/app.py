"""`autotune serve`: a text-embeddings-inference-compatible /rerank server.

Hindsight's `tei` reranker provider is how a tuned ONNX configuration reaches an unmodified
Hindsight. The thread count was tuned for one inference at a time, so inference runs on one
worker thread behind a bounded queue; past the queue the answer is 429 Overloaded, which
Hindsight's client retries.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autotune import __version__
from autotune.errors import OptionsError
from autotune.outputs.profile import load_profile, profile_config
from autotune.runtime.engine import Cancelled, EngineConfig, EngineTraits, RerankEngine
from autotune.runtime.model import ModelBundle, resolve_model
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets.sidecar_keys import TEI_MAX_BATCH_TOKENS, SidecarKeys
from autotune.runtime.tokenize import PairTokenizer

STATUS = {"Empty": 400, "Validation": 422, "Tokenizer": 422, "Backend": 424, "Overloaded": 429, "Unhealthy": 503,
          "Disconnected": 499}  # 499: nginx's "client closed request"; nobody is left to read it
CLIENT_TIMEOUT_KEYS = ("AUTOTUNE_CLIENT_TIMEOUT", "HINDSIGHT_API_RERANKER_TEI_HTTP_TIMEOUT")
DEFAULT_CLIENT_TIMEOUT_S = 30.0  # Hindsight's TEI_HTTP_TIMEOUT


@dataclass(frozen=True)
class ServeSettings:
    config: EngineConfig
    model: str = "default"
    max_client_batch_size: int = 1024
    max_queue: int = 16
    max_body_bytes: int = 8 * 1024 * 1024  # TEI's --payload-limit
    max_batch_tokens: int = TEI_MAX_BATCH_TOKENS  # rows x longest per batch: bounds each batch's memory
    auto_truncate: bool = True
    raw_scores_default: bool = False  # true for Hindsight <= 0.6.2, which applies sigmoid itself
    client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S  # past this wait a request is refused, not queued

    def __post_init__(self) -> None:
        if not (math.isfinite(self.client_timeout_s) and self.client_timeout_s > 0):
            raise OptionsError(f"the client time-out must be a positive number of seconds, got {self.client_timeout_s}")
        for name in ("max_client_batch_size", "max_queue", "max_body_bytes", "max_batch_tokens"):
            if getattr(self, name) < 1:
                key = {"max_client_batch_size": "AUTOTUNE_MAX_CLIENT_BATCH_SIZE", "max_queue": "AUTOTUNE_MAX_QUEUE",
                       "max_body_bytes": "the body limit", "max_batch_tokens": "AUTOTUNE_MAX_BATCH_TOKENS"}[name]
                raise OptionsError(f"{key} must be at least 1, got {getattr(self, name)}")


def settings_from_profile(path: Path) -> ServeSettings:
    data = load_profile(path)
    env = data.get("env") if isinstance(data.get("env"), dict) else {}
    return ServeSettings(config=profile_config(data), model=str(data.get("model", {}).get("ref", "default")),
                         client_timeout_s=client_timeout(env))


def client_timeout(env: Mapping[str, str]) -> float:
    """AUTOTUNE_CLIENT_TIMEOUT, else the time-out Hindsight's TEI client was given, else its default."""
    for key in CLIENT_TIMEOUT_KEYS:
        value = env.get(key)
        if value not in (None, ""):
            try:
                return float(value)  # type: ignore[arg-type]
            except ValueError:
                raise OptionsError(f"{key} must be a number of seconds, got {value!r}") from None
    return DEFAULT_CLIENT_TIMEOUT_S


def settings_from_env(env: Mapping[str, str]) -> ServeSettings:
    """The AUTOTUNE_* keys of a `.env` (or the container environment it was loaded into)."""
    keys = SidecarKeys.from_env(env)
    return ServeSettings(config=keys.config, model=keys.model, max_client_batch_size=keys.max_client_batch_size,
                         max_queue=keys.max_queue, max_batch_tokens=keys.max_batch_tokens,
                         raw_scores_default=keys.raw_scores, client_timeout_s=client_timeout(env))


class ApiError(Exception):
    def __init__(self, error_type: str, message: str, status: int | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.error_type, self.message = error_type, message
        self.status = status or STATUS[error_type]
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        headers = {"retry-after": str(self.retry_after)} if self.retry_after is not None else None
        return JSONResponse({"error": self.message, "error_type": self.error_type}, status_code=self.status,
                            headers=headers)


class Metrics:
    """TEI's metric names, in a registry of the app's own (several apps can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.duration = Histogram("te_request_duration", "Request duration (s)", registry=r)
        self.tokenization = Histogram("te_request_tokenization_duration", "Tokenization (s)", registry=r)
        self.queue = Histogram("te_request_queue_duration", "Time queued (s)", registry=r)
        self.inference = Histogram("te_request_inference_duration", "Inference (s)", registry=r)
        self.queue_size = Gauge("te_queue_size", "Requests waiting or running", registry=r)
        self.count = Counter("te_request_count", "Requests", ["method"], registry=r)
        self.success = Counter("te_request_success", "Successful requests", ["method"], registry=r)
        self.failure = Counter("te_request_failure", "Failed requests", ["err"], registry=r)
        self.dropped = Counter("autotune_dropped_requests", "Requests dropped because their client had gone",
                               registry=r)
        self.abandoned_inference = Counter("autotune_abandoned_inference_seconds",
                                           "Inference seconds spent on requests whose client had gone", registry=r)


@dataclass
class Job:
    """One /rerank request, from the queue to a worker; `abandoned` is set when its client has gone."""

    query: str
    texts: list[str]
    truncate: bool
    direction: str
    raw: bool
    chars: int
    enqueued: float
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[tuple[np.ndarray, dict[str, float]]]
    abandoned: threading.Event = field(default_factory=threading.Event)

    def resolve(self, value: tuple[np.ndarray, dict[str, float]] | None = None,
                error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)  # type: ignore[arg-type]
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
        self._in_system: dict[int, int] = {}  # id(job) -> characters, queued or running
        self._seconds_per_char: float | None = None  # measured service time, for the wait estimate
        self._tokenizers: dict[tuple[str, bool], PairTokenizer] = {}
        self.metrics = Metrics()
        self.stopping = False  # set on shutdown: requests not yet started answer 503 instead of running

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
                                   traits=EngineTraits(max_batch_tokens=self.settings.max_batch_tokens),
                                   max_sessions=1)
            self.engines = self.pool.serving(self.settings.config)
            for engine in self.engines:
                for _ in range(2):  # warm up: arenas, thread pool
                    engine.score("warm up", ["autotune warm-up document"] * self.settings.config.batch_size)
            for i, engine in enumerate(self.engines):
                threading.Thread(target=self._work, args=(engine,), name=f"autotune-infer-{i}", daemon=True).start()
            self.ready.set()
        except Exception as exc:  # reported by /health and /info, and logged, never a crash
            self.load_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            import sys

            print(f"autotune serve: error: the model did not load: {self.load_error}", file=sys.stderr, flush=True)

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
                b = self.pool.bundle
                self._tokenizers[key] = PairTokenizer(b.tokenizer_path, b.max_length, direction=direction,
                                                      truncate=truncate)
            return self._tokenizers[key]

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
            "max_input_length": bundle.max_length if bundle else None,
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

    def estimated_wait_s(self, chars: int) -> float | None:
        """Until this request would be answered: the work ahead shared by the workers, then its own.

        None before anything was measured, and when a worker is free: a request that would start at
        once is never refused on an estimate (its client's time-out and the disconnect check bound it).
        """
        rate = self._seconds_per_char
        with self._lock:
            ahead = sum(self._in_system.values())
            busy = len(self._in_system)
        if rate is None or busy < self.settings.config.workers:
            return None
        return rate * (ahead / self.settings.config.workers + chars)

    async def rerank(self, query: str, texts: list[str], *, truncate: bool, direction: str, raw: bool,
                     disconnected: Callable[[], Awaitable[None]] | None = None
                     ) -> tuple[np.ndarray, dict[str, float]]:
        chars = len(query) * len(texts) + sum(len(t) for t in texts)
        if len(self._in_system) >= self.settings.max_queue:
            raise ApiError("Overloaded", "Model is overloaded", retry_after=1)
        wait = self.estimated_wait_s(chars)
        if wait is not None and wait > self.settings.client_timeout_s:
            raise ApiError("Overloaded", f"Model is overloaded: about {wait:.0f} s of work is queued, more than the "
                                         f"client's {self.settings.client_timeout_s:.0f} s time-out",
                           retry_after=max(1, math.ceil(wait - self.settings.client_timeout_s)))
        loop = asyncio.get_running_loop()
        job = Job(query, texts, truncate, direction, raw, chars, time.perf_counter(), loop, loop.create_future())
        with self._lock:
            self._in_system[id(job)] = chars
            self.metrics.queue_size.set(len(self._in_system))
        self._jobs.put(job)
        if disconnected is None:
            return await job.future
        watch = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({job.future, watch}, return_when=asyncio.FIRST_COMPLETED)
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
                    self._measured(time.perf_counter() - started, job.chars)
                    job.resolve(answer)
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

    def _measured(self, seconds: float, chars: int) -> None:
        """Service seconds per character, smoothed: what the wait estimate multiplies the queue by."""
        rate = seconds / max(chars, 1)
        with self._lock:
            old = self._seconds_per_char
            self._seconds_per_char = rate if old is None else 0.7 * old + 0.3 * rate

    def _score(self, engine: RerankEngine, job: Job) -> tuple[np.ndarray, dict[str, float]]:
        started = time.perf_counter()
        tok = self.tokenizer(job.direction, job.truncate)
        if not job.truncate:
            too_long = max(len(e.ids) for e in tok.encode(job.query, job.texts))
            if too_long > tok.max_length:
                raise ApiError("Validation", f"`inputs` must have less than {tok.max_length} tokens. "
                                             f"Given: {too_long}")
        result = engine.score(job.query, job.texts, tokenizer=tok, should_stop=job.abandoned.is_set)
        if job.abandoned.is_set():  # finished as its client left: the seconds were spent for nobody
            self.metrics.abandoned_inference.inc(result.inference_s)
        timing = {"queue": started - job.enqueued, "tokenization": result.tokenize_s, "inference": result.inference_s}
        return (result.raw if job.raw else result.scores), timing


async def _disconnect(request: Request) -> None:
    """Returns when the client goes away (the body has been read: what is left to receive is that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _parse_rerank(body: bytes) -> dict[str, Any]:
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("Validation", f"Failed to parse the request body as JSON: {exc}", 400) from exc
    except RecursionError as exc:
        raise ApiError("Validation", "the request body is nested too deeply", 422) from exc
    if not isinstance(req, dict):
        raise ApiError("Validation", "expected a JSON object", 422)
    query, texts = req.get("query"), req.get("texts")
    if not isinstance(query, str):
        raise ApiError("Validation", "missing field `query` (a string)", 422)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError("Validation", "missing field `texts` (a list of strings)", 422)
    for name in ("truncate", "raw_scores", "return_text"):
        if req.get(name) is not None and not isinstance(req[name], bool):
            raise ApiError("Validation", f"`{name}` must be a boolean", 422)
    for text in (query, *texts):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ApiError("Validation", "`query` and `texts` must be valid Unicode (found a lone surrogate)",
                           422) from exc
    direction = req.get("truncation_direction") or "Right"
    if direction not in ("Right", "Left"):
        raise ApiError("Validation", "`truncation_direction` must be Right or Left", 422)
    return {**req, "truncation_direction": direction.lower()}


async def _read_body(request: Request, limit: int) -> bytes:
    """Count bytes while they stream in and stop at the limit: a chunked body is never buffered whole."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError("Validation", "request body is too large", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError("Validation", "request body is too large", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(service: RerankService, *, load_in_background: bool = True) -> Starlette:
    m = service.metrics

    async def rerank(request: Request) -> Response:
        started = time.perf_counter()
        m.count.labels(method="batch").inc()
        try:
            if service.stopping:
                raise ApiError("Unhealthy", "the server is shutting down")
            if not service.ready.is_set():
                raise ApiError("Unhealthy", service.load_error or "model is loading")
            body = await _read_body(request, service.settings.max_body_bytes)
            req = _parse_rerank(body)
            texts: list[str] = req["texts"]
            if not texts:
                raise ApiError("Empty", "`texts` cannot be empty")
            if len(texts) > service.settings.max_client_batch_size:
                raise ApiError("Validation", f"batch size {len(texts)} > maximum allowed batch size "
                                             f"{service.settings.max_client_batch_size}", 422)
            truncate = service.settings.auto_truncate if req.get("truncate") is None else req["truncate"]
            scores, timing = await service.rerank(req["query"], texts, truncate=truncate,
                                                  direction=req["truncation_direction"],
                                                  raw=service.settings.raw_scores_default
                                                  if req.get("raw_scores") is None else req["raw_scores"],
                                                  disconnected=lambda: _disconnect(request))
            if not np.isfinite(scores).all():
                raise ApiError("Backend", "the model produced a non-finite score for this input")
        except ApiError as err:
            m.failure.labels(err=err.error_type.lower()).inc()
            return err.response()
        except Exception as exc:  # the engine failed on this input: report, stay healthy
            m.failure.labels(err="backend").inc()
            return ApiError("Backend", str(exc).splitlines()[0] if str(exc) else type(exc).__name__).response()
        order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
        with_text = bool(req.get("return_text", False))
        ranks = [{"index": i, "score": float(scores[i]), **({"text": texts[i]} if with_text else {})} for i in order]
        m.queue.observe(timing["queue"])
        m.tokenization.observe(timing["tokenization"])
        m.inference.observe(timing["inference"])
        m.duration.observe(time.perf_counter() - started)
        m.success.labels(method="batch").inc()
        return JSONResponse(ranks, headers={"x-inference-time": str(int(timing["inference"] * 1000)),
                                            "x-queue-time": str(int(timing["queue"] * 1000))})

    async def info(request: Request) -> Response:
        return JSONResponse(service.info())

    async def health(request: Request) -> Response:
        if service.ready.is_set():
            return Response(status_code=200)
        return ApiError("Unhealthy", service.load_error or "model is loading").response()

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if load_in_background:
            threading.Thread(target=service.load, name="autotune-load", daemon=True).start()
        yield
        service.stopping = True
        service.close()

    return Starlette(routes=[Route("/rerank", rerank, methods=["POST"]), Route("/info", info),
                             Route("/health", health), Route("/metrics", metrics)], lifespan=lifespan)


def resolve_settings(profile: Path | None, env_file: Path | None,
                     environ: Mapping[str, str] | None = None) -> ServeSettings:
    """--profile wins; else the AUTOTUNE_* keys of --env-file, overridden by the environment."""
    if profile is not None:
        return settings_from_profile(profile)
    merged: dict[str, str] = {}
    if env_file is not None:
        from autotune.outputs.envfile import parse_env, read_text_exact

        if not env_file.exists():
            raise OptionsError(f"env file {env_file} does not exist")
        merged.update(parse_env(read_text_exact(env_file)))
    merged.update({k: v for k, v in (os.environ if environ is None else environ).items()
                   if k.startswith("AUTOTUNE_") or k in CLIENT_TIMEOUT_KEYS})
    return settings_from_env(merged)


def check_bindable(host: str, port: int) -> None:
    """A taken or impossible address is one line with exit 4, before uvicorn logs a traceback."""
    import socket

    if not 1 <= port <= 65535:
        raise OptionsError(f"--port must be between 1 and 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise OptionsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc


def serve(settings: ServeSettings, host: str, port: int, *, graceful_timeout_s: float = 10.0,
          announce: Callable[[str], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT; then finish what is running, within `graceful_timeout_s`, and exit.

    No connection limit of uvicorn's: past it every route answers 503, so stalled clients could
    turn /health unhealthy. Overload is the bounded queue's job (429); idle connections time out.
    """
    import uvicorn

    check_bindable(host, port)
    resolve_model(None if settings.model == "default" else Path(settings.model))  # a missing model: exit 3 now
    if announce is not None:
        announce(f"{settings.config.label()} on http://{host}:{port}")
    service = RerankService(settings)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            service.stopping = True  # from the signal on, queued requests answer 503 instead of waiting
            super().handle_exit(sig, frame)

    config = uvicorn.Config(create_app(service), host=host, port=port, log_level="warning", timeout_keep_alive=5,
                            timeout_graceful_shutdown=graceful_timeout_s)
    _Server(config).run()
