from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.analysis.bench import run_bench
from autotune.errors import DriftError
from autotune.host import HostProbe
from autotune.runtime.engine import EngineConfig
from autotune.workload.queries import load_workload
from tests.support.hosts import profile_for

TUNED = EngineConfig(batch_size=2, intra_op_threads=1, length_sort=True, precision="fp32")


@pytest.fixture(scope="module")
def host():
    return HostProbe().probe()


def test_bench_interleaves_and_reports_ratios(tiny_model_dir, workload_file, host):
    profile = profile_for(host, TUNED, tiny_model_dir)
    result = run_bench(profile, load_workload(workload_file), host, against=["ort-default", "hindsight-local"],
                       rounds=2)
    assert [r.name for r in result.rows] == ["profile", "ort-default"]
    assert "embedded default model only" in result.skipped["hindsight-local"]
    ratio = result.ratios[0]
    assert ratio.reference == "ort-default" and ratio.low <= ratio.median <= ratio.high
    assert all(len(r.round_p95_ms) == 2 for r in result.rows)
    eff = result.rows[0].efficiency
    assert eff is not None and eff.useful_gflops > 0 and eff.padding_overhead >= 1.0
    assert eff.percent_of_measured is not None and eff.percent_of_measured > 0 and eff.threads >= 1
    baseline_eff = result.rows[1].efficiency
    assert baseline_eff is not None and baseline_eff.padding_overhead > eff.padding_overhead  # sorted, small batches


def test_bench_refuses_another_hosts_profile(tiny_model_dir, workload_file, host):
    other = replace(host, onnxruntime="0.0.1")
    profile = profile_for(other, TUNED, tiny_model_dir)
    with pytest.raises(DriftError, match="--force"):
        run_bench(profile, load_workload(workload_file), host, against=["ort-default"], rounds=1)
    assert run_bench(profile, load_workload(workload_file), host, against=["ort-default"], rounds=1, force=True)


def test_onnx_profile_is_benched_against_hindsights_onnx_defaults_and_its_siblings(tmp_path, tiny_model_dir,
                                                                                    workload_file, host):
    from autotune.outputs.profile import write_profile

    onnx = {**profile_for(host, replace(TUNED, mem_arena=False), tiny_model_dir), "target": "onnx"}
    tei = {**profile_for(host, TUNED, tiny_model_dir), "target": "tei"}
    other_host = {**profile_for(replace(host, onnxruntime="0.0.1"), TUNED, tiny_model_dir), "target": "tei"}
    path = write_profile(tmp_path, "onnx", onnx)
    write_profile(tmp_path, "tei", tei)
    write_profile(tmp_path, "elsewhere", other_host)
    (tmp_path / "junk.yaml").write_text("- not a profile\n")
    result = run_bench(onnx, load_workload(workload_file), host, rounds=1, profile_path=path)
    names = [r.name for r in result.rows]
    assert names[0] == "profile" and "profile:tei" in names and "hindsight-onnx" in names
    assert names.count("profile:tei") == 1  # the other host's profile is not this host's figure
    assert result.rows[0].description.startswith("onnx target")
    assert {r.reference for r in result.ratios} >= {"hindsight-onnx", "profile:tei"}
