"""Where the repository's own fixtures are, for tests and benchmarks alike."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_WORKLOAD = ROOT / "examples" / "queries.jsonl"
