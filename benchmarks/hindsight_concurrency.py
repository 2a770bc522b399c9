"""8 recalls at once on a real Hindsight 1.1.0 (`onnx` provider): its defaults, the single-recall pick, and the
pick tuned under `--concurrency 8` (issue 33).

One Hindsight, offline (PostgreSQL with pgvector, no LLM, onnx embeddings): retain memories, record the queries,
tune twice on the recording (one recall at a time; 8 at once, which also searches ONNX_MAX_CONCURRENT), then
restart Hindsight with each `.env` in turn and send `--recalls` recalls at once, `--rounds` times, rotating
which configuration goes first. Prints, per configuration: the p95 of Hindsight's own reranking phase per
recall (queueing for the executor included), recalls per second of wall time, and lost or failed recalls;
ratios are against Hindsight's defaults, measured in this run. Needs `pip install -e '.[hindsight]'` and
`.ci/install-pgvector`. Usage: python benchmarks/hindsight_concurrency.py [--memories 300] [--recalls 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from _common import real_hindsight_setup, tune_recording

from autotune.hindsight.trace import rerank_phase_seconds
from autotune.measure.stats import percentile
from autotune.runtime.model import build_default_model
from tests.support.real_hindsight import RealHindsight, cli, memories, onnx_defaults

BANK = "concurrency"
KEY = "HINDSIGHT_API_RERANKER_ONNX_MAX_CONCURRENT"


def burst(url: str, queries: list[str], recalls: int) -> tuple[list[float], float, int]:
    """`recalls` recalls sent at once: their reranking-phase seconds, the wall time, and how many failed."""
    def one(query: str) -> float | None:
        try:
            resp = httpx.post(f"{url}/v1/default/banks/{BANK}/memories/recall",
                              json={"query": query, "budget": "mid", "trace": True}, timeout=600)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        return rerank_phase_seconds(resp.json().get("trace") or {})

    started = time.perf_counter()
    with ThreadPoolExecutor(recalls) as pool:
        results = list(pool.map(one, [queries[i % len(queries)] for i in range(recalls)]))
    wall = time.perf_counter() - started
    return [r for r in results if r is not None], wall, sum(r is None for r in results)


def tune(work: Path, recording: Path, name: str, *extra: str) -> dict[str, str]:
    env, out = tune_recording(work, recording, name, "--no-pool-tuning", *extra)  # the engine alone, as in issue 33
    chosen = next(line for line in out.splitlines() if line.startswith("Chosen:"))
    print(f"{name}: {chosen}")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--recalls", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _, queries = real_hindsight_setup()
    queries = queries[:8]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        h = RealHindsight(Path(tmp) / "hindsight")
        try:
            url = h.start(onnx_defaults(build_default_model().directory))
            h.retain(BANK, memories(args.memories))
            (work / "queries.txt").write_text("\n".join(queries) + "\n")
            status, _, err = cli("record", "--url", url, "--bank", BANK, "--queries", str(work / "queries.txt"),
                                 "--budget", "mid", "-o", str(work / "recording.jsonl"), "--model", "default")
            if status != 0:
                raise SystemExit(f"record failed: {err.strip()}")
            envs = {"Hindsight's defaults": onnx_defaults(build_default_model().directory),
                    "single-recall pick": tune(work, work / "recording.jsonl", "single"),
                    f"pick under {args.recalls} recalls": tune(work, work / "recording.jsonl", "loaded",
                                                               "--concurrency", str(args.recalls))}
            for name, env in envs.items():
                print(f"  {name}: batch {env.get('HINDSIGHT_API_RERANKER_ONNX_BATCH_SIZE', '32')}, threads "
                      f"{env.get('HINDSIGHT_API_RERANKER_ONNX_THREADS', '0')}, max concurrent {env.get(KEY, '1')}")
            phases: dict[str, list[float]] = {n: [] for n in envs}
            walls: dict[str, list[float]] = {n: [] for n in envs}
            lost = dict.fromkeys(envs, 0)
            names = list(envs)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    h.start(envs[name])
                    burst(url, queries[:2], 2)  # warm-up: the session loads on the first rerank
                    seconds, wall, failed = burst(url, queries, args.recalls)
                    phases[name] += seconds
                    walls[name].append(wall)
                    lost[name] += failed
        finally:
            h.close()
    base = "Hindsight's defaults"
    base_p95 = percentile(phases[base], 95)
    base_rate = sum(walls[base]) and args.recalls * len(walls[base]) / sum(walls[base])
    print(f"\n{args.recalls} recalls at once x {args.rounds} rounds, each ~{args.memories} memories in the bank:")
    print(f"  {'configuration':28}  {'rerank p95 s':>12}  {'vs defaults':>11}  {'recalls/s':>9}  "
          f"{'vs defaults':>11}  lost")
    for name in envs:
        p95 = percentile(phases[name], 95)
        rate = args.recalls * len(walls[name]) / sum(walls[name])
        print(f"  {name:28}  {p95:12.2f}  {base_p95 / p95:10.2f}x  {rate:9.3f}  {rate / base_rate:10.2f}x  "
              f"{lost[name]}")


if __name__ == "__main__":
    main()
