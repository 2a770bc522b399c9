"""Hindsight's HTTP API as `record` and `verify` call it: checked URLs, one bank's recall route, and POSTs
with a whole-exchange deadline and bounded retries."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from autotune.errors import OptionsError, UpstreamError
from autotune.redact import redact

API_KEY_ENV = "HINDSIGHT_API_KEY"
# A traced recall of 300 candidates is a few hundred KB; an answer past this is no recall, and reading it whole
# once took 659 MB (an endless chunked reply, 1.3 GB within a 10 s time-out).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class AnswerTooLarge(Exception):
    """The server's answer passed MAX_ANSWER_BYTES: not retried, since it would only do so again."""


def check_http_options(timeout_s: float, retries: int) -> None:
    import math

    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise OptionsError(f"--timeout must be a positive number of seconds, got {timeout_s}")
    if not 0 <= retries <= 20:
        raise OptionsError(f"--retries must be between 0 and 20, got {retries}")


def check_url(url: str) -> str:
    """Hindsight's base URL: http or https with a host, or a one-line OptionsError now (a URL without a
    scheme was retried three times; `http://u:p@[::1` raised InvalidURL)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise OptionsError(redact(f"--url {url!r} is not a URL ({exc})")) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise OptionsError(redact(f"--url {url!r} must be an http(s) URL with a host, such as http://localhost:8888"))
    return url.rstrip("/")


def recall_path(bank: str) -> str:
    """The bank id as exactly one path segment: `../admin` or `a#b` must never reach another route."""
    from urllib.parse import quote

    if not bank or not bank.strip() or bank in (".", "..") or any(ord(c) < 32 for c in bank) or len(bank) > 256:
        raise OptionsError(f"--bank {bank!r} is not a bank id Hindsight accepts")
    return f"/v1/default/banks/{quote(bank, safe='')}/memories/recall"


class _Deadline(Exception):
    """Raised inside a blocked read when the whole exchange's time is up."""


@contextmanager
def whole_exchange_deadline(seconds: float) -> Iterator[None]:
    """Bound a whole HTTP exchange, status line and headers included, to `seconds` of wall time.

    httpx's time-outs apply to each read, so a server that drips its headers a byte a second never trips
    them. In the main thread a timer signal interrupts the blocked read itself; elsewhere (no signals there)
    only the per-read time-outs and the body's deadline apply.
    """
    import httpx

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Deadline

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Deadline:
        raise httpx.ReadTimeout(f"no complete answer within {seconds:g} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def server_version(client: Any) -> str | None:
    """The answering Hindsight's version, or None when `/version` is missing, slow or not a version."""
    import httpx

    from autotune.hindsight.schema import parse_version_body

    try:
        with whole_exchange_deadline(client.timeout.read or 30.0), client.stream("GET", "/version") as resp:
            if resp.status_code != 200:
                return None
            body = b""
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > 4096:  # a version is a few bytes: a larger answer is not one
                    return None
    except httpx.HTTPError:
        return None
    return parse_version_body(body)


def _post_by_deadline(client: Any, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """One POST whose whole exchange, headers and body, must finish within the client's timeout.

    httpx's time-outs apply per read, so a server that drips a byte a second never trips them;
    the body is read in pieces against one deadline instead.
    """
    import httpx

    limit = client.timeout.read or 30.0
    deadline = time.monotonic() + limit
    chunks, size = [], 0
    with whole_exchange_deadline(limit), client.stream("POST", path, json=body) as resp:
        declared = resp.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
            raise AnswerTooLarge(int(declared))
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise AnswerTooLarge(size)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"no complete answer within {limit:g} s")
        return resp.status_code, b"".join(chunks)


def post_with_retry(client: Any, path: str, body: dict[str, Any], retries: int) -> dict[str, Any]:
    """POST a recall, retrying time-outs, lost connections, 429 and 5xx; the answer checked against
    Hindsight's recall schema."""
    import httpx

    from autotune.hindsight.schema import BadAnswer, parse_recall

    delay = 0.5
    for attempt in range(retries + 1):
        try:
            status, payload = _post_by_deadline(client, path, body)
        except AnswerTooLarge:
            raise UpstreamError(f"the answer passed {MAX_ANSWER_BYTES // (1024 * 1024)} MB, far more than any "
                                "recall: not a Hindsight recall endpoint, or a broken one") from None
        except httpx.TimeoutException:
            problem = "timed out"
        except httpx.TransportError as exc:
            problem = f"connection to {redact(str(client.base_url))} failed ({type(exc).__name__})"
        else:
            if status == 200:
                try:
                    return parse_recall(payload)
                except BadAnswer as exc:  # the server's answer, not a transient failure: not retried
                    raise UpstreamError(str(exc)) from None
            if status in (401, 403):
                raise UpstreamError(f"HTTP {status}: check the API key")
            problem = f"HTTP {status}"
            if status < 500 and status != 429:
                raise UpstreamError(problem)
        if attempt < retries:
            time.sleep(delay)
            delay *= 2
    raise UpstreamError(f"{problem} after {retries + 1} attempts")
