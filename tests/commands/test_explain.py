"""`autotune explain` as a command: what it refuses before measuring anything (its output: test_bench.py)."""

from __future__ import annotations

import pytest

from autotune.errors import ExitStatus
from autotune.host import HostProbe
from autotune.outputs.profile import write_profile
from autotune.runtime.engine import EngineConfig
from tests.support.cli import one_line, run_cli
from tests.support.hosts import AVX2_HOST, VNNI_HOST, profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


@pytest.mark.parametrize("rounds", ["0", "-2", "x"])
def test_rounds_must_be_a_positive_whole_number(tmp_path, tiny_model_dir, workload_file, rounds):
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    status, out, err = run_cli(["explain", "--profile", str(path), "--workload", str(workload_file),
                                "--rounds", rounds])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "--rounds" in err, err
    assert out == ""


def test_another_hosts_profile_is_drift_unless_forced(tmp_path, tiny_model_dir, workload_file, monkeypatch):
    probe = tmp_path / "host.json"
    probe.write_text(__import__("json").dumps(AVX2_HOST.to_dict()))
    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe))
    path = write_profile(tmp_path, "p", profile_for(VNNI_HOST, TUNED, tiny_model_dir))
    before = path.read_text()
    status, _, err = run_cli(["explain", "--profile", str(path), "--workload", str(workload_file), "--rounds", "1"])
    assert status == ExitStatus.DRIFT and one_line(err) and "--force" in err, err
    assert path.read_text() == before  # nothing saved into the profile


def test_a_missing_workload_is_one_line(tmp_path, tiny_model_dir):
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    status, _, err = run_cli(["explain", "--profile", str(path), "--workload", str(tmp_path / "none.jsonl")])
    assert status == ExitStatus.BAD_WORKLOAD and one_line(err), err
