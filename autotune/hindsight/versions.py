"""How each Hindsight version turns a recalled memory into the document its reranker scores.

One place for the rules, so `record` rebuilds exactly what the Hindsight that answered
scored. Hindsight ≥ 1.1 dates a candidate by the memory's `occurred_start` (which only the
recall response's `results[]` carry) and adds no date when it is null; older versions are
rebuilt from the trace's `event_date`, as autotune always did for them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Version = tuple[int, int]


def parse_version(text: object) -> Version | None:
    """`1.1.0`, `v0.9`, `1.1.0rc2` -> (major, minor); anything else -> None."""
    if not isinstance(text, str):
        return None
    parts = text.strip().lstrip("v").split(".")
    try:
        major = int(parts[0])
        minor = int("".join(ch for ch in parts[1] if ch.isdigit()) or 0) if len(parts) > 1 else 0
    except (ValueError, IndexError):
        return None
    return major, minor


def date_part(value: object) -> dt.date | None:
    if not value or not isinstance(value, str):
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        return None


def render(text: str, context: str | None, day: dt.date | None) -> str:
    """`[Date: June 05, 2022 (2022-06-05)] context: text`, as Hindsight's reranker builds a candidate."""
    doc = f"{context}: {text}" if context else text
    if day is not None:
        doc = f"[Date: {day:%B %d, %Y} ({day:%Y-%m-%d})] {doc}"
    return doc


@dataclass(frozen=True)
class CandidateDates:
    """Where a version's date comes from, per node id; `known` is False where the response does not say."""

    lookup: Callable[[str], tuple[dt.date | None, bool]]


@dataclass(frozen=True)
class DocumentRules:
    since: Version
    date_source: str  # "occurred_start" (the response's results) or "event_date" (the trace)

    def dates(self, response: dict[str, Any], trace_details: dict[str, dict[str, Any]]) -> CandidateDates:
        if self.date_source == "event_date":
            return CandidateDates(lambda node: (date_part(trace_details.get(node, {}).get("event_date")), True))
        found = response.get("results")
        results = found if isinstance(found, list) else []
        starts = {str(r["id"]): r.get("occurred_start") for r in results if isinstance(r, dict) and "id" in r}

        def lookup(node: str) -> tuple[dt.date | None, bool]:
            if node not in starts:
                return None, False
            return date_part(starts[node]), True

        return CandidateDates(lookup)


RULES = (DocumentRules(since=(0, 0), date_source="event_date"),
         DocumentRules(since=(1, 1), date_source="occurred_start"))


def rules_for(version: object) -> DocumentRules:
    """The newest rules that apply; an unknown version gets the newest, which the self-check then tests."""
    parsed = parse_version(version)
    if parsed is None:
        return RULES[-1]
    return [r for r in RULES if r.since <= parsed][-1]
