"""The user's path on the real embedded default: run, then serve what run wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _autotune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("user")
    lines = (ROOT / "examples" / "queries.jsonl").read_text().splitlines()[:3]
    (work / "queries.jsonl").write_text("\n".join(lines) + "\n")
    (work / ".env").write_text("HINDSIGHT_DB_PASSWORD=hunter2\n")
    result = _autotune("run", "--workload", "queries.jsonl", "--trials", "6", "--repeats", "1",
                       "--final-rounds", "2", cwd=work)
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    assert "rankings are not meaningful" in result.stdout
    return work


def test_run_on_the_embedded_default(tuned):
    profile = yaml.safe_load(next((tuned / "profiles").glob("*.yaml")).read_text())
    assert profile["model"]["ref"] == "default" and profile["model"]["trained_head"] is False
    assert profile["metrics"]["p95_ms"] <= profile["metrics"]["baseline_p95_ms"]
    assert profile["parity"]["passed"]
    env = (tuned / ".env").read_text()
    assert env.startswith("HINDSIGHT_DB_PASSWORD=hunter2\n")
    assert "HINDSIGHT_API_RERANKER_PROVIDER=tei" in env
    assert (tuned / "compose.autotune.yaml").exists()
    check = _autotune("check", "--profile", str(next((tuned / "profiles").glob("*.yaml"))), "--env-file", ".env",
                      cwd=tuned)
    assert check.returncode == 0, check.stdout + check.stderr


def test_serve_what_run_wrote(tuned):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--env-file", ".env", "--port", str(port)],
                            cwd=tuned, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE,
                            text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.3)
        info = httpx.get(url + "/info").json()
        assert info["model_dtype"] in ("float32", "int8") and info["max_client_batch_size"] >= 300
        query = json.loads((tuned / "queries.jsonl").read_text().splitlines()[0])
        ranks = httpx.post(url + "/rerank", json={"query": query["query"], "texts": query["documents"],
                                                  "return_text": False}, timeout=60).json()
        assert sorted(r["index"] for r in ranks) == list(range(len(query["documents"])))
        assert all(0.0 <= r["score"] <= 1.0 for r in ranks)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
