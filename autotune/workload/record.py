"""`autotune record`: rebuild the reranker's exact inputs from Hindsight recall traces.

A recall with `"trace": true` lists the scored candidates (`trace.reranked[]`) and, per
retrieval arm, each candidate's context and event date (`trace.retrieval_results[].results[]`).
The document string is rebuilt the way the answering Hindsight version's reranker builds it
(`hindsight_versions`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError, UpstreamError, WorkloadError
from autotune.fileio import note_partial
from autotune.hindsight.client import check_http_options, check_url, post_with_retry, recall_path, server_version
from autotune.hindsight.trace import pool_facts, recall_pool, rerank_phase_seconds
from autotune.hindsight.versions import date_part, render, rules_for
from autotune.workload.candidate_cap import DEFAULT_ENCODING
from autotune.workload.queries import parse_line

BUDGETS = ("low", "mid", "high")


def render_document(text: str, context: str | None, event_date: str | None) -> str:
    """A candidate as Hindsight before 1.1 rendered it, dated by the trace's `event_date`."""
    return render(text, context, date_part(event_date))


def line_from_recall(response: dict[str, Any], *, budget: str | None, version: str | None,
                     encoding: str = DEFAULT_ENCODING) -> dict[str, Any]:
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
        found = cand.get("score_components")
        components = found if isinstance(found, dict) else {}
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
    replay = replay_facts(response, node_ids, line.get("hindsight_scores"), encoding)
    if replay is not None:
        line["replay"] = replay
    try:
        parse_line(json.dumps(line, ensure_ascii=False), 0)  # what we write, `autotune run` accepts
    except WorkloadError as exc:  # an answer we would not write: counted as malformed, like the others
        raise ValueError(exc.message.removeprefix("line 0: ")) from exc
    return line


def replay_facts(response: dict[str, Any], node_ids: list[str], scores: list[Any] | None,
                 encoding: str) -> dict[str, Any] | None:
    """The line's `replay` object (`hindsight.trace.pool_facts`), with whether replaying Hindsight's own scores
    through `hindsight.ordering` gives back the results it returned (`reproduced`); None when the response
    lacks what a replay needs (an older Hindsight, a bare trace)."""
    try:
        facts = pool_facts(response, encoding)
        pool = recall_pool(facts, node_ids)
        kept = pool.kept(facts.get("recorded_cap"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if scores is not None and all(isinstance(s, (int, float)) for s in scores):
        facts["reproduced"] = pool.results(kept, [scores[i] for i in kept]) == facts["results"]
    else:
        facts["reproduced"] = False
    return facts


def replay_notes(lines: list[dict[str, Any]]) -> list[str]:
    """What limits a replay of these recorded recalls, in one line each: said by `record`, and again by `run`."""
    notes = []
    missing = sum(1 for ln in lines if "replay" not in ln)
    if missing:
        notes.append(f"{missing} recall(s) carry no fused pool (trace.rrf_merged) or results: their pool size "
                     "cannot be tuned")
    replays = [ln["replay"] for ln in lines if "replay" in ln]
    capped = sorted({r["recorded_cap"] for r in replays if "recorded_cap" in r})
    if capped:
        notes.append(f"Hindsight had already cut the pool (MAX_CANDIDATES {', '.join(map(str, capped))}): caps up to "
                     "that size can be replayed, no larger")
    zeros = sum(r.get("deadline_zeros", 0) for r in replays)
    if zeros:
        notes.append(f"{zeros} candidate(s) were left unscored by a deadline (score 0): record with "
                     "HINDSIGHT_API_RERANKER_ONNX_TIMEOUT=0 so that every candidate is scored")
    boosted = sum(1 for r in replays if r.get("boosted"))
    if boosted:
        notes.append(f"{boosted} recall(s) ran with RECALL_STRATEGY_BOOSTS, which reorder the trim: their pool "
                     "cannot be capped by a replay")
    unreproduced = sum(1 for r in replays if not r.get("reproduced"))
    if unreproduced:
        notes.append(f"{unreproduced} of {len(replays)} recall(s) do not come out as Hindsight returned them when "
                     "replayed (min_scores, prefer_observations, a different TOKENIZER_ENCODING or a decision "
                     "model): they are left out of the result-quality gate")
    return notes


@dataclass
class RecordReport:
    written: int = 0
    skipped_existing: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what limits a replay of what was written (`replay_notes`)
    lines: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def add(self, writer: JsonlAppender, line: dict[str, Any]) -> None:
        writer.append(line)
        self.written += 1
        self.lines.append(line)
        self.notes = replay_notes(self.lines)


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
            budget = obj.get("budget")
            done.add((str(obj.get("query")), None if budget is None else str(budget)))
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
        note_partial(self.path, f"{self.path} holds the {self._lines} recall(s) recorded by this run, each "
                                "whole; rerun the same command with --resume to record the rest")

    def close(self) -> None:
        """A failed first run leaves no empty file behind to block the same command ("exists")."""
        self._fh.close()
        if self._created and self._lines == 0:
            self.path.unlink(missing_ok=True)
            note_partial(self.path, None)


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


def record_from_server(url: str, bank: str, queries: Sequence[str], budgets: Sequence[str], out: Path, *,
                       api_key: str | None, resume: bool = False, timeout_s: float = 30.0, retries: int = 2,
                       progress: Callable[[Iterable[Any]], Iterable[Any]] = iter,
                       max_tokens: int | None = None) -> RecordReport:
    """Each query at each budget, as a recall with `trace: true` (and the agent's `max_tokens`, when given:
    how many results Hindsight returns, which the result-quality gate compares)."""
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
                    response = post_with_retry(client, path, recall_body(query, budget, max_tokens), retries)
                    report.add(writer, line_from_recall(response, budget=budget, version=version))
                except (UpstreamError, ValueError) as exc:
                    report.failures.append(f"query #{number} ({budget}): {exc}")
    finally:
        writer.close()
    if report.written == 0 and report.skipped_existing == 0 and report.failures:
        raise UpstreamError(f"every recall failed; first: {report.failures[0]}")
    return report


def recall_body(query: str, budget: str | None, max_tokens: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "budget": budget, "trace": True}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


def record_from_traces(directory: Path, out: Path, *, resume: bool = False) -> RecordReport:
    from autotune.hindsight.schema import parse_recall

    if not Path(directory).is_dir():
        raise OptionsError(f"trace directory {directory} does not exist")
    report = RecordReport()
    writer = JsonlAppender(out, resume=resume)
    try:
        for path in sorted(Path(directory).glob("*.json")):
            try:
                response = parse_recall(path.read_bytes())  # the schema a live recall is checked against
                budget = response.get("budget") if isinstance(response, dict) and isinstance(
                    response.get("budget"), str) else None
                line = line_from_recall(response, budget=budget, version=None)
                if (line["query"], budget) in writer.done:
                    report.skipped_existing += 1
                    continue
                report.add(writer, line)
            except (ValueError, UnicodeDecodeError, RecursionError, OSError) as exc:
                report.failures.append(f"{path.name}: {getattr(exc, 'strerror', None) or exc}")
    finally:
        writer.close()
    return report
