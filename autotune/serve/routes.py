"""The HTTP side of `serve`: TEI's routes, request parsing and body limits. Nothing here blocks the event
loop: inference waits in `service.RerankService`."""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autotune.serve.errors import ApiError
from autotune.serve.service import RerankService

Handler = Callable[[Request], Awaitable[Response]]


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


def _check_json(request: Request) -> None:
    """TEI (axum's Json) takes only `application/json` bodies: a text/plain or form body is 415, not parsed."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
        raise ApiError("Validation", "Expected request with `Content-Type: application/json`", 415)


def _check_key(request: Request, key: str | None) -> None:
    """`Authorization: Bearer KEY`, compared in constant time, when `--api-key` is set."""
    if key is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise ApiError("Unauthorized", "Unauthorized")


def _keyed(key: str | None) -> Callable[[Handler], Handler]:
    """A route that answers 401 without the API key (`/rerank` checks it inside its own error handling)."""
    def wrap(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                _check_key(request, key)
            except ApiError as err:
                return err.response()
            return await handler(request)
        return guarded
    return wrap


async def _read_body_within(request: Request, limit: int, seconds: float) -> bytes:
    """The body, whole, within `seconds`: a client that drips it holds no connection for long (408)."""
    try:
        return await asyncio.wait_for(_read_body(request, limit), seconds)
    except asyncio.TimeoutError:
        raise ApiError("Validation", f"the request body did not arrive within {seconds:g} s", 408) from None


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
            _check_key(request, service.settings.api_key)
            if service.stopping:
                raise ApiError("Unhealthy", "the server is shutting down")
            if not service.ready.is_set():
                raise ApiError("Unhealthy", service.load_error or "model is loading")
            _check_json(request)
            body = await _read_body_within(request, service.settings.max_body_bytes, service.settings.body_timeout_s)
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
            m.failure.labels(err=err.error_type.lower()).inc()  # this request's own fault: health unchanged
            return err.response()
        except Exception as exc:  # the engine failed on this input: report it, and count it for /health
            m.failure.labels(err="backend").inc()
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            service.scored(message)
            return ApiError("Backend", message).response()
        service.scored()
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

    @_keyed(service.settings.api_key)
    async def info(request: Request) -> Response:
        return JSONResponse(service.info())

    async def health(request: Request) -> Response:
        problem = service.healthy()
        return Response(status_code=200) if problem is None else ApiError("Unhealthy", problem).response()

    @_keyed(service.settings.api_key)
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
