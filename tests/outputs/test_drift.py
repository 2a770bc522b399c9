from __future__ import annotations

import json
from dataclasses import replace

from autotune.cli import main
from autotune.errors import ExitStatus
from autotune.host import HostInfo
from autotune.outputs.drift import check_profile
from autotune.outputs.envfile import write_env
from autotune.outputs.profile import SCHEMA, write_profile
from autotune.runtime.engine import EngineConfig
from autotune.runtime.targets import EnvContext
from autotune.runtime.targets.tei_sidecar import TeiTarget
from tests.support.hosts import AVX2_HOST, VNNI_HOST

INT8 = EngineConfig(batch_size=4, intra_op_threads=4, length_sort=True, precision="int8")


def _profile(host: HostInfo, config: EngineConfig = INT8, model_dir=None) -> dict:
    from autotune.runtime.model import load_model_dir

    sha = load_model_dir(model_dir).sha256 if model_dir else None
    return {"schema": SCHEMA, "target": "tei", "host": host.to_dict(), "config": config.to_dict(),
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


def env_keys(config: EngineConfig, *, model: str, tei_url: str, tei_batch_size: int) -> dict[str, str]:
    ctx = EnvContext(model_ref=model, model_dir=None, tei_url=tei_url, tei_batch_size=tei_batch_size,
                     max_tokens=512, usable_cores=2)
    return TeiTarget().env_keys(config, ctx)


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


def test_onnx_profile_env_drift_compares_the_keys_it_wrote(tmp_path, tiny_model_dir):
    from autotune.runtime.targets.hindsight_onnx import OnnxTarget

    config = replace(INT8, precision="fp32", mem_arena=False)
    ctx = EnvContext(model_ref="default", model_dir="/models/r", tei_url="", tei_batch_size=0, max_tokens=512,
                     usable_cores=2)
    keys = OnnxTarget().env_keys(config, ctx)
    profile = {**_profile(VNNI_HOST, config, model_dir=tiny_model_dir), "target": "onnx", "env": keys}
    env = tmp_path / ".env"
    write_env(env, keys)
    assert check_profile(profile, VNNI_HOST, env_file=env) == []
    write_env(env, {**keys, "HINDSIGHT_API_RERANKER_ONNX_CPU_MEM_ARENA": "true"})
    drifts = check_profile(profile, VNNI_HOST, env_file=env)
    assert len(drifts) == 1 and "ONNX_CPU_MEM_ARENA" in drifts[0]


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
    assert status == ExitStatus.DRIFT and "changed after the run" in out and str(emitted) in out
    shutil.rmtree(emitted.parent)
    status, out = check()
    assert status == ExitStatus.DRIFT and "is not here" in out
