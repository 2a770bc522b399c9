"""Load and validate a recorded workload (queries.jsonl), all of it, before measuring.

Only hashes of the text ever leave this module in profiles and logs.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.errors import WorkloadError
from autotune.fileio import sha256_bytes


@dataclass(frozen=True)
class Query:
    query: str
    documents: list[str]
    budget: str | None = None
    id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    queries: list[Query]
    sha256: str

    @property
    def max_candidates(self) -> int:
        return max(len(q.documents) for q in self.queries)

    def summary(self) -> dict[str, Any]:
        counts = [len(q.documents) for q in self.queries]
        return {"sha256": self.sha256, "queries": len(self.queries), "documents": sum(counts),
                "candidates_min": min(counts), "candidates_max": max(counts)}


def parse_line(line: str, lineno: int) -> Query:
    """One JSONL line -> Query, or a WorkloadError naming the line and the problem."""
    def fail(problem: str) -> WorkloadError:
        return WorkloadError(f"line {lineno}: {problem}")

    if "\x00" in line:
        raise fail("contains a NUL byte")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise fail(f"malformed JSON ({exc.msg}: column {exc.colno})") from exc
    except RecursionError as exc:
        raise fail("malformed JSON (nested too deeply)") from exc
    except ValueError as exc:  # Python refuses integers past 4,300 digits
        raise fail("malformed JSON (a number with too many digits)") from exc
    if not isinstance(obj, dict):
        raise fail("expected a JSON object")
    if _depth(obj) > MAX_DEPTH:  # it would parse, then break pickling (the journal, the workers) much later
        raise fail(f"a field is nested more than {MAX_DEPTH} levels deep")
    query = obj.get("query")
    if not isinstance(query, str):
        raise fail("missing \"query\" (a string)")
    if not query.strip():
        raise fail("\"query\" is empty")
    documents = obj.get("documents")
    if documents is None:
        raise fail("missing \"documents\" (a list)")
    if not isinstance(documents, list):
        raise fail(f"\"documents\" is a {type(documents).__name__}, not a list")
    if not documents:
        raise fail("\"documents\" is empty")
    texts: list[str] = []
    for i, doc in enumerate(documents):
        if isinstance(doc, dict):
            doc = doc.get("text")
        if not isinstance(doc, str):
            raise fail(f"document {i} is not a string or an object with a string \"text\"")
        texts.append(doc)
    for where, text in (("\"query\"", query), *((f"document {i}", d) for i, d in enumerate(texts))):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise fail(f"{where} is not valid Unicode (a lone surrogate escape at character {exc.start})") from exc
    budget = obj.get("budget")
    if budget is not None and not isinstance(budget, str):
        raise fail("\"budget\" must be a string")
    qid = obj.get("id")
    if qid is not None and not isinstance(qid, (str, int)):
        raise fail("\"id\" must be a string")
    extra = {k: v for k, v in obj.items() if k not in ("query", "documents", "budget", "id")}
    for key in SCORE_FIELDS:
        if key in extra and not _finite_numbers(extra[key], len(texts)):
            raise fail(f"\"{key}\" must be one finite number (or null) per document")
    return Query(query, texts, budget, None if qid is None else str(qid), extra)


MAX_DEPTH = 32
SCORE_FIELDS = ("hindsight_scores", "hindsight_scores_normalized")  # read back by the recording's self-check


def _depth(value: object, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _finite_numbers(values: object, n: int) -> bool:
    if not isinstance(values, list) or len(values) != n:
        return False
    for v in values:
        if v is None:  # a candidate Hindsight did not score
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        try:
            if not math.isfinite(float(v)):
                return False
        except OverflowError:  # a 400-digit integer
            return False
    return True


def parse_workload(data: bytes, source: str = "workload") -> Workload:
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is UTF-8 too
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{source}: not UTF-8 (byte {exc.start})") from exc
    queries = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip():
            queries.append(parse_line(line, lineno))
    if not queries:
        raise WorkloadError(f"{source}: no queries (the file is empty)")
    return Workload(queries, sha256_bytes(data))


MAX_WORKLOAD_BYTES = 64 * 1024 * 1024  # a recording of thousands of full pools is a few MB


def load_workload(path: Path) -> Workload:
    """A regular file of at most MAX_WORKLOAD_BYTES: a FIFO (which would block), a device such as /dev/zero
    (which would never end) or a directory is refused before it is opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError as exc:
        raise WorkloadError(f"workload {path} does not exist") from exc
    except OSError as exc:
        raise WorkloadError(f"cannot read workload {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise WorkloadError(f"workload {path} is not a regular file (a pipe, a device or a directory cannot be "
                            "replayed): write it to a file first")
    limit_mb = MAX_WORKLOAD_BYTES // (1024 * 1024)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_WORKLOAD_BYTES + 1)
    except OSError as exc:
        raise WorkloadError(f"cannot read workload {path}: {exc.strerror}") from exc
    if len(data) > MAX_WORKLOAD_BYTES:
        raise WorkloadError(f"workload {path} is larger than {limit_mb} MB: keep the queries that matter "
                            "(autotune replays each one many times)")
    return parse_workload(data, str(path))
