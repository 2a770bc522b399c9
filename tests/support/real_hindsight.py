"""A real Hindsight 1.1.0 API, offline: the harness the integration test and `benchmarks/real_hindsight.py` share.

PostgreSQL is Debian's 15, with pgvector built from Debian's source package by
`.ci/install-pgvector` (the PyPI bundles tried either lack pg_trgm, which Hindsight's migrations
need, or ship a pgvector built for newer CPUs that dies with SIGILL on AVX2 hosts). It runs as
the `postgres` user in a temp dir on a free loopback port. Embeddings run on Hindsight's own
`onnx` provider over an encoder built from the embedded default's weights;
`HINDSIGHT_API_LLM_PROVIDER=none` stores memories verbatim. Every address is loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

READY_TIMEOUT_S = 240
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def pgvector_missing() -> str | None:
    """Why a real Hindsight cannot run here, or None."""
    if not (PG_BIN / "initdb").exists():
        return "Debian's postgresql-15 is absent (.ci/install-pgvector installs it)"
    if not (PG_BIN.parent / "lib" / "vector.so").exists():
        return "pgvector is not built for PostgreSQL 15 (.ci/install-pgvector builds it from Debian's source)"
    try:
        import hindsight_api  # noqa: F401
    except ImportError:
        return "Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')"
    return None


class Postgres:
    """Debian's PostgreSQL 15 in a temp dir, as the `postgres` user when we are root."""

    def __init__(self, extensions: tuple[str, ...] = ("vector", "pg_trgm", "btree_gin")) -> None:
        import tempfile

        # Its own directory: the `postgres` user cannot enter the caller's private temp dirs.
        directory = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
        os.chmod(directory, 0o755)
        self.directory = directory
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        self._run(PG_BIN / "initdb", "-D", str(directory / "data"), "-A", "trust", "-U", "postgres", "--no-sync")
        self._run(PG_BIN / "pg_ctl", "-D", str(directory / "data"), "-l", str(directory / "postgres.log"), "-w",
                  "-o", f"-p {self.port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        for extension in extensions:
            self.sql(f"CREATE EXTENSION IF NOT EXISTS {extension};")

    def _run(self, *args: object) -> str:
        cmd = [str(a) for a in args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cmd[-1]).name}: {done.stderr.strip()[-400:]}")
        return done.stdout

    def sql(self, statement: str) -> str:
        return self._run(PG_BIN / "psql", "-h", "127.0.0.1", "-p", self.port, "-U", "postgres", "-d", "postgres",
                         "-v", "ON_ERROR_STOP=1", "-c", statement)

    @property
    def uri(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run(PG_BIN / "pg_ctl", "-D", str(self.directory / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def real_hindsight_or_skip(workdir: Path) -> Iterator[RealHindsight]:
    """A test's real Hindsight: skipped with the reason where one cannot run here, closed however the test ends."""
    import pytest

    missing = pgvector_missing()
    if missing:
        pytest.skip(f"a real Hindsight cannot run here: {missing}")
    h = RealHindsight(workdir)
    try:
        yield h
    finally:
        h.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_embedding_model(directory: Path) -> Path:
    """The embedded default's encoder, exposing last_hidden_state for Hindsight's mean pooling."""
    import onnx
    from safetensors.numpy import load_file

    from autotune.runtime.bert_onnx import build_bert_cross_encoder
    from autotune.runtime.model import default_weights_dir

    src = default_weights_dir()
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "model.onnx").exists():
        config = json.loads((src / "config.json").read_text())
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, _ = build_bert_cross_encoder(load_file(str(src / "model.safetensors")), config,
                                                hidden_state_output=True)
        onnx.save_model(model, str(directory / "model.onnx"))
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
            if (src / name).exists():
                shutil.copyfile(src / name, directory / name)
    return directory


class RealHindsight:
    """Starts PostgreSQL once; starts, stops and restarts the API with a given reranker environment."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.pg = Postgres()
        self.embeddings = build_embedding_model(workdir / "embeddings")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None
        self.log = workdir / "hindsight.log"

    def base_env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("HINDSIGHT_", "OMP_NUM_THREADS"))}
        return {
            **keep,
            "HINDSIGHT_API_DATABASE_URL": self.pg.uri,
            "HINDSIGHT_API_HOST": "127.0.0.1",
            "HINDSIGHT_API_PORT": str(self.port),
            "HINDSIGHT_API_LLM_PROVIDER": "none",
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "onnx",
            "HINDSIGHT_API_EMBEDDINGS_ONNX_MODEL_PATH": str(self.embeddings / "model.onnx"),
            "HINDSIGHT_API_EMBEDDINGS_ONNX_TOKENIZER_NAME_OR_PATH": str(self.embeddings),
            "HINDSIGHT_API_EMBEDDINGS_ONNX_OUTPUT_NAME": "last_hidden_state",
            "HINDSIGHT_API_EMBEDDINGS_ONNX_POOLING": "mean",
            "HINDSIGHT_API_EMBEDDINGS_ONNX_DIMENSIONS": "384",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }

    def start(self, reranker_env: Mapping[str, str]) -> str:
        self.stop()
        env = {**self.base_env(), **reranker_env}
        log = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen([sys.executable, "-m", "hindsight_api.main"], env=env, stdout=log,
                                     stderr=subprocess.STDOUT, text=True, cwd=self.workdir)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hindsight-api exited with {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(f"{self.url}/version", timeout=2).status_code == 200:
                    return self.url
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"hindsight-api did not answer within {READY_TIMEOUT_S} s: {self.tail()}")

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        self.pg.stop()

    def retain(self, bank: str, memories: list[dict[str, Any]], *, batch: int = 50) -> None:
        with httpx.Client(base_url=self.url, timeout=300) as client:
            for lo in range(0, len(memories), batch):
                resp = client.post(f"/v1/default/banks/{bank}/memories",
                                   json={"items": memories[lo:lo + batch], "async": False})
                if resp.status_code != 200:
                    raise RuntimeError(f"retain answered {resp.status_code}: {resp.text[:300]}")


def memories(n: int = 240, seed: int = 3) -> list[dict[str, Any]]:
    """A few hundred memories of mixed length, from the example's; each has a timestamp (an event date)
    that Hindsight 1.1 does not turn into occurred_start when no LLM extracts facts."""
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import make_queries as mq

    rng = random.Random(seed)
    base = mq.MEMORIES + mq.LONG_MEMORIES
    out = []
    for i in range(n):
        date, context, text = base[i % len(base)]
        if i >= len(base):
            other = base[rng.randrange(len(base))][2]
            text = f"{text} {other}" if i % 3 else f"{text} (noted again, {i})"
        item: dict[str, Any] = {"content": text, "document_id": f"memory-{i}"}
        if context:
            item["context"] = context
        item["timestamp"] = f"{date or '2025-01-15'}T09:00:00Z"
        out.append(item)
    return out


def onnx_defaults(model_dir: Path) -> dict[str, str]:
    """Hindsight 1.1's onnx provider at its defaults, on the given model: the state before tuning."""
    return {"HINDSIGHT_API_RERANKER_PROVIDER": "onnx",
            "HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH": str(model_dir / "model.onnx"),
            "HINDSIGHT_API_RERANKER_ONNX_TOKENIZER_NAME_OR_PATH": str(model_dir)}


def cli(*args: str) -> tuple[int, str, str]:
    """`autotune ARGS` in a process of its own, as a user runs it. In the test process its memory budget was
    measured against pytest's own RSS, which a full suite grows past 1.5 GB: every configuration was refused."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True, env=env)
    return done.returncode, done.stdout, done.stderr


def cutover_flow(h: RealHindsight, work: Path, *, queries: list[str], budget: str = "mid", trials: int = 6,
                 memories_n: int = 240, bad_batch: int = 256, rounds: int = 3,
                 precisions: str | None = None, run_args: Sequence[str] = ()) -> dict[str, Any]:
    """retain -> record -> self-check -> run -> cut over -> verify; then a deliberately bad cutover -> verify.
    `precisions` narrows the run's (`int8`: the cutover hands Hindsight the int8 model); `run_args` are added."""
    from autotune.gates.selfcheck import check_recording
    from autotune.outputs.envfile import managed_values
    from autotune.runtime.model import build_default_model
    from autotune.workload.queries import load_workload

    work.mkdir(parents=True, exist_ok=True)
    qfile = work / "queries.txt"
    qfile.write_text("\n".join(queries) + "\n")
    url = h.start(onnx_defaults(build_default_model().directory))
    h.retain("autotune-test", memories(memories_n))
    out: dict[str, Any] = {"work": work}

    def record(name: str) -> Path:
        path = work / name
        status, stdout, stderr = cli("record", "--url", url, "--bank", "autotune-test", "--queries", str(qfile),
                                     "--budget", budget, "-o", str(path), "--model", "default")
        assert status == 0, stderr
        out[f"{name}:stdout"] = stdout
        return path

    before = record("before.jsonl")
    recorded = load_workload(before)
    out["candidates"] = [len(q.documents) for q in recorded.queries]
    out["self_check"] = check_recording(recorded.queries, None)
    env = work / ".env"
    status, stdout, stderr = cli("run", "--workload", str(before), "--env-file", str(env), "--profile-dir",
                                 str(work / "profiles"), "--model-out", str(work / "models" / "tuned"), "--name",
                                 "tuned", "--no-compose", "--trials", str(trials), "--repeats", "1",
                                 "--final-rounds", "2", *(("--precisions", precisions) if precisions else ()),
                                 *run_args)
    assert status == 0, stderr
    out["run:stdout"] = stdout
    tuned = managed_values(env)
    out["tuned_env"] = tuned
    h.start(tuned)  # the cutover: Hindsight restarted with the generated .env and nothing else changed
    out["verify"] = cli("verify", "--url", url, "--bank", "autotune-test", "--queries", str(qfile), "--budget",
                        budget, "--before", str(before), "--profile", str(work / "profiles" / "tuned.yaml"),
                        "--rounds", str(rounds))
    after = record("after.jsonl")
    # bad whatever the run chose: the fp32 model (an int8 pick at batch 256 once came out 1.18x faster than the
    # tuned one), one thread, a batch as large as the pools
    bad = {**tuned, **onnx_defaults(build_default_model().directory),
           "HINDSIGHT_API_RERANKER_ONNX_BATCH_SIZE": str(bad_batch), "HINDSIGHT_API_RERANKER_ONNX_THREADS": "1",
           "HINDSIGHT_API_RERANKER_ONNX_CPU_MEM_ARENA": "false"}
    h.start(bad)
    out["verify_bad"] = cli("verify", "--url", url, "--bank", "autotune-test", "--queries", str(qfile), "--budget",
                            budget, "--before", str(after), "--rounds", str(rounds))
    return out
