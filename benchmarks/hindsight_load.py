"""Eight recalls at once, as Hindsight's TEI client sends them, before and after the generated `.env`.

1. Tune the `tei` target (`tune`, default settings unless --trials) on a heavy workload with
   300 candidates a query, or take --env-file from an earlier run.
2. Start `autotune serve --env-file` in its own process, as compose would.
3. Time one recall alone (the median of three), then send --recalls recalls of 300 candidates at
   once through a client with Hindsight's semantics (`autotune.serve.tei_client`), twice:
   - "defaults": Hindsight's client keys (TEI_MAX_CONCURRENT 8, TEI_HTTP_TIMEOUT 30 s) with the
     generated TEI_BATCH_SIZE, which is the set-up the issue reported;
   - "generated": every key of the generated `.env`.

For each, it prints the recalls that succeeded, the wall time, wall / (N x one recall alone), the
inference seconds the server spent on abandoned requests (from its /metrics), the dropped requests,
and the p95 per recall. Usage:

    python benchmarks/hindsight_load.py [--recalls 8] [--trials N] [--env-file .env]

A default tuning run on 300-candidate recalls takes an hour on a 2-core host; the figures in the
docs/benchmarks.md came from `--tune-queries 2 --trials 6 --repeats 1 --refine-rounds 0 --final-rounds 2`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import ROOT, heavy_workload
from search_efficiency import write_jsonl

from autotune.host import default_probe
from autotune.measure.stats import percentile
from autotune.outputs.envfile import parse_env
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.search.space import SearchSettings
from autotune.serve.tei_client import ClientSettings, HindsightLikeClient


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def counter(url: str, name: str) -> float:
    match = re.search(rf"^{name}_total ([0-9.e+-]+)$", httpx.get(url + "/metrics").text, re.M)
    return float(match.group(1)) if match else 0.0


async def burst(url: str, settings: ClientSettings, recalls: list[tuple[str, list[str]]]) -> tuple[list, float]:
    async with HindsightLikeClient(url, settings) as client:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(client.recall(q, texts) for q, texts in recalls))
        return outcomes, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recalls", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--trials", type=int, default=None, help="for the tuning run (default: the run's own)")
    parser.add_argument("--repeats", type=int, default=3, help="for the tuning run")
    parser.add_argument("--refine-rounds", type=int, default=2, help="for the tuning run (0: no refinement)")
    parser.add_argument("--final-rounds", type=int, default=3, help="for the tuning run")
    parser.add_argument("--tune-queries", type=int, default=3,
                        help="recalls of --candidates candidates in the tuning workload (the largest request must "
                             "be in it: the client's time-out is sized from it)")
    parser.add_argument("--env-file", type=Path, help="a .env from an earlier `autotune run --target tei`")
    args = parser.parse_args()
    host = default_probe().probe()
    isa = ", ".join(k for k, v in host.isa.items() if v)
    print(f"host: {host.brand}, {host.cores.usable} usable cores, {isa}; onnxruntime {host.onnxruntime}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env_file = args.env_file
        if env_file is None:
            env_file = work / ".env"
            env_file.write_text("")
            path = write_jsonl(heavy_workload(queries=args.tune_queries, candidates=args.candidates, seed=3),
                               work / "tune.jsonl")
            os.environ["AUTOTUNE_STATE_DIR"] = str(work / "state")
            started = time.monotonic()
            settings = SearchSettings(trials=args.trials, repeats=args.repeats, refine_rounds=args.refine_rounds,
                                      final_rounds=args.final_rounds)
            print(f"tuning on {args.tune_queries} recalls of {args.candidates} candidates: {settings.trials or 'auto'} "
                  f"trials, {settings.repeats} repeats, {settings.refine_rounds} refinement rounds, "
                  f"{settings.final_rounds} final rounds")
            outcome = tune(RunOptions(workload=path, env_file=env_file, profile_dir=work / "profiles", name="load",
                                      compose_file=None, target="tei", settings=settings),
                           on_stage=lambda line: print(f"  {line}", flush=True))
            print(f"tuned in {time.monotonic() - started:.0f} s: {outcome.result.winner.config.label()}")
        env = parse_env(env_file.read_text())
        generated = ClientSettings.from_env(env)
        defaults = ClientSettings(batch_size=generated.batch_size)
        print("generated keys: " + ", ".join(f"{k.removeprefix('HINDSIGHT_API_RERANKER_')}={v}" for k, v in env.items()
                                             if "TEI_" in k or k == "AUTOTUNE_WORKERS"))
        load = heavy_workload(queries=args.recalls, candidates=args.candidates, seed=17)
        recalls = [(q.query, q.documents) for q in load.queries]
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--env-file", str(env_file),
                                   "--port", str(port)], cwd=work, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            alone = sorted(asyncio.run(burst(url, generated, recalls[:1]))[1] for _ in range(3))[1]
            print(f"one recall alone: {alone:.2f} s (median of 3); {len(recalls)} recalls of "
                  f"{args.candidates} candidates at once:")
            for name, settings in (("defaults", defaults), ("generated", generated)):
                dropped, wasted = counter(url, "autotune_dropped_requests"), counter(
                    url, "autotune_abandoned_inference_seconds")
                outcomes, wall = asyncio.run(burst(url, settings, recalls))
                time.sleep(1.0)  # let the server settle what it still held
                wasted = counter(url, "autotune_abandoned_inference_seconds") - wasted
                dropped = counter(url, "autotune_dropped_requests") - dropped
                ok = [o for o in outcomes if o.ok]
                p95 = percentile([o.seconds for o in ok], 95) if ok else float("nan")
                retries = sum(o.attempts - o.requests for o in outcomes)
                print(f"  {name:<9} (max_concurrent={settings.max_concurrent}, "
                      f"timeout={settings.http_timeout_s:.0f} s): {len(ok)}/{len(outcomes)} succeeded; "
                      f"wall {wall:.1f} s = "
                      f"{wall / (len(recalls) * alone):.2f}x the serial sum; abandoned inference {wasted:.1f} s, "
                      f"{dropped:.0f} requests dropped, {retries} retries; p95 per recall {p95:.1f} s")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
