"""`autotune report` as a command: it says what it wrote, and a bad profile or output is one line."""

from __future__ import annotations

from autotune.errors import ExitStatus
from autotune.host import HostProbe
from autotune.outputs.profile import write_profile
from autotune.runtime.engine import EngineConfig
from tests.support.cli import one_line, run_cli
from tests.support.hosts import profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


def test_it_writes_the_report_and_says_where(tmp_path, tiny_model_dir):
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    status, out, err = run_cli(["report", "--profile", str(path), "--out", str(tmp_path / "r.html")])
    assert status == ExitStatus.OK, err
    assert out.strip() == f"wrote {tmp_path / 'r.html'}"
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_a_bad_profile_or_output_is_one_line_and_writes_nothing(tmp_path, tiny_model_dir):
    (tmp_path / "bad.yaml").write_text("x: [\n")
    status, _, err = run_cli(["report", "--profile", str(tmp_path / "bad.yaml"), "--out", str(tmp_path / "r.html")])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and not (tmp_path / "r.html").exists(), err
    path = write_profile(tmp_path, "p", profile_for(HostProbe().probe(), TUNED, tiny_model_dir))
    status, _, err = run_cli(["report", "--profile", str(path), "--out", str(tmp_path)])
    assert status == ExitStatus.IO_ERROR and one_line(err), err
