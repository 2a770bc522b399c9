"""Where a run's wall time goes, phase by phase, on a recorded workload, against its --timeout (issue 51).

Records a workload from a real Hindsight 1.1.0 (`--memories` distinct memories, the example's queries at budgets
low and mid, Hindsight's default 4,096-token recall), or takes one (`--workload`), then runs `autotune run
--timeout T` on it in a fresh process with fresh caches and state, and prints: the wall time against the
promise, the peak RSS, each phase's share of the wall time beside the time plan's estimate of it, the trials
measured, and how int8 was judged. The host's ISA is printed first: every figure is this host's, and a run
beside other work (the test suite, say) is slower and noisier.

Needs `pip install -e '.[hindsight]'` and `.ci/install-pgvector` when it records.

Usage: python benchmarks/run_phases.py [--memories 2000] [--queries 8] [--timeout 900] [--workload FILE]
       [--save-recording FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import yaml
from _common import ROOT, real_hindsight_setup

from autotune.host import default_probe

BANK = "phases"
ORDER = ("load", "precheck", "search", "refine", "race", "scope", "commit")
PLANNED = {"load": ("reference",), "precheck": ("int8",), "search": ("search",), "refine": ("refine",),
           "race": ("race",), "scope": ("scope",), "commit": ("commit",)}


def record(work: Path, memories: int, queries: int) -> Path:
    """The example's first `queries` queries at budgets low and mid, from a real Hindsight holding `memories`."""
    from distinct_bank import distinct_memories

    from autotune.runtime.model import build_default_model
    from tests.support.real_hindsight import RealHindsight, cli, onnx_defaults

    _, texts = real_hindsight_setup()
    qfile = work / "queries.txt"
    qfile.write_text("\n".join(texts[:queries]) + "\n")
    h = RealHindsight(work / "hindsight")
    try:
        url = h.start({**onnx_defaults(build_default_model().directory), "HINDSIGHT_API_RERANKER_ONNX_TIMEOUT": "0"})
        h.retain(BANK, distinct_memories(memories))
        recording = work / "recording.jsonl"
        status, _, err = cli("record", "--url", url, "--bank", BANK, "--queries", str(qfile), "--budget", "low,mid",
                             "-o", str(recording), "--model", "default")
        if status != 0:
            raise SystemExit(f"record failed: {err.strip()}")
        return recording
    finally:
        h.close()


def run(work: Path, workload: Path, timeout_s: float) -> tuple[float, float, dict, str]:
    """`autotune run` in a fresh process: its wall time, its peak RSS (MB), its profile and its stderr."""
    env = {**os.environ, "AUTOTUNE_CACHE_DIR": str(work / "cache"), "AUTOTUNE_STATE_DIR": str(work / "state"),
           "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "autotune", "run", "--workload", str(workload), "--timeout",
                           str(timeout_s), "--env-file", str(work / ".env"), "--profile-dir", str(work / "profiles"),
                           "--name", "phases", "--model-out", str(work / "models" / "phases"), "--no-compose"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        peak_mb = 0.0
        watched = psutil.Process(proc.pid)
        while proc.poll() is None:  # the run and its children (the memory-measuring one) together
            with contextlib.suppress(psutil.Error):
                rss = watched.memory_info().rss + sum(c.memory_info().rss for c in watched.children(recursive=True))
                peak_mb = max(peak_mb, rss / 2**20)
            time.sleep(0.2)
        stdout, stderr = proc.communicate()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"autotune run failed ({proc.returncode}): {stderr.strip().splitlines()[-1:]}")
    profile = yaml.safe_load((work / "profiles" / "phases.yaml").read_text())
    return wall, peak_mb, profile, stderr + stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=8, help="each recorded at budgets low and mid")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--workload", type=Path, help="a recording to use instead of recording one")
    parser.add_argument("--save-recording", type=Path, help="keep the recording made here, for --workload later")
    args = parser.parse_args()
    host = default_probe().probe()
    print(f"host: {host.brand}, {host.cores.usable} usable cores, ISA "
          f"{','.join(k for k, v in host.isa.items() if v)}, onnxruntime {host.onnxruntime}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        workload = args.workload or record(work, args.memories, args.queries)
        if args.save_recording is not None and args.workload is None:
            args.save_recording.write_bytes(workload.read_bytes())
        from autotune.workload.queries import load_workload

        wl = load_workload(workload)
        print(f"workload: {len(wl.queries)} recalls, {sum(len(q.documents) for q in wl.queries)} pairs")
        wall, peak_mb, profile, err = run(work, workload, args.timeout)
    search = profile["search"]
    phases = dict(search["measuring_s"])
    phases["commit"] = max(0.0, wall - sum(phases.values()))  # the profile is written by the commit itself
    planned = (search.get("plan") or {}).get("estimated_s") or {}
    print(f"wall {wall:.0f} s for a --timeout of {args.timeout:.0f} s ({wall / args.timeout:.2f}x the promise); "
          f"peak RSS {peak_mb:.0f} MB")
    print(f"{'phase':<10} {'seconds':>8} {'share':>6} {'planned':>8}")
    for name in ORDER:
        seconds = phases.get(name, 0.0)
        plan = sum(planned.get(p, 0.0) for p in PLANNED[name])
        print(f"{name:<10} {seconds:8.1f} {seconds / wall:6.0%} {plan:8.1f}")
    judged = ((profile.get("parity") or {}).get("int8_vs_fp32") or {}).get("judged") or {}
    speed = judged.get("speed") or {}
    print(f"trials measured: {search['trials']} (planned {search['trials_planned']}); int8: "
          + (f"speed {speed.get('ratios')} ({speed.get('host')}), judged {speed.get('judged')}, "
             f"{judged.get('seconds')} s" if judged else "not in the space"))
    scope = profile.get("scope") or {}
    print(f"scope: chosen {scope.get('chosen')}, pairs {scope.get('pairs')}, note {scope.get('note')}"[:400])
    print(f"pick: {profile['config']}; speedup p95 {profile['metrics'].get('speedup_p95')}")
    for cut in (search.get("plan") or {}).get("cuts") or []:
        print(f"plan cut: {cut}")
    print("run's plan line:", next((ln for ln in err.splitlines() if "plan: about" in ln), "none"))


if __name__ == "__main__":
    main()
