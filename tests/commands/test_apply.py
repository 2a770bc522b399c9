"""`autotune apply` as a command: what it refuses before writing (applying itself: tests/outputs/test_apply.py)."""

from __future__ import annotations

from autotune.errors import ExitStatus
from autotune.host import HostProbe
from autotune.outputs.profile import write_profile
from autotune.runtime.engine import EngineConfig
from tests.support.cli import one_line, run_cli
from tests.support.hosts import profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


def test_it_needs_one_profile_or_one_directory(tmp_path):
    assert run_cli(["apply"])[0] == ExitStatus.BAD_OPTIONS
    status, _, err = run_cli(["apply", "--profile", "a.yaml", "--profile-dir", str(tmp_path)])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "not allowed with" in err, err


def test_an_env_file_that_is_a_directory_is_refused_and_nothing_is_written(tmp_path, tiny_model_dir):
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    (tmp_path / "envdir").mkdir()
    status, out, err = run_cli(["apply", "--profile", str(path), "--env-file", str(tmp_path / "envdir"),
                                "--compose-file", str(tmp_path / "compose.yaml")])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "is a directory" in err, err
    assert out == "" and not (tmp_path / "compose.yaml").exists() and list((tmp_path / "envdir").iterdir()) == []


def test_an_empty_profile_directory_is_one_line(tmp_path):
    status, _, err = run_cli(["apply", "--profile-dir", str(tmp_path), "--env-file", str(tmp_path / ".env")])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "holds no profiles" in err, err
    assert not (tmp_path / ".env").exists()
