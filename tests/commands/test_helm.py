"""`autotune helm`: the values file for Hindsight's chart from a `tei` profile, and what it refuses."""

from __future__ import annotations

import yaml

from autotune.errors import ExitStatus
from autotune.outputs.helm_values import (
    CHART_RERANKER_KEYS,
    helm_values,
    memory_limit_mib,
)
from autotune.outputs.profile import write_profile
from tests.support.cli import run_cli
from tests.support.hosts import AVX2_HOST
from tests.support.profiles import tei_profile


def test_the_values_use_the_charts_keys_and_hold_the_tuned_cores(tmp_path):
    path = write_profile(tmp_path, "node", tei_profile())
    out = tmp_path / "values.yaml"
    status, _, err = run_cli(["helm", "--profile", str(path), "--out", str(out), "--image", "reg.local/autotune:1"])
    assert status == ExitStatus.OK, err
    raw = out.read_text()
    values = yaml.safe_load(raw)
    assert values == helm_values(tei_profile(), image="reg.local/autotune:1",
                                 tei_url="http://hindsight-tei-reranker:8090")
    reranker = values["tei"]["reranker"]
    assert set(reranker) <= CHART_RERANKER_KEYS and reranker["enabled"] is True
    assert reranker["image"] == {"repository": "reg.local/autotune", "tag": "1", "pullPolicy": "IfNotPresent"}
    assert reranker["resources"]["requests"]["cpu"] == reranker["resources"]["limits"]["cpu"] == "2"
    assert reranker["resources"]["limits"]["memory"] == f"{memory_limit_mib(tei_profile())}Mi"
    assert reranker["env"]["AUTOTUNE_WORKERS"] == "2" and reranker["env"]["AUTOTUNE_BATCH_SIZE"] == "4"
    assert all(isinstance(v, str) and v for v in reranker["env"].values())  # never an empty value
    api = values["api"]["env"]
    assert api["HINDSIGHT_API_RERANKER_PROVIDER"] == "tei"
    assert api["HINDSIGHT_API_RERANKER_TEI_URL"] == "http://hindsight-tei-reranker:8090"
    assert api["HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT"] == "2"
    assert all(k.startswith("HINDSIGHT_API_RERANKER_") for k in api)
    assert "# nodeSelector:" in raw and AVX2_HOST.brand in raw


def test_an_in_process_profile_is_refused_in_one_line(tmp_path):
    profile = {**tei_profile(), "target": "onnx"}
    path = write_profile(tmp_path, "p", profile)
    status, _, err = run_cli(["helm", "--profile", str(path), "--out", str(tmp_path / "v.yaml")])
    assert status == ExitStatus.BAD_OPTIONS and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "v.yaml").exists()
