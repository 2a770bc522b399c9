"""`apply`: a committed profile on another host of its type writes what `run` wrote there; a host whose
probe differs (the AUTOTUNE_PROBE_FILE seam) is refused with exit 6."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.envfile import managed_values
from tests.support.cli import run_cli, run_in
from tests.support.hosts import AVX2_HOST, VNNI_HOST


def probe_file(tmp_path: Path, host, name: str) -> Path:  # type: ignore[no-untyped-def]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(host.to_dict()))
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, tiny_model_dir):  # type: ignore[no-untyped-def]
    """One `run --target tei` on an AVX2 host, its profile committed in profiles/."""
    work = tmp_path_factory.mktemp("fleet")
    status, _out, err = run_in(work, ["run", "--workload", str(work / "queries.jsonl"), "--model", str(tiny_model_dir),
                                      "--target", "tei", "--trials", "4", "--repeats", "1", "--final-rounds", "2",
                                      "--refine-rounds", "0", "--concurrency", "2", "--env-file", str(work / "run.env"),
                                      "--profile-dir", str(work / "profiles"), "--name", "avx2-node",
                                      "--compose-file", str(work / "run.compose.yaml")],
                               AUTOTUNE_PROBE_FILE=str(probe_file(work, AVX2_HOST, "avx2")))
    assert status == ExitStatus.OK, err
    return work


def test_apply_on_a_matching_host_writes_the_block_run_wrote(tuned, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe_file(tmp_path, AVX2_HOST, "same")))
    env = tmp_path / ".env"
    env.write_text("HINDSIGHT_API_LLM_PROVIDER=none\n")
    status, out, err = run_cli(["apply", "--profile", str(tuned / "profiles" / "avx2-node.yaml"), "--env-file",
                                str(env), "--compose-file", str(tmp_path / "compose.autotune.yaml")])
    assert status == ExitStatus.OK, err
    assert managed_values(env) == managed_values(tuned / "run.env")
    assert env.read_text().startswith("HINDSIGHT_API_LLM_PROVIDER=none\n")  # the user's lines are kept
    assert yaml.safe_load((tmp_path / "compose.autotune.yaml").read_text()) == yaml.safe_load(
        (tuned / "run.compose.yaml").read_text().replace(str(tuned / "run.env"), str(env)))
    # the profiles directory picks the profile tuned on this host type
    status, out, err = run_cli(["apply", "--profile-dir", str(tuned / "profiles"), "--env-file",
                                str(tmp_path / "picked.env")])
    assert status == ExitStatus.OK and "avx2-node.yaml" in out, err
    assert managed_values(tmp_path / "picked.env") == managed_values(tuned / "run.env")


def test_apply_on_an_unlike_host_refuses_with_exit_6_and_writes_nothing(tuned, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe_file(tmp_path, VNNI_HOST, "vnni")))
    env = tmp_path / ".env"
    status, out, err = run_cli(["apply", "--profile", str(tuned / "profiles" / "avx2-node.yaml"), "--env-file",
                                str(env)])
    assert status == ExitStatus.DRIFT and not env.exists()
    assert "avx512_vnni" in err and "usable cores" in err and "--force" in err
    status, out, err = run_cli(["apply", "--profiles-dir", str(tuned / "profiles"), "--env-file", str(env)])
    assert status == ExitStatus.DRIFT and not env.exists()
    assert "closest is avx2-node.yaml" in err and "usable cores" in err
    status, out, err = run_cli(["apply", "--profile", str(tuned / "profiles" / "avx2-node.yaml"), "--env-file",
                                str(env), "--force"])
    assert status == ExitStatus.OK and "drift (forced)" in out
    assert managed_values(env) == managed_values(tuned / "run.env")


def test_two_profiles_of_this_host_type_are_refused_naming_both(tuned, tmp_path, monkeypatch):
    """Issue 46, item 13: the first alphabetically was taken without a word."""
    import shutil

    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe_file(tmp_path, AVX2_HOST, "same")))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name in ("a-node.yaml", "b-node.yaml"):
        shutil.copyfile(tuned / "profiles" / "avx2-node.yaml", profiles / name)
    status, _, err = run_cli(["apply", "--profile-dir", str(profiles), "--env-file", str(tmp_path / ".env")])
    assert status == ExitStatus.BAD_OPTIONS and "a-node.yaml, b-node.yaml" in err and "--profile" in err, err
    assert not (tmp_path / ".env").exists()
