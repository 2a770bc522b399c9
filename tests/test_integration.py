"""The user's paths on the real embedded default: run for Hindsight's in-process onnx provider (the
default), and run for the tei sidecar, then serve what that run wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.support.http import wait_healthy

ROOT = Path(__file__).resolve().parent.parent


def _autotune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _tune(work: Path, *extra: str, env: str = "") -> Path:
    lines = (ROOT / "examples" / "queries.jsonl").read_text().splitlines()[:3]
    (work / "queries.jsonl").write_text("\n".join(lines) + "\n")
    (work / ".env").write_text("HINDSIGHT_DB_PASSWORD=hunter2\n" + env)
    result = _autotune("run", "--workload", "queries.jsonl", "--trials", "6", "--repeats", "1",
                       "--final-rounds", "2", *extra, cwd=work)
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    if "local" in extra:  # a stock CrossEncoder: the default's stand-in-head form, said as such
        assert "rankings are not meaningful" in result.stdout
    else:  # issue 31: the default says what it is, and no stand-in warning
        assert "scored as a bi-encoder inside a cross-encoder graph" in result.stdout
        assert "stand-in" not in result.stdout + result.stderr
    (work / "run.out").write_text(result.stdout + result.stderr)
    return work


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the user's own TEI_MAX_CONCURRENT: the search runs under it, and the block leaves it to them
    return _tune(tmp_path_factory.mktemp("user-tei"), "--target", "tei",
                 env="HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT=3\n")


@pytest.fixture(scope="module")
def tuned_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tune(tmp_path_factory.mktemp("user-onnx"))


def _check(work: Path) -> None:
    check = _autotune("check", "--profile", str(next((work / "profiles").glob("*.yaml"))), "--env-file", ".env",
                      cwd=work)
    assert check.returncode == 0, check.stdout + check.stderr


def test_run_on_the_embedded_default_targets_hindsights_onnx_provider(tuned_onnx):
    profile = yaml.safe_load(next((tuned_onnx / "profiles").glob("*.yaml")).read_text())
    assert profile["target"] == "onnx" and "bi-encoder" in profile["model"]["scoring"]
    assert "trained_head" not in profile["model"]
    assert profile["metrics"]["p95_ms"] <= profile["metrics"]["baseline_p95_ms"]
    assert profile["parity"]["passed"]
    env = (tuned_onnx / ".env").read_text()
    assert env.startswith("HINDSIGHT_DB_PASSWORD=hunter2\n")
    assert "HINDSIGHT_API_RERANKER_PROVIDER=onnx" in env and "TEI" not in env
    model_dir = tuned_onnx / "models" / profile["name"]
    assert (model_dir / "model.onnx").exists() and (model_dir / "tokenizer.json").exists()
    _check(tuned_onnx)


def test_hindsight_loads_the_emitted_default_and_scores_like_autotune(tuned_onnx, monkeypatch):
    pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")
    from autotune.host import default_probe
    from autotune.outputs.envfile import managed_values
    from autotune.outputs.profile import load_profile, profile_config
    from autotune.runtime.model import load_model_dir
    from autotune.runtime.targets import get_target
    from tests.support.hindsight_classes import assert_same_scores, hindsight_scores

    profile = load_profile(next((tuned_onnx / "profiles").glob("*.yaml")))
    theirs = hindsight_scores(managed_values(tuned_onnx / ".env"), tuned_onnx / "queries.jsonl", monkeypatch)
    host = default_probe().probe()
    pool = get_target("onnx").pool(load_model_dir(tuned_onnx / "models" / profile["name"]), has_vnni=host.has_vnni,
                                   usable_cores=host.cores.usable)
    engine = pool.engine(profile_config(profile))
    queries = [json.loads(line) for line in (tuned_onnx / "queries.jsonl").read_text().splitlines()]
    ours = [engine.score(q["query"], [d if isinstance(d, str) else d["text"] for d in q["documents"]]).raw
            for q in queries]
    assert_same_scores(ours, theirs, atol=1e-5)


def test_run_for_the_tei_sidecar(tuned):
    profile = yaml.safe_load(next((tuned / "profiles").glob("*.yaml")).read_text())
    assert profile["model"]["ref"] == "default" and profile["target"] == "tei"
    assert profile["metrics"]["p95_ms"] <= profile["metrics"]["baseline_p95_ms"]
    env = (tuned / ".env").read_text()
    assert "HINDSIGHT_API_RERANKER_PROVIDER=tei" in env
    assert (tuned / "compose.autotune.yaml").exists()
    _check(tuned)


def test_the_tei_run_tunes_under_hindsights_load_and_sizes_its_client(tuned):
    from autotune.outputs.envfile import managed_values

    profile = yaml.safe_load(next((tuned / "profiles").glob("*.yaml")).read_text())
    out = (tuned / "run.out").read_text()
    load = profile["load"]
    assert load["concurrency"] == 3 and "under 3 concurrent recalls" in out
    assert set(load["throughput_pairs_per_s"]) == {"1", "3"} and load["p95_ms_single"] > 0
    assert load["p95_ms_loaded"] == profile["metrics"]["p95_ms"]
    block = managed_values(tuned / ".env")
    assert "HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT" not in block  # the user's value is kept
    assert "HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT is already set outside" in out
    assert int(block["HINDSIGHT_API_RERANKER_TEI_HTTP_TIMEOUT"]) >= 30
    assert block["AUTOTUNE_WORKERS"] == str(profile["config"]["workers"])
    config, usable = profile["config"], profile["host"]["cores"]["usable"]
    assert config["workers"] * (config["intra_op_threads"] or usable) <= usable
    assert "unsafe" not in out  # 3 in flight fit in the measured time-out
    compose = yaml.safe_load((tuned / "compose.autotune.yaml").read_text())
    reranker = compose["services"]["reranker"]
    assert reranker["cpus"] == profile["host"]["cores"]["usable"]
    assert "autotune check --profile" in reranker["command"][0] and reranker["entrypoint"] == ["sh", "-c"]


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
        wait_healthy(url, proc)
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
