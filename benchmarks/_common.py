"""Shared set-up for the benchmark scripts: workloads, a host, a model, an engine pool."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from autotune.host import default_probe  # noqa: E402
from autotune.runtime.model import build_default_model  # noqa: E402
from autotune.runtime.sessions import EnginePool  # noqa: E402
from autotune.workload.queries import Workload, load_workload, parse_workload  # noqa: E402

EXAMPLE = ROOT / "examples" / "queries.jsonl"


def example_workload() -> Workload:
    return load_workload(EXAMPLE)


def heavy_workload(queries: int = 4, candidates: int = 100, seed: int = 11) -> Workload:
    """>=100 candidates per query, documents from short facts up to ~300 tokens."""
    import make_queries as mq

    rng = random.Random(seed)
    short = [mq.render(*m) for m in mq.MEMORIES]
    long = [mq.render(*m) for m in mq.LONG_MEMORIES]
    lines = []
    for i, (query, _budget) in enumerate(mq.QUERIES[:queries]):
        docs = []
        for _ in range(candidates):
            kind = rng.random()
            if kind < 0.5:
                docs.append(rng.choice(short))
            elif kind < 0.8:
                docs.append(rng.choice(long))
            else:
                docs.append(" ".join(rng.sample(long, k=3)))  # about 300 tokens
        lines.append(json.dumps({"id": f"h{i}", "query": query, "budget": "high", "documents": docs}))
    return parse_workload(("\n".join(lines) + "\n").encode(), "heavy")


def longtail_workload(queries: int = 6, seed: int = 5) -> Workload:
    """Unseen by the defaults' authors: 10 to 40 candidates a query, mostly short, one document past 512
    tokens (truncated where the target truncates)."""
    import make_queries as mq

    rng = random.Random(seed)
    short = [mq.render(*m) for m in mq.MEMORIES]
    long = [mq.render(*m) for m in mq.LONG_MEMORIES]
    lines = []
    for i, (query, _budget) in enumerate(mq.QUERIES[-queries:]):
        docs = [rng.choice(short) if rng.random() < 0.75 else rng.choice(long) for _ in range(rng.randint(10, 40))]
        if i == queries // 2:
            docs[0] = " ".join(long * 3)  # far past 512 tokens
        lines.append(json.dumps({"id": f"t{i}", "query": query, "budget": "mid", "documents": docs}))
    return parse_workload(("\n".join(lines) + "\n").encode(), "longtail")


WORKLOADS = {"example": example_workload, "heavy": heavy_workload, "longtail": longtail_workload}


def host_line(host: object) -> str:
    """The host a benchmark's figures belong to: its CPU, cores, ISA, AMX and onnxruntime."""
    from autotune.analysis.summary import format_amx

    isa = ", ".join(k for k, v in host.isa.items() if v)  # type: ignore[attr-defined]
    return (f"host: {host.brand}, {host.cores.usable} usable cores, isa {isa}; "  # type: ignore[attr-defined]
            f"amx: {format_amx(host.amx)}; onnxruntime {host.onnxruntime}")  # type: ignore[attr-defined]


def setup() -> tuple[object, object, EnginePool]:
    host = default_probe().probe()
    bundle = build_default_model()
    return host, bundle, EnginePool(bundle, has_vnni=host.has_vnni)


def real_hindsight_setup() -> tuple[object, list[str]]:
    """For the benchmarks on a real Hindsight: refuse where PostgreSQL with pgvector is missing, print the
    host (its ISA: figures are this host's), and return it with the example's queries."""
    from tests.support.real_hindsight import pgvector_missing

    missing = pgvector_missing()
    if missing:
        raise SystemExit(f"cannot run a real Hindsight here: {missing}")
    host = default_probe().probe()
    print(host_line(host))
    return host, (ROOT / "examples" / "queries.txt").read_text().splitlines()


def tune_recording(work: Path, recording: Path, name: str, *extra: str) -> tuple[dict[str, str], str]:
    """`autotune run` on a recording, small (8 trials, 1 repeat, 2 final rounds): its `.env` block and its output."""
    from autotune.outputs.envfile import managed_values
    from tests.support.real_hindsight import cli

    status, out, err = cli("run", "--workload", str(recording), "--env-file", str(work / f"{name}.env"),
                           "--profile-dir", str(work / "profiles"), "--name", name, "--model-out",
                           str(work / "models" / name), "--no-compose", "--trials", "8", "--repeats", "1",
                           "--final-rounds", "2", *extra)
    if status != 0:
        raise SystemExit(f"autotune run ({name}) failed: {err.strip().splitlines()[-1]}")
    return managed_values(work / f"{name}.env"), out
