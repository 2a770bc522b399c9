"""Peak RSS of `autotune run` per target on a long-context model, against the memory budget (issue 37).

The model is a tiny random ModernBERT cross-encoder with 8192 positions (built and exported offline, as
tests/runtime/test_families.py does); the workload has one pair far past 512 tokens. Each target is tuned in
its own process, under 8 concurrent recalls where the target takes a load, with `--max-memory 2048`; the line
is the process's peak RSS (the kernel's high-water mark) as a share of that budget. The `tei` profile is then
served under 8 concurrent requests of the longest input, against the burst figure the profile states.

    python benchmarks/memory_by_target.py [--targets onnx,tei,local] [--trials 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_MB = 2048


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="onnx,tei")
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()

    from autotune.host import default_probe
    from tests.support.corpus import DOCS
    from tests.support.families import FAMILIES, LONG_DOC, export

    host = default_probe().probe()
    print(f"host: {host.brand}, {host.cores.usable} usable cores, VNNI {'yes' if host.has_vnni else 'no'}; "
          f"budget {BUDGET_MB} MB")
    work = Path(tempfile.mkdtemp(prefix="autotune-memory-"))
    (work / "model").mkdir()
    export(next(f for f in FAMILIES if f.model_type == "modernbert"), work / "model")
    docs = [*DOCS[:6], LONG_DOC]
    workload = work / "queries.jsonl"
    workload.write_text("".join(json.dumps({"query": "what is the capital of france",
                                            "documents": docs[i % 3:] + docs[:i % 3]}) + "\n" for i in range(4)))
    for target in args.targets.split(","):
        command = [sys.executable, "-m", "autotune", "run", "--workload", str(workload), "--model",
                   str(work / "model"), "--target", target, "--max-memory", str(BUDGET_MB), "--trials",
                   str(args.trials), "--repeats", "1", "--final-rounds", "1", "--env-file", str(work / f"{target}.env"),
                   "--profile-dir", str(work / "profiles"), "--name", target, "--no-compose", "--fresh",
                   *(["--concurrency", "8"] if target == "tei" else [])]
        done = subprocess.run([sys.executable, "-c", WATCH, *command], capture_output=True, text=True, cwd=work,
                              env={**_env(), "PYTHONPATH": str(ROOT)})
        peak_mb = float(done.stdout.strip().splitlines()[-1]) / 1024
        status = "ok" if "rc=0" in done.stderr else done.stderr.strip().splitlines()[-1]
        print(f"  {target:5} peak RSS {peak_mb:6.0f} MB = {peak_mb / BUDGET_MB:.2f}x the budget; {status}")
        if target == "tei" and "rc=0" in done.stderr:
            serve_line(work / "profiles" / "tei.yaml")


def serve_line(profile: Path) -> None:
    """`autotune serve` on the tuned profile, 8 requests at once of texts past 8192 tokens: its peak against the
    burst figure the profile states."""
    import yaml

    from tests.support.burst import serve_burst

    burst = yaml.safe_load(profile.read_text())["memory"]["burst"]
    served = serve_burst(profile, ceiling_mb=3 * BUDGET_MB)
    ok = sum(s == 200 for s in served.statuses)
    print(f"  serve under 8 concurrent longest requests ({ok}/8 answered): peak {served.peak_mb:.0f} MB = "
          f"{served.peak_mb / burst['peak_mb']:.2f}x the profile's burst figure, {served.peak_mb / BUDGET_MB:.2f}x "
          f"the budget; inputs cut to {burst['max_input_length']} of {burst['model_max_length']} tokens")


# One process per target, so each peak is that run's own (a parent's children's peak only ever grows).
WATCH = ("import resource, subprocess, sys\n"
         "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
         "last = (done.stderr.strip().splitlines() or [''])[-1]\n"
         "said = f'rc={done.returncode}' if done.returncode == 0 else f'exit {done.returncode}: {last}'\n"
         "print(said, file=sys.stderr)\n"
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


if __name__ == "__main__":
    main()
