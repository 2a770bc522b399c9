"""`autotune check`: drift's exit statuses as the command gives them."""

from __future__ import annotations

import json

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.outputs.profile import write_profile
from tests.support.hosts import AVX2_HOST, VNNI_HOST
from tests.support.profiles import drift_profile


def test_cli_check_exit_statuses_through_probe_file_seam(tmp_path, tiny_model_dir, monkeypatch, capsys):
    path = write_profile(tmp_path, "p", drift_profile(VNNI_HOST, model_dir=tiny_model_dir))
    probe_file = tmp_path / "host.json"
    probe_file.write_text(json.dumps(VNNI_HOST.to_dict()))
    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe_file))
    assert main(["check", "--profile", str(path)]) == ExitStatus.OK
    probe_file.write_text(json.dumps(AVX2_HOST.to_dict()))
    assert main(["check", "--profile", str(path)]) == ExitStatus.DRIFT
    assert "avx512_vnni" in capsys.readouterr().out


def test_check_catches_a_changed_or_missing_model_that_hindsight_loads(tmp_path, tiny_model_dir, workload_file):
    """Issue 35, item 3: `check` compares the emitted model.onnx (not the source) with the run's sha256."""
    import io
    import shutil

    import yaml

    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "profiles"), "--name", "n", "--trials", "2",
            "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"]
    assert main(args, stdout=io.StringIO(), stderr=io.StringIO()) == ExitStatus.OK
    profile = tmp_path / "profiles" / "n.yaml"
    emitted = tmp_path / "models" / "n" / "model.onnx"
    assert len(yaml.safe_load(profile.read_text())["model"]["emitted_sha256"]) == 64

    def check() -> tuple[int, str]:
        out = io.StringIO()
        return main(["check", "--profile", str(profile)], stdout=out, stderr=io.StringIO()), out.getvalue()

    assert check()[0] == ExitStatus.OK
    with open(emitted, "ab") as fh:
        fh.write(b"\0")
    status, out = check()
    assert status == ExitStatus.DRIFT and "the run wrote" in out and str(emitted) in out
    shutil.rmtree(emitted.parent)
    status, out = check()
    assert status == ExitStatus.DRIFT and "is missing" in out
