"""How much Hindsight scores, on a real Hindsight 1.1.0 (`onnx` provider) whose bank is large enough that
mid-budget pools reach 300 (issue 32).

One Hindsight, offline (PostgreSQL with pgvector, no LLM, onnx embeddings): retain `--memories` memories,
record the queries at budget mid, then tune twice on the recording: the engine alone (`--no-pool-tuning`:
batch, threads and the rest at pool 300) and the full tune (the pool cap and the per-candidate token cut
too, under the result-quality gate). Then Hindsight is restarted with each `.env` in turn, `--rounds`
times, rotating which goes first, and `autotune verify` measures each live: the p95 of Hindsight's own
reranking phase per recall, and the results each recall returns against those it returned with
Hindsight's defaults (mean, worst recall). The ratios are against the defaults and the engine alone,
measured in this run; the host's ISA is printed first.

How much a smaller pool can keep depends on how many results a recall returns: `--max-tokens` is the
recall's `max_tokens` (on the distinct bank, Hindsight's default 4096 returns about two hundred memories;
1024 about 50; 256 about a dozen). The bank (`--bank`) decides how deep the cross-encoder reaches into the
fused pool: `distinct` says each fact once, as a user's bank does; `repeated` is the test harness's, whose
near-copies make the order among them noise (see `distinct_bank.py`).

Needs `pip install -e '.[hindsight]'` and `.ci/install-pgvector`.

Usage: python benchmarks/pool_tuning.py [--memories 3000] [--queries 8] [--rounds 2] [--max-tokens 4096]
       [--bank distinct|repeated]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from _common import real_hindsight_setup, tune_recording
from distinct_bank import distinct_memories

from autotune.analysis.verify import verify_cutover
from autotune.measure.stats import percentile
from autotune.runtime.model import build_default_model
from autotune.workload.queries import load_workload
from tests.support.real_hindsight import RealHindsight, cli, memories, onnx_defaults

BANK = "pool-bench"
BANKS = {"distinct": distinct_memories, "repeated": memories}


def tune(work: Path, recording: Path, name: str, *extra: str) -> tuple[dict[str, str], str]:
    env, out = tune_recording(work, recording, name, *extra)
    chosen = next(line for line in out.splitlines() if line.startswith("Chosen:"))
    frontier = out[out.find("How much Hindsight scores"):out.find("Chosen:")].rstrip()
    return env, f"{name}: {chosen}\n{frontier}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=4096, help="the recall's max_tokens (default: Hindsight's)")
    parser.add_argument("--bank", choices=BANKS, default="distinct",
                        help="distinct: each fact once (distinct_bank.py); repeated: the example's 45, each ~67 times")
    args = parser.parse_args()
    _, queries = real_hindsight_setup()
    queries = queries[:args.queries]
    defaults = {**onnx_defaults(build_default_model().directory), "HINDSIGHT_API_RERANKER_ONNX_TIMEOUT": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        qfile = work / "queries.txt"
        qfile.write_text("\n".join(queries) + "\n")
        h = RealHindsight(Path(tmp) / "hindsight")
        try:
            url = h.start(defaults)
            h.retain(BANK, BANKS[args.bank](args.memories))
            recording = work / "recording.jsonl"
            status, out, err = cli("record", "--url", url, "--bank", BANK, "--queries", str(qfile), "--budget", "mid",
                                   "--max-tokens", str(args.max_tokens), "-o", str(recording), "--model", "default")
            if status != 0:
                raise SystemExit(f"record failed: {err.strip()}")
            pools = [len(q.documents) for q in load_workload(recording).queries]
            print(f"recorded {len(pools)} recalls at budget mid, max_tokens {args.max_tokens}: "
                  f"pools of {min(pools)}-{max(pools)} candidates")
            print(out.strip())
            engine, engine_line = tune(work, recording, "engine", "--no-pool-tuning")
            full, full_line = tune(work, recording, "full")
            print(engine_line)
            print(full_line)
            envs = {"Hindsight's defaults": defaults, "engine alone (pool 300)": engine, "full tune": full}
            for name, env in envs.items():
                keys = {k.removeprefix("HINDSIGHT_API_RERANKER_"): v for k, v in env.items()
                        if not k.endswith(("_PATH", "PROVIDER"))}
                print(f"  {name}: {keys}")
            phases: dict[str, list[float]] = {n: [] for n in envs}
            agreements: dict[str, list[tuple[float, float]]] = {n: [] for n in envs}
            names = list(envs)
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    h.start({**defaults, **envs[name]})
                    result = verify_cutover(url, BANK, queries, ["mid"], api_key=None, rounds=2,
                                            before=load_workload(recording), check_scores=False, timeout_s=300)
                    phases[name].append(result.after_p95_ms)
                    if result.agreement is not None:
                        agreements[name].append((result.agreement.mean, result.agreement.worst))
        finally:
            h.close()
    base = percentile(phases["Hindsight's defaults"], 50)
    alone = percentile(phases["engine alone (pool 300)"], 50)
    print(f"\nlive, {args.rounds} rounds x 2 recalls per query, {args.memories} {args.bank} memories; "
          "rerank p95 per round, median over rounds:")
    print(f"  {'configuration':26}  {'rerank p95 ms':>13}  {'vs defaults':>11}  {'vs engine':>9}  "
          f"{'agreement mean':>14}  {'worst':>5}")
    for name in envs:
        p95 = percentile(phases[name], 50)
        mean = min((a for a, _ in agreements[name]), default=float("nan"))
        worst = min((w for _, w in agreements[name]), default=float("nan"))
        print(f"  {name:26}  {p95:13.0f}  {base / p95:10.2f}x  {alone / p95:8.2f}x  {mean:14.3f}  {worst:5.3f}")
    match = re.search(r"-> p95 ([0-9.]+) ms", full_line)
    if match:
        print(f"(the full tune's own race: {match.group(0)})")


if __name__ == "__main__":
    main()
