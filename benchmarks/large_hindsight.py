"""A real Hindsight 1.1.0 loads a large reranker autotune emitted and answers recalls (issue 52).

The model is a graph of bge-reranker-v2-m3's class with RANDOM weights (`tests/support/large.py`), given as the
source directory a run tuned, and the run's directory (`.env`, `models/`). Hindsight's own `onnx` provider
loads, in turn: the source model at Hindsight's defaults (fp32, `model.onnx` with `model.onnx_data`), and the
model directory the run emitted at the run's configuration (int8 or fp32, with its data file). Each answers the
same recalls over the same memories; the script prints Hindsight's own reranking-phase time for each (from the
trace), the ratio of the medians, and the peak RSS of Hindsight's process. The rankings are noise: no quality
figure is stated.

Needs `pip install -e '.[hindsight]'` and `.ci/install-pgvector`.
Usage: python benchmarks/large_hindsight.py --model DIR --run-dir DIR [--memories 120] [--budget mid] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import psutil
from _common import real_hindsight_setup

from autotune.hindsight.trace import rerank_phase_seconds
from autotune.outputs.envfile import managed_values
from autotune.runtime.onnx_files import data_files
from tests.support.real_hindsight import RealHindsight, memories, onnx_defaults


def recall_times(h: RealHindsight, env: dict[str, str], queries: list[str], budget: str, rounds: int,
                 bank: str) -> tuple[list[float], float, float]:
    """(each recall's reranking phase in s, the start-up in s, Hindsight's peak RSS in MB) at `env`."""
    start = time.perf_counter()
    url = h.start(env)
    started = time.perf_counter() - start
    proc = psutil.Process(h.proc.pid)  # type: ignore[union-attr]
    peak = proc.memory_info().rss
    times = []
    with httpx.Client(base_url=url, timeout=900) as client:
        for _ in range(rounds):
            for query in queries:
                answer = client.post(f"/v1/default/banks/{bank}/memories/recall",
                                     json={"query": query, "budget": budget, "trace": True})
                answer.raise_for_status()
                trace = answer.json()["trace"]
                assert trace["reranked"], "the recall reranked nothing"
                times.append(rerank_phase_seconds(trace) or float("nan"))
                peak = max(peak, proc.memory_info().rss)
    return times, started, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the large model's source directory")
    parser.add_argument("--run-dir", type=Path, required=True, help="where `autotune run` wrote .env and models/")
    parser.add_argument("--memories", type=int, default=120)
    parser.add_argument("--budget", default="mid")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    _, queries = real_hindsight_setup()
    queries = queries[:4]
    tuned = managed_values(args.run_dir / ".env")
    emitted = Path(tuned["HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH"])
    print(f"source: {args.model} ({', '.join(p.name for p in data_files(args.model / 'model.onnx'))}); emitted: "
          f"{emitted} ({', '.join(p.name for p in data_files(emitted))}); RANDOM weights: speed only")
    with tempfile.TemporaryDirectory() as tmp:
        h = RealHindsight(Path(tmp) / "hindsight")
        try:
            h.start(onnx_defaults(args.model))
            h.retain("large", memories(args.memories))
            rows = {}
            for name, env in (("Hindsight's defaults, fp32 source", onnx_defaults(args.model)),
                              ("the run's .env, emitted model", tuned)):
                rows[name] = recall_times(h, env, queries, args.budget, args.rounds, "large")
        finally:
            h.close()
    for name, (times, started, peak) in rows.items():
        print(f"{name:<36} start-up {started:5.1f} s; reranking median {statistics.median(times):6.2f} s over "
              f"{len(times)} recalls (max {max(times):.2f} s); Hindsight's peak RSS {peak:.0f} MB")
    (base, *_), (tuned_times, *_) = rows.values()
    print(f"ratio: the tuned reranking phase is {statistics.median(base) / statistics.median(tuned_times):.2f}x "
          "as fast as the defaults' (medians, same recalls, same host)")


if __name__ == "__main__":
    main()
