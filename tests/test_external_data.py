"""A model whose weights lie outside its graph, as every reranker past 2 GB does (issue 52), through the user's
whole path: run, the emitted model directory, `check`, `apply` on a node that has none of it, and `serve`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.ownership import MODEL_MARKER
from autotune.runtime.onnx_files import data_files
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings
from tests.support.cli import FAST, run_in
from tests.support.corpus import DOCS
from tests.support.http import LiveServer

QUERIES = "".join(json.dumps({"query": q, "documents": DOCS[i:] + DOCS[:i]}) + "\n"
                  for i, q in enumerate(["what is the capital of france", "who is allergic", "tell me about rivers"]))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory, external_model_dir: Path) -> Path:
    work = tmp_path_factory.mktemp("external-run")
    (work / "queries.jsonl").write_text(QUERIES)
    status, out, err = run_in(work, ["run", "--model", str(external_model_dir), "--workload", "queries.jsonl",
                                     *FAST, "--precisions", "int8"], chdir=True)  # the rewrites, and apply redoing them
    assert status == 0, out + err
    return work


def _profile(work: Path) -> Path:
    return next((work / "profiles").glob("*.yaml"))


def test_the_emitted_model_carries_its_data_file_and_the_profile_hashes_it(tuned):
    profile = yaml.safe_load(_profile(tuned).read_text())
    emitted = tuned / profile["model"]["dir"]
    assert sorted(profile["model"]["files"]) == sorted(p.name for p in emitted.iterdir()
                                                       if p.name != MODEL_MARKER)
    assert "model.onnx_data" in profile["model"]["files"]
    assert [p.name for p in data_files(emitted / "model.onnx")] == ["model.onnx_data"]
    assert profile["config"]["precision"] == "int8" and profile["model"]["int8_variant"]
    env = (tuned / ".env").read_text()
    assert f"HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH={emitted.resolve() / 'model.onnx'}" in env or \
        "model.onnx" in env


def test_check_passes_then_fails_on_one_byte_of_the_data_file(tuned):
    args = ["check", "--profile", str(_profile(tuned)), "--env-file", ".env"]
    status, out, err = run_in(tuned, args, chdir=True)
    assert status == 0, out + err
    data = next(tuned.glob("models/*/model.onnx_data"))
    whole = data.read_bytes()
    blob = bytearray(whole)
    blob[len(blob) // 2] ^= 1
    data.write_bytes(bytes(blob))
    try:
        status, out, err = run_in(tuned, args, chdir=True)
    finally:
        data.write_bytes(whole)
    assert status == ExitStatus.DRIFT, out + err
    assert "model.onnx_data" in out + err


def test_apply_on_a_fresh_node_rebuilds_both_files(tuned, tmp_path):
    node = tmp_path / "node"
    node.mkdir()
    shutil.copytree(tuned / "profiles", node / "profiles")
    status, out, err = run_in(node, ["apply", "--profile", str(_profile(node)), "--env-file", ".env"], chdir=True)
    assert status == 0, out + err
    profile = yaml.safe_load(_profile(node).read_text())
    emitted = node / profile["model"]["dir"]
    assert (emitted / "model.onnx_data").read_bytes() == (tuned / profile["model"]["dir"] / "model.onnx_data"
                                                          ).read_bytes()
    status, out, err = run_in(node, ["check", "--profile", str(_profile(node)), "--env-file", ".env"], chdir=True)
    assert status == 0, out + err


def test_serve_scores_the_external_model_at_the_profiles_configuration(tuned, external_model_dir):
    from autotune.outputs.profile import profile_config

    profile = yaml.safe_load(_profile(tuned).read_text())
    service = RerankService(ServeSettings(config=profile_config(profile), model=str(external_model_dir)),
                            has_vnni=True)
    with LiveServer(service) as live:
        answer = httpx.post(live.url + "/rerank", timeout=120, json={"query": "who is allergic", "texts": DOCS[:4]})
    assert answer.status_code == 200, answer.text
    assert sorted(item["index"] for item in answer.json()) == [0, 1, 2, 3]


def test_compose_mounts_the_directory_that_holds_both_files(tuned, tmp_path):
    work = tmp_path / "compose"
    shutil.copytree(tuned, work, symlinks=True)
    status, out, err = run_in(work, ["compose", "--profile", str(_profile(work)), "--model-path-in-container",
                                     "/models/reranker"], chdir=True)
    assert status == 0, out + err
    hindsight = next(s for s in yaml.safe_load((work / "compose.autotune.yaml").read_text())["services"].values()
                     if s.get("volumes"))
    source, target, mode = hindsight["volumes"][0].rsplit(":", 2)
    assert target == "/models/reranker" and mode == "ro"
    mounted = (work / source).resolve() if not Path(source).is_absolute() else Path(source)
    assert {"model.onnx", "model.onnx_data"} <= {p.name for p in mounted.iterdir()}
    env = yaml.safe_load((work / "compose.autotune.yaml").read_text())
    assert "env_file" in json.dumps(env)
