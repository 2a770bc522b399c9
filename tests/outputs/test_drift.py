from __future__ import annotations

from dataclasses import replace

from autotune.outputs.drift import check_profile
from autotune.outputs.envfile import write_env
from autotune.runtime.engine import EngineConfig
from autotune.runtime.targets import EnvContext
from autotune.runtime.targets.tei_sidecar import TeiTarget
from tests.support.hosts import AVX2_HOST, VNNI_HOST
from tests.support.profiles import INT8, drift_profile


def test_same_host_has_no_drift(tiny_model_dir):
    assert check_profile(drift_profile(VNNI_HOST, model_dir=tiny_model_dir), VNNI_HOST) == []


def test_profile_moved_to_unlike_host(tiny_model_dir):
    drifts = check_profile(drift_profile(VNNI_HOST, model_dir=tiny_model_dir), AVX2_HOST)
    text = "\n".join(drifts)
    assert "profile chose int8 on a host with avx512_vnni; this host has none: rerun autotune run" in text
    assert "usable cores" in text and "intra-op threads" in text


def test_onnxruntime_and_model_drift(tiny_model_dir):
    profile = drift_profile(VNNI_HOST, model_dir=tiny_model_dir)
    profile["model"]["sha256"] = "0" * 64
    drifts = check_profile(profile, replace(VNNI_HOST, onnxruntime="1.20.0"))
    assert any("onnxruntime 1.32.0" in d for d in drifts)
    assert any("model sha256" in d for d in drifts)


def env_keys(config: EngineConfig, *, model: str, tei_url: str, tei_batch_size: int) -> dict[str, str]:
    ctx = EnvContext(model_ref=model, model_dir=None, tei_url=tei_url, tei_batch_size=tei_batch_size,
                     max_tokens=512, usable_cores=2)
    return TeiTarget().env_keys(config, ctx)


def test_env_block_drift(tmp_path, tiny_model_dir):
    profile = drift_profile(VNNI_HOST, model_dir=tiny_model_dir)
    env = tmp_path / ".env"
    write_env(env, env_keys(INT8, model=str(tiny_model_dir), tei_url="http://reranker:8080", tei_batch_size=300))
    assert check_profile(profile, VNNI_HOST, env_file=env) == []
    write_env(env, env_keys(replace(INT8, batch_size=8), model=str(tiny_model_dir), tei_url="u", tei_batch_size=1))
    assert any("AUTOTUNE_BATCH_SIZE" in d for d in check_profile(profile, VNNI_HOST, env_file=env))


def test_onnx_profile_env_drift_compares_the_keys_it_wrote(tmp_path, tiny_model_dir):
    from autotune.runtime.targets.hindsight_onnx import OnnxTarget

    config = replace(INT8, precision="fp32", mem_arena=False)
    ctx = EnvContext(model_ref="default", model_dir="/models/r", tei_url="", tei_batch_size=0, max_tokens=128,
                     usable_cores=2)
    keys = OnnxTarget().env_keys(config, ctx)
    profile = {**drift_profile(VNNI_HOST, config, model_dir=tiny_model_dir), "target": "onnx", "env": keys}
    env = tmp_path / ".env"
    write_env(env, keys)
    assert check_profile(profile, VNNI_HOST, env_file=env) == []
    write_env(env, {**keys, "HINDSIGHT_API_RERANKER_ONNX_CPU_MEM_ARENA": "true"})
    drifts = check_profile(profile, VNNI_HOST, env_file=env)
    assert len(drifts) == 1 and "ONNX_CPU_MEM_ARENA" in drifts[0]


