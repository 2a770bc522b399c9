"""Hardening round four (issue 50): special files where autotune reads a profile, a `.env` or a model, and the
`.env` values a profile may carry, each refused in one line with its documented exit status."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autotune.errors import ExitStatus
from tests.support.cli import FAST, one_line, run_in

SPECIAL = ["device", "fifo", "directory", "procfs"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, tiny_model_dir) -> Path:  # type: ignore[no-untyped-def]
    """One run on the tiny model in `work`: profiles/t.yaml, models/t/ and .env."""
    work = tmp_path_factory.mktemp("tuned")
    status, _, err = run_in(work, ["run", "--workload", str(work / "queries.jsonl"), "--model", str(tiny_model_dir),
                                   "--name", "t", *FAST, "--refine-rounds", "0"], chdir=True,
                            AUTOTUNE_CACHE_DIR=str(work / "cache"))
    assert status == ExitStatus.OK, err
    return work


def _special(kind: str, where: Path) -> Path:
    if kind == "device":
        return Path("/dev/zero")
    if kind == "procfs":
        return Path("/proc/self/mem")
    if kind == "directory":
        where.mkdir(parents=True, exist_ok=True)
        return where
    os.mkfifo(where)
    return where


def _copy(tuned: Path, tmp_path: Path) -> Path:
    work = tmp_path / "w"
    shutil.copytree(tuned, work, symlinks=True, ignore=shutil.ignore_patterns("state", "cache", "*.lock*"))
    return work


@pytest.mark.parametrize("kind", SPECIAL)
def test_check_refuses_a_profile_that_is_not_a_regular_file(tuned, tmp_path, kind):
    profile = _special(kind, tmp_path / "p.yaml")
    status, _, err = run_in(tmp_path, ["check", "--profile", str(profile)])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "profile" in err


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_apply_refuses_a_special_file_among_the_profiles(tuned, tmp_path, kind):
    work = _copy(tuned, tmp_path)
    planted = work / "profiles" / "zz.yaml"
    if kind == "device":
        planted.symlink_to("/dev/zero")
    else:
        os.mkfifo(planted)
    status, _, err = run_in(work, ["apply", "--profile-dir", "profiles"], chdir=True)
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "zz.yaml" in err


@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_an_env_file_that_is_not_a_regular_file_is_refused(tuned, tmp_path, kind):
    work = _copy(tuned, tmp_path)
    env = _special(kind, work / "special.env")
    status, _, err = run_in(work, ["check", "--profile", "profiles/t.yaml", "--env-file", str(env)], chdir=True)
    assert status == ExitStatus.IO_ERROR and one_line(err) and ".env file" in err


@pytest.mark.parametrize("kind", SPECIAL)
def test_a_model_path_that_is_not_a_regular_file_is_drift_not_a_crash(tuned, tmp_path, kind):
    work = _copy(tuned, tmp_path)
    target = _special(kind, work / "odd-model.onnx")
    with open(work / ".env", "a") as fh:
        fh.write(f"HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH={target}\n")
    status, out, err = run_in(work, ["check", "--profile", "profiles/t.yaml", "--env-file", ".env"], chdir=True)
    assert status == ExitStatus.DRIFT, err
    assert str(target) in out and ("not a regular file" in out or "cannot be read" in out) and not err.strip()


# ---- item 4: values Hindsight's parser accepts and then cannot run -------------------------------------------

P = "HINDSIGHT_API_RERANKER_"


def _edit_env(work: Path, key: str, value: str) -> None:
    import yaml

    from autotune.outputs.profile import render_profile

    path = work / "profiles" / "t.yaml"
    data = yaml.safe_load(path.read_text())
    data["env"][key] = value
    path.write_text(render_profile(data))


@pytest.mark.parametrize(("key", "value", "says"), [
    (f"{P}ONNX_MAX_TOKENS", "100000", "positions"),
    (f"{P}ONNX_THREADS", "1024", "cores usable"),
    (f"{P}ONNX_BATCH_SIZE", "4096", "configuration"),
])
def test_apply_refuses_env_values_the_host_or_model_cannot_run(tuned, tmp_path, key, value, says):
    work = _copy(tuned, tmp_path)
    before = (work / ".env").read_bytes()
    status, _, err = run_in(work, ["apply", "--profile", "profiles/t.yaml", "--env-file", ".env", "--force"],
                            chdir=True)
    assert status == ExitStatus.OK, err  # the profile as the run wrote it applies
    _edit_env(work, key, value)
    before = (work / ".env").read_bytes()
    status, _, err = run_in(work, ["apply", "--profile", "profiles/t.yaml", "--env-file", ".env", "--force"],
                            chdir=True)
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and key in err and says in err
    assert (work / ".env").read_bytes() == before


@pytest.mark.parametrize(("key", "value"), [(f"{P}ONNX_MAX_TOKENS", "100000"), (f"{P}ONNX_THREADS", "1024")])
def test_check_reports_env_values_the_host_or_model_cannot_run(tuned, tmp_path, key, value):
    work = _copy(tuned, tmp_path)
    with open(work / ".env", "a") as fh:
        fh.write(f"{key}={value}\n")  # set by the user, outside autotune's block: what Hindsight runs with
    status, out, _ = run_in(work, ["check", "--profile", "profiles/t.yaml", "--env-file", ".env"], chdir=True)
    assert status == ExitStatus.DRIFT and key in out


# ---- items 7-9: a TEI URL parsed as one; names and paths that become .env values; clean errors --------------


@pytest.mark.parametrize("url", ["http://:8080", "http://h:99999", "http://h:8080,http://i"])
def test_run_refuses_a_tei_url_that_is_no_url(tmp_path, url):
    status, _, err = run_in(tmp_path, ["run", "--target", "tei", "--tei-url", url, "--workload",
                                       str(tmp_path / "queries.jsonl")])
    assert status == ExitStatus.BAD_OPTIONS and "--tei-url" in err and "Traceback" not in err


@pytest.mark.parametrize(("field", "value"), [("name", "a\\b"), ("name", "a\0b"), ("model.dir", "models/a\\b"),
                                              ("model.dir", "models/x\0y")])
def test_apply_refuses_a_name_or_dir_the_env_would_read_two_ways(tuned, tmp_path, field, value):
    import yaml

    from autotune.outputs.profile import render_profile

    work = _copy(tuned, tmp_path)
    path = work / "profiles" / "t.yaml"
    data = yaml.safe_load(path.read_text())
    if field == "name":
        data["name"] = value
    else:
        data["model"]["dir"] = value
    path.write_text(render_profile(data))
    before = (work / ".env").read_bytes()
    status, _, err = run_in(work, ["apply", "--profile", "profiles/t.yaml", "--env-file", ".env", "--force"],
                            chdir=True)
    assert status == ExitStatus.BAD_OPTIONS and one_line(err), err
    assert (work / ".env").read_bytes() == before and not (work / "models" / "a\\b").exists()


@pytest.mark.parametrize("matmuls", ["abc", float("inf"), -3, True])
def test_a_bad_int8_variant_is_one_line(matmuls):
    from autotune.errors import ModelError
    from autotune.runtime.quantize import Int8Variant

    with pytest.raises(ModelError, match=r"int8_variant\.matmuls"):
        Int8Variant.from_dict({"scales": "per-token", "fp32_nodes": [], "matmuls": matmuls})


def test_an_unquoted_yaml_boolean_is_the_keys_boolean(tuned, tmp_path):
    """Item 12: `ONNX_CPU_MEM_ARENA: false` (a YAML boolean) was refused with "must be true or false"."""
    import yaml

    work = _copy(tuned, tmp_path)
    path = work / "profiles" / "t.yaml"
    data = yaml.safe_load(path.read_text())
    key = f"{P}ONNX_CPU_MEM_ARENA"
    written = data["env"][key]
    _edit_env(work, key, written == "true")  # type: ignore[arg-type]
    assert f"{key}: {written}\n" in path.read_text()  # unquoted: YAML reads a boolean
    status, _, err = run_in(work, ["apply", "--profile", "profiles/t.yaml", "--env-file", ".env", "--force"],
                            chdir=True)
    assert status == ExitStatus.OK, err
    assert f"{key}={written}\n" in (work / ".env").read_text()
