"""A real Hindsight 1.1.0, offline: retain, record, self-check, tune, cut over, verify; then a bad cutover.

Needs `pip install -e '.[hindsight]'` and `.ci/install-pgvector` (PostgreSQL 15 with pgvector).
Prints the recording's self-check and the live before/after ratios of Hindsight's own reranking
phase. Usage: python benchmarks/real_hindsight.py [--memories 300] [--trials 10] [--budget mid]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import real_hindsight_setup

from tests.support.real_hindsight import RealHindsight, cutover_flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--budget", default="mid")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _, queries = real_hindsight_setup()
    with tempfile.TemporaryDirectory() as tmp:
        h = RealHindsight(Path(tmp) / "hindsight")
        try:
            out = cutover_flow(h, Path(tmp) / "work", queries=queries, budget=args.budget, trials=args.trials,
                               memories_n=args.memories, rounds=args.rounds)
        finally:
            h.close()
    print(f"recorded {len(out['candidates'])} recalls, {min(out['candidates'])}-{max(out['candidates'])} candidates")
    print(f"self-check: {out['self_check'].summary()}")
    print(next(line for line in out["run:stdout"].splitlines() if line.startswith("Chosen:")))
    for name in ("verify", "verify_bad"):
        status, stdout, stderr = out[name]
        print(f"\n== {'cut over to the tuned .env' if name == 'verify' else 'cut over to a bad configuration'} "
              f"(exit {status})\n{stdout}{stderr}")


if __name__ == "__main__":
    main()
