"""Issue 35, item 4: the fleet flow keeps the model. `apply` on a node without the model directory rebuilds it
from the profile's recipe, in a fresh cache, byte-identical to what the run emitted, or says what to ship."""

from __future__ import annotations

import shutil

import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.fileio import sha256_file
from tests.support.cli import run_cli


def test_apply_on_a_second_node_rebuilds_a_byte_identical_model(tmp_path, tiny_model_dir, workload_file,
                                                                 monkeypatch):
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    node_a.mkdir()
    node_b.mkdir()
    monkeypatch.chdir(node_a)
    status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--name", "n",
                              "--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"])
    assert status == ExitStatus.OK, err
    profile = yaml.safe_load((node_a / "profiles" / "n.yaml").read_text())
    # node B: the committed profile, no models/, a cache of its own
    (node_b / "profiles").mkdir()
    shutil.copyfile(node_a / "profiles" / "n.yaml", node_b / "profiles" / "n.yaml")
    monkeypatch.chdir(node_b)
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache-b"))
    status, out, err = run_cli(["apply", "--profile", "profiles/n.yaml", "--env-file", ".env"])
    assert status == ExitStatus.OK, err
    rebuilt = node_b / "models" / "n" / "model.onnx"
    assert sha256_file(rebuilt) == profile["model"]["emitted_sha256"] and "rebuilt" in out
    assert run_cli(["check", "--profile", "profiles/n.yaml"])[0] == ExitStatus.OK


@pytest.mark.parametrize("graph", ["plain", "fused"])
def test_the_default_builds_byte_identical_graphs_in_fresh_caches(tmp_path, monkeypatch, graph):
    """What a rebuild of the embedded default rests on: its builder and its fused rebuild are deterministic."""
    from autotune.runtime.engine import BASELINE
    from autotune.runtime.model import build_default_model
    from autotune.runtime.sessions import EnginePool

    config = BASELINE if graph == "plain" else BASELINE.__class__(**{**BASELINE.to_dict(), "graph": "fused"})
    shas = []
    for cache in ("one", "two"):
        monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / cache))
        shas.append(sha256_file(EnginePool(build_default_model(), has_vnni=False).model_path(config)))
    assert shas[0] == shas[1]


def test_a_rebuild_that_differs_says_what_to_ship_and_writes_nothing(tmp_path, tiny_model_dir, workload_file,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--name", "n",
                    "--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"])[0] == 0
    profile = yaml.safe_load((tmp_path / "profiles" / "n.yaml").read_text())
    profile["model"]["emitted_sha256"] = "0" * 64  # as if another onnxruntime had built it
    profile["model"]["files"]["model.onnx"] = "0" * 64
    (tmp_path / "profiles" / "n.yaml").write_text("# autotune profile\n" + yaml.safe_dump(profile))
    shutil.rmtree(tmp_path / "models")
    status, _, err = run_cli(["apply", "--profile", "profiles/n.yaml", "--env-file", "other.env"])
    assert status == ExitStatus.BAD_OPTIONS and "copy the model directory from the host" in err and "models/n/" in err
    assert not (tmp_path / "models" / "n").exists() and not (tmp_path / "other.env").exists()
