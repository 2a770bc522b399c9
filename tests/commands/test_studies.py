"""`autotune studies`: the studies in a storage, one row each."""

from __future__ import annotations

from autotune.errors import ExitStatus
from tests.support.cli import FAST, one_line, outputs, run_cli


def test_an_empty_storage_has_no_studies(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path / "state"))
    assert run_cli(["studies"]) == (ExitStatus.OK, "no studies\n", "")


def test_a_run_is_listed_with_its_trials(tmp_path, monkeypatch, tiny_model_dir, workload_file):
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path / "state"))
    status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                              *FAST, *outputs(tmp_path)])
    assert status == ExitStatus.OK, err
    status, out, err = run_cli(["studies"])
    assert status == ExitStatus.OK, err
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["target", "fingerprint"] and len(rows) == 1
    row = rows[0].split()
    assert row[0] == "onnx" and int(row[4]) >= 5 and row[5].replace(".", "", 1).isdigit() and row[6] == "ms"


def test_a_storage_that_cannot_be_opened_is_one_line(tmp_path):
    status, out, err = run_cli(["studies", "--storage", f"sqlite:///{tmp_path}/no/such/dir/x.db"])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and out == "", err
