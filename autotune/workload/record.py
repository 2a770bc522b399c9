"""`autotune record`: rebuild the reranker's exact inputs from Hindsight recall traces.

A recall with `"trace": true` lists the scored candidates (`trace.reranked[]`) and, per
retrieval arm, each candidate's context and event date (`trace.retrieval_results[].results[]`).
The document string is rebuilt the way the answering Hindsight version's reranker builds it
(`hindsight_versions`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError, UpstreamError, WorkloadError
from autotune.workload.hindsight_versions import date_part, render, rules_for
from autotune.workload.queries import parse_line

API_KEY_ENV = "HINDSIGHT_API_KEY"
BUDGETS = ("low", "mid", "high")


def render_document(text: str, context: str | None, event_date: str | None) -> str:
    """A candidate as Hindsight before 1.1 rendered it, dated by the trace's `event_date`."""
    return render(text, context, date_part(event_date))


MAX_SECONDS = 86_400.0  # a day: no recall's phase takes longer


def positive_seconds(value: Any, what: str) -> float:
    """A duration from outside (a server's trace, a recording): a finite number of seconds above zero, or a
    ValueError that names it. NaN, 1e308-as-infinity, negatives and zero would make every ratio a lie."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is not a number of seconds ({type(value).__name__})")
    try:
        seconds = float(value)
    except OverflowError:
        raise ValueError(f"{what} is too large to be a duration") from None
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise ValueError(f"{what} is {seconds!r}, not a duration between 0 and {MAX_SECONDS:.0f} seconds")
    return seconds


def rerank_phase_seconds(trace: dict[str, Any]) -> float | None:
    """Hindsight's own time for the reranking phase (`summary.phase_metrics`), or None when the trace has
    none; a ValueError when it has one that is not a duration."""
    summary = trace.get("summary") if isinstance(trace.get("summary"), dict) else {}
    metrics = summary.get("phase_metrics") if isinstance(summary, dict) else None
    for m in metrics if isinstance(metrics, list) else []:
        if isinstance(m, dict) and (m.get("phase_name") or m.get("phase")) == "reranking":
            return positive_seconds(m.get("duration_seconds"), "the reranking phase's duration_seconds")
    return None


def line_from_recall(response: dict[str, Any], *, budget: str | None, version: str | None) -> dict[str, Any]:
    """One queries.jsonl object from one recall response (or a bare trace)."""
    if not isinstance(response, dict):
        raise ValueError(f"the response is a JSON {type(response).__name__}, not an object")
    trace = response.get("trace", response)
    if not isinstance(trace, dict) or not isinstance(trace.get("reranked"), list):
        raise ValueError("response has no trace.reranked (was the recall made with \"trace\": true?)")
    query_info = trace.get("query")
    query = query_info.get("query_text") if isinstance(query_info, dict) else None
    if not isinstance(query, str) or not query.strip():
        raise ValueError("trace.query.query_text is missing")
    details: dict[str, dict[str, Any]] = {}
    arms = trace.get("retrieval_results") or []
    if not isinstance(arms, list) or not all(isinstance(a, dict) for a in arms):
        raise ValueError("trace.retrieval_results is not a list of retrieval arms")
    for arm in arms:
        hits = arm.get("results") or []
        if not isinstance(hits, list):
            raise ValueError("trace.retrieval_results[].results is not a list")
        for hit in hits:
            if isinstance(hit, dict) and hit.get("node_id") is not None:
                seen = details.setdefault(str(hit["node_id"]), {})
                for key in ("context", "event_date"):
                    if hit.get(key) and not seen.get(key):
                        seen[key] = hit[key]
    rules = rules_for(version)
    dates = rules.dates(response, details)
    documents, node_ids, scores, normalized = [], [], [], []
    unknown = 0
    for cand in trace["reranked"]:
        if not isinstance(cand, dict):
            raise ValueError("trace.reranked holds something other than candidates")
        node = str(cand.get("node_id"))
        day, known = dates.lookup(node)
        unknown += not known
        documents.append(render(str(cand.get("text") or ""), details.get(node, {}).get("context"), day))
        node_ids.append(node)
        components = cand.get("score_components") if isinstance(cand.get("score_components"), dict) else {}
        scores.append(components.get("cross_encoder_score"))
        normalized.append(components.get("cross_encoder_score_normalized"))
    if not documents:
        raise ValueError("trace.reranked is empty: nothing was reranked for this query")
    line: dict[str, Any] = {"query": query, "documents": documents, "budget": budget, "node_ids": node_ids,
                            "candidates": len(documents), "dated_by": rules.date_source}
    if unknown:
        line["dates_unknown"] = unknown  # candidates the response's results did not list: rebuilt undated
    rerank_s = rerank_phase_seconds(trace)
    if rerank_s is not None:
        line["hindsight_rerank_s"] = rerank_s
    if any(s is not None for s in scores):
        line["hindsight_scores"] = scores
    if any(s is not None for s in normalized):
        line["hindsight_scores_normalized"] = normalized
    if version:
        line["hindsight_version"] = version
    try:
        parse_line(json.dumps(line, ensure_ascii=False), 0)  # what we write, `autotune run` accepts
    except WorkloadError as exc:  # an answer we would not write: counted as malformed, like the others
        raise ValueError(exc.message.removeprefix("line 0: ")) from exc
    return line


@dataclass
class RecordReport:
    written: int = 0
    skipped_existing: int = 0
    failures: list[str] = field(default_factory=list)


class JsonlAppender:
    """Line-by-line output that survives an interruption: each line is flushed and fsynced."""

    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        self._created = not path.exists()  # a file this run made, and wrote nothing into, is removed at close
        self._lines = 0
        if path.exists() and not resume:
            raise OptionsError(f"{path} exists: pass --resume to continue it, or choose another -o")
        self.done: set[tuple[str, str | None]] = set()
        if resume and path.exists():
            self.done = self._recorded()  # read and checked first: a bad line changes nothing
            self._truncate_partial_last_line()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for line-by-line appends
        except OSError as exc:
            raise OptionsError(f"cannot write {path}: {exc.strerror}") from exc

    def _recorded(self) -> set[tuple[str, str | None]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"cannot read {self.path} to resume it: {exc}") from exc
        lines = text.split("\n")
        complete = lines[:-1]  # the last piece is either empty or a torn line that will be cut
        done = set()
        for number, raw in enumerate(complete, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                raise WorkloadError(f"{self.path} line {number} is not JSON: fix or remove it to resume "
                                    "(nothing was changed)") from None
            if not isinstance(obj, dict):
                raise WorkloadError(f"{self.path} line {number} is not a recorded recall (nothing was changed)")
            done.add((obj.get("query"), obj.get("budget")))
        return done

    def _truncate_partial_last_line(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])

    def append(self, obj: dict[str, Any]) -> None:
        self._fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self._fh.flush()
        self._lines += 1
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """A failed first run leaves no empty file behind to block the same command ("exists")."""
        self._fh.close()
        if self._created and self._lines == 0:
            self.path.unlink(missing_ok=True)


def read_queries(path: Path) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read queries from {path}: {exc}") from exc
    queries = [ln.strip() for ln in lines if ln.strip()]
    if not queries:
        raise WorkloadError(f"{path} has no queries (one per line)")
    return queries


def parse_budgets(text: str) -> list[str]:
    budgets = [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in budgets if b not in BUDGETS]
    if not budgets or bad:
        raise OptionsError(f"--budget takes a comma-separated subset of {','.join(BUDGETS)}")
    return budgets


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
        raise OptionsError(f"--url {url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise OptionsError(f"--url {url!r} must be an http(s) URL with a host, such as http://localhost:8888")
    return url.rstrip("/")


def recall_path(bank: str) -> str:
    """The bank id as exactly one path segment: `../admin` or `a#b` must never reach another route."""
    from urllib.parse import quote

    if not bank or not bank.strip() or bank in (".", "..") or any(ord(c) < 32 for c in bank) or len(bank) > 256:
        raise OptionsError(f"--bank {bank!r} is not a bank id Hindsight accepts")
    return f"/v1/default/banks/{quote(bank, safe='')}/memories/recall"


def record_from_server(url: str, bank: str, queries: Sequence[str], budgets: Sequence[str], out: Path, *,
                       api_key: str | None, resume: bool = False, timeout_s: float = 30.0, retries: int = 2,
                       progress: Callable[[Iterable[Any]], Iterable[Any]] = iter) -> RecordReport:
    import httpx

    check_http_options(timeout_s, retries)
    base = check_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    path = recall_path(bank)
    report = RecordReport()
    writer = JsonlAppender(out, resume=resume)
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=timeout_s) as client:
            version = server_version(client)
            jobs = [(n, q, b) for n, q in enumerate(queries, start=1) for b in budgets]
            for number, query, budget in progress(jobs):
                if (query, budget) in writer.done:
                    report.skipped_existing += 1
                    continue
                try:
                    response = post_with_retry(client, path, {"query": query, "budget": budget, "trace": True},
                                                retries)
                    writer.append(line_from_recall(response, budget=budget, version=version))
                    report.written += 1
                except (UpstreamError, ValueError) as exc:
                    report.failures.append(f"query #{number} ({budget}): {exc}")
    finally:
        writer.close()
    if report.written == 0 and report.skipped_existing == 0 and report.failures:
        raise UpstreamError(f"every recall failed; first: {report.failures[0]}")
    return report


def server_version(client: Any) -> str | None:
    import httpx

    try:
        resp = client.get("/version")
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:
            return resp.text.strip()[:40] or None
        if isinstance(body, dict):
            return str(body.get("version") or body.get("api_version") or "") or None
        return str(body)[:40]
    except httpx.HTTPError:
        return None


def _post_by_deadline(client: Any, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """One POST whose whole exchange, headers and body, must finish within the client's timeout.

    httpx's time-outs apply per read, so a server that drips a byte a second never trips them;
    the body is read in pieces against one deadline instead.
    """
    import httpx

    limit = client.timeout.read or 30.0
    deadline = time.monotonic() + limit
    chunks = []
    with client.stream("POST", path, json=body) as resp:
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"no complete answer within {limit:g} s")
        return resp.status_code, b"".join(chunks)


def post_with_retry(client: Any, path: str, body: dict[str, Any], retries: int) -> dict[str, Any]:
    import httpx

    delay = 0.5
    for attempt in range(retries + 1):
        try:
            status, payload = _post_by_deadline(client, path, body)
        except httpx.TimeoutException:
            problem = "timed out"
        except httpx.TransportError as exc:
            problem = f"connection to {client.base_url} failed ({type(exc).__name__})"
        else:
            if status == 200:
                try:
                    return json.loads(payload)
                except (ValueError, RecursionError) as exc:
                    raise UpstreamError("response is not JSON") from exc
            if status in (401, 403):
                raise UpstreamError(f"HTTP {status}: check the API key")
            problem = f"HTTP {status}"
            if status < 500 and status != 429:
                raise UpstreamError(problem)
        if attempt < retries:
            time.sleep(delay)
            delay *= 2
    raise UpstreamError(f"{problem} after {retries + 1} attempts")


def record_from_traces(directory: Path, out: Path, *, resume: bool = False) -> RecordReport:
    if not Path(directory).is_dir():
        raise OptionsError(f"trace directory {directory} does not exist")
    report = RecordReport()
    writer = JsonlAppender(out, resume=resume)
    try:
        for path in sorted(Path(directory).glob("*.json")):
            try:
                response = json.loads(path.read_text(encoding="utf-8"))
                budget = response.get("budget") if isinstance(response, dict) and isinstance(
                    response.get("budget"), str) else None
                line = line_from_recall(response, budget=budget, version=None)
                if (line["query"], budget) in writer.done:
                    report.skipped_existing += 1
                    continue
                writer.append(line)
                report.written += 1
            except (ValueError, UnicodeDecodeError, RecursionError, OSError) as exc:
                report.failures.append(f"{path.name}: {getattr(exc, 'strerror', None) or exc}")
    finally:
        writer.close()
    return report
