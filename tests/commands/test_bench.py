"""`autotune bench` and `explain` as commands: what they print and save."""

from __future__ import annotations

import io

import pytest

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.host import HostProbe
from autotune.runtime.engine import EngineConfig
from tests.support.hosts import profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


@pytest.fixture(scope="module")
def host():
    return HostProbe().probe()


def test_bench_and_explain_cli(tmp_path, tiny_model_dir, workload_file, host):
    from autotune.outputs.profile import load_profile, write_profile

    path = write_profile(tmp_path, "p", profile_for(host, TUNED, tiny_model_dir))
    out = io.StringIO()
    assert main(["bench", "--profile", str(path), "--workload", str(workload_file), "--rounds", "2",
                 "--against", "ort-default"], stdout=out) == ExitStatus.OK
    text = out.getvalue()
    assert "p95 ratio" in text and "% of measured peak" in text and "% of nominal peak" in text
    assert "assumptions:" in text
    out = io.StringIO()
    assert main(["explain", "--profile", str(path), "--workload", str(workload_file), "--rounds", "1"],
                stdout=out) == ExitStatus.OK
    text = out.getvalue()
    assert "+ batch_size" in text and "+ intra_op_threads" in text and "+ length_sort" in text
    assert "+ precision" not in text and "The knob that mattered most:" in text
    saved = load_profile(path)["explain"]
    assert [s["knob"] for s in saved["waterfall"]] == ["batch_size", "intra_op_threads", "length_sort"]
    assert len(saved["leave_one_out"]) == 3
