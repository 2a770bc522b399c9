"""The `local` target: Hindsight's sentence-transformers provider, fp32 only, its threads set through OpenMP."""

from __future__ import annotations

import json

import pytest

from autotune.errors import OptionsError
from autotune.outputs.envfile import managed_values
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.targets import EnvContext, SpaceLimits, get_target, hindsight_native_threads
from autotune.runtime.targets.base import PREFIX
from autotune.search.space import SearchSettings
from tests.support.hindsight_classes import assert_same_scores, hindsight_scores

CTX = EnvContext(model_ref="default", model_dir="/models/reranker", tei_url="http://reranker:8080",
                 tei_batch_size=300, max_tokens=512, usable_cores=2)


def test_local_target_is_fp32_only_and_writes_omp_threads():
    target = get_target("local")
    with pytest.raises(OptionsError, match="fp32 only"):
        target.space(SpaceLimits(usable_cores=2, max_candidates=40, precisions=["int8"]))
    keys = target.env_keys(EngineConfig(8, 0, True, "fp32"), CTX)
    assert keys["OMP_NUM_THREADS"] == str(hindsight_native_threads(2))
    assert keys[f"{PREFIX}LOCAL_BUCKET_BATCHING"] == "true" and keys[f"{PREFIX}LOCAL_BATCH_SIZE"] == "8"


def test_local_env_builds_hindsights_local_provider_and_it_scores_like_autotune(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="the local target needs the torch extra (pip install -e '.[torch]')")
    pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")
    workload = tmp_path / "w.jsonl"
    docs = ["Paris is the capital of France.", "Bananas are yellow.", "The Seine flows through Paris.",
            "Berlin is in Germany.", "x " * 300]
    workload.write_text("\n".join(json.dumps({"query": q, "documents": docs})
                                  for q in ("capital of France?", "rivers")) + "\n")
    env_file = tmp_path / ".env"
    outcome = tune(RunOptions(workload=workload, env_file=env_file, profile_dir=tmp_path / "profiles",
                              compose_file=None, target="local", model_out=tmp_path / "emitted",
                              settings=SearchSettings(trials=3, repeats=1, final_rounds=1)))
    env = managed_values(env_file)
    assert env["HINDSIGHT_API_RERANKER_PROVIDER"] == "local"
    assert env["HINDSIGHT_API_RERANKER_LOCAL_MODEL"] == str((tmp_path / "emitted").resolve())
    theirs = hindsight_scores(env, workload, monkeypatch)
    from autotune.runtime.targets.hindsight_local import LocalPool

    engine = LocalPool(tmp_path / "emitted", bundle=outcome.bundle, traits=EngineTraits(),
                       usable_cores=outcome.host.cores.usable).engine(
        outcome.result.winner.config)
    ours = [engine.score(q.query, q.documents).scores for q in outcome.workload.queries]
    assert_same_scores(ours, theirs, atol=1e-5)
