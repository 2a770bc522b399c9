"""`autotune compose` and `autotune report` from a run's profile; a file that is not a profile is one line."""

from __future__ import annotations

import yaml

from autotune.errors import ExitStatus
from tests.support.cli import FAST, outputs, run_cli


def test_compose_and_report_commands(tmp_path, tiny_model_dir, workload_file):
    assert run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), *outputs(tmp_path),
                    *FAST, "--precisions", "fp32,int8"])[0] == ExitStatus.OK  # named: int8 judged, its scatter drawn
    profile = next((tmp_path / "out" / "profiles").glob("*.yaml"))
    status, _, _ = run_cli(["report", "--profile", str(profile), "--out", str(tmp_path / "r.html")])
    assert status == 0 and (tmp_path / "r.html").read_text().count("Plotly.newPlot") == 3
    status, _, err = run_cli(["compose", "--profile", str(profile), "--out", str(tmp_path / "c.yaml"),
                              "--hindsight-service", "api"])
    assert status == 0, err
    # issue 35, item 1: an onnx profile gets the model mounted, never the tei sidecar
    api = yaml.safe_load((tmp_path / "c.yaml").read_text())["services"]
    assert list(api) == ["api"]
    model_dir = yaml.safe_load(profile.read_text())["model"]["dir"]
    assert api["api"]["volumes"] == [f"{model_dir}:/models/reranker:ro"]
    assert api["api"]["environment"]["HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH"] == "/models/reranker/model.onnx"
    status, _, err = run_cli(["report", "--profile", str(workload_file)])
    assert status == ExitStatus.BAD_OPTIONS and "profile" in err and len(err.splitlines()) == 1
    (tmp_path / "plain.yaml").write_text("a: 1\n")
    status, _, err = run_cli(["report", "--profile", str(tmp_path / "plain.yaml")])
    assert status == ExitStatus.BAD_OPTIONS and "not an autotune profile" in err


def test_compose_names_its_own_flag_when_it_refuses_a_base_file(tmp_path):
    status, _, err = run_cli(["compose", "--out", str(tmp_path / "compose.yaml")])
    assert status == ExitStatus.BAD_OPTIONS and "--out " in err and "--compose-file" not in err, err
