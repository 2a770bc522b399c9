from __future__ import annotations

import json
from dataclasses import replace

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.host import HostInfo
from autotune.outputs.drift import check_profile
from autotune.outputs.envfile import write_env
from autotune.outputs.profile import SCHEMA, env_keys, write_profile
from autotune.runtime.engine import EngineConfig
from tests.helpers import AVX2_HOST, VNNI_HOST

INT8 = EngineConfig(batch_size=4, intra_op_threads=4, length_sort=True, precision="int8")


def _profile(host: HostInfo, config: EngineConfig = INT8, model_dir=None) -> dict:
    from autotune.runtime.model import load_model_dir

    sha = load_model_dir(model_dir).sha256 if model_dir else None
    return {"schema": SCHEMA, "host": host.to_dict(), "config": config.to_dict(),
            "model": {"ref": str(model_dir), "sha256": sha}}


def test_same_host_has_no_drift(tiny_model_dir):
    assert check_profile(_profile(VNNI_HOST, model_dir=tiny_model_dir), VNNI_HOST) == []


def test_profile_moved_to_unlike_host(tiny_model_dir):
    drifts = check_profile(_profile(VNNI_HOST, model_dir=tiny_model_dir), AVX2_HOST)
    text = "\n".join(drifts)
    assert "profile chose int8 on a host with avx512_vnni; this host has none: rerun autotune run" in text
    assert "usable cores" in text and "intra-op threads" in text


def test_onnxruntime_and_model_drift(tiny_model_dir):
    profile = _profile(VNNI_HOST, model_dir=tiny_model_dir)
    profile["model"]["sha256"] = "0" * 64
    drifts = check_profile(profile, replace(VNNI_HOST, onnxruntime="1.20.0"))
    assert any("onnxruntime 1.32.0" in d for d in drifts)
    assert any("model sha256" in d for d in drifts)


def test_env_block_drift(tmp_path, tiny_model_dir):
    profile = _profile(VNNI_HOST, model_dir=tiny_model_dir)
    env = tmp_path / ".env"
    write_env(env, env_keys(INT8, model=str(tiny_model_dir), tei_url="http://reranker:8080", tei_batch_size=300))
    assert check_profile(profile, VNNI_HOST, env_file=env) == []
    write_env(env, env_keys(replace(INT8, batch_size=8), model=str(tiny_model_dir), tei_url="u", tei_batch_size=1))
    assert any("AUTOTUNE_BATCH_SIZE" in d for d in check_profile(profile, VNNI_HOST, env_file=env))


def test_cli_check_exit_statuses_through_probe_file_seam(tmp_path, tiny_model_dir, monkeypatch, capsys):
    path = write_profile(tmp_path, "p", _profile(VNNI_HOST, model_dir=tiny_model_dir))
    probe_file = tmp_path / "host.json"
    probe_file.write_text(json.dumps(VNNI_HOST.to_dict()))
    monkeypatch.setenv("AUTOTUNE_PROBE_FILE", str(probe_file))
    assert main(["check", "--profile", str(path)]) == ExitStatus.OK
    probe_file.write_text(json.dumps(AVX2_HOST.to_dict()))
    assert main(["check", "--profile", str(path)]) == ExitStatus.DRIFT
    assert "avx512_vnni" in capsys.readouterr().out
