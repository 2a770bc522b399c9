"""The `onnx` target: Hindsight 1.1's in-process provider, as autotune replays it and as Hindsight's own classes
read what autotune writes."""

from __future__ import annotations

import pytest

from autotune.outputs.envfile import managed_values
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets import EnvContext, SpaceLimits, get_target
from autotune.runtime.targets.base import PREFIX
from autotune.search.space import SearchSettings
from tests.support.hindsight_classes import assert_same_scores, hindsight_scores
from tests.support.models import TINY_CONFIG, tiny_weights, write_model_dir, write_workload

FAST = SearchSettings(trials=4, repeats=1, final_rounds=1)
CTX = EnvContext(model_ref="default", model_dir="/models/reranker", tei_url="http://reranker:8080",
                 tei_batch_size=300, max_tokens=512, usable_cores=2)
LIMITS = SpaceLimits(usable_cores=2, max_candidates=40)


@pytest.fixture()
def hindsight_api():
    return pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")


def test_onnx_target_replays_hindsights_provider():
    target = get_target("onnx")
    traits = target.traits(usable_cores=2, max_length=8192)
    assert traits == EngineTraits(sort_key="chars_desc", spinning=False, zero_threads=traits.zero_threads,
                                  max_tokens=512, shared_session=True)  # its workers share one session
    space = target.space(LIMITS)
    assert space.length_sort == (True,) and set(space.mem_arena) == {False, True}
    base = target.baseline(space)
    assert base.length_sort and not base.mem_arena
    keys = target.env_keys(base, CTX)
    assert keys[f"{PREFIX}ONNX_MODEL_PATH"] == "/models/reranker/model.onnx"
    assert keys[f"{PREFIX}ONNX_TOKENIZER_NAME_OR_PATH"] == "/models/reranker"
    assert keys[f"{PREFIX}ONNX_CPU_MEM_ARENA"] == "false" and keys[f"{PREFIX}ONNX_MAX_CONCURRENT"] == "1"
    assert not any("TEI" in k or k.startswith("AUTOTUNE_") for k in keys)


def test_character_sort_orders_as_hindsight_does(tiny_model_dir):

    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(sort_key="chars_desc"))
    engine = pool.engine(EngineConfig(2, 1, True, "fp32"))
    docs = ["bb", "a", "dddd", "cc"]
    pairs = [("q", d) for d in docs]
    hindsight = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]), reverse=True)
    assert engine._order("q", docs, [0] * 4) == hindsight == [2, 0, 3, 1]
    asc = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(sort_key="chars_asc"))
    assert asc.engine(EngineConfig(2, 1, True, "fp32"))._order("q", docs, [0] * 4) == [1, 0, 3, 2]


@pytest.mark.parametrize("n_logits", [1, 2])
def test_onnx_env_builds_hindsights_provider_and_it_scores_like_autotune(tmp_path, monkeypatch, n_logits,
                                                                       hindsight_api):
    model_dir = tmp_path / f"model{n_logits}"
    from autotune.runtime.bert_onnx import build_bert_cross_encoder

    graph, _ = build_bert_cross_encoder(tiny_weights(TINY_CONFIG, seed=n_logits, n_logits=n_logits), TINY_CONFIG)
    write_model_dir(model_dir, graph, TINY_CONFIG)
    workload = write_workload(tmp_path / "w.jsonl", n_queries=4)
    env_file = tmp_path / ".env"
    outcome = tune(RunOptions(workload=workload, model=model_dir, env_file=env_file, profile_dir=tmp_path / "profiles",
                              compose_file=None, target="onnx", model_out=tmp_path / "emitted", settings=FAST))
    env = managed_values(env_file)
    assert env["HINDSIGHT_API_RERANKER_PROVIDER"] == "onnx"
    assert outcome.tokenizer_check is not None and outcome.tokenizer_check.checked

    theirs = hindsight_scores(env, workload, monkeypatch)
    target = get_target("onnx")

    pool = target.pool(load_model_dir(tmp_path / "emitted"), has_vnni=outcome.host.has_vnni,
                       usable_cores=outcome.host.cores.usable)
    engine = pool.engine(outcome.result.winner.config)
    ours = [engine.score(q.query, q.documents).raw for q in outcome.workload.queries]
    assert_same_scores(ours, theirs, atol=1e-5)


def test_hindsight_reads_every_key_as_written(tmp_path, monkeypatch, hindsight_api):
    """Its config loader parses our values into the settings the target tuned (no silent defaults)."""
    from hindsight_api.config import clear_config_cache, get_config

    ctx_dir = "/models/reranker"
    from autotune.runtime.engine import EngineConfig
    from autotune.runtime.targets import EnvContext

    config = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32", mem_arena=True)
    ctx = EnvContext(model_ref="default", model_dir=ctx_dir, tei_url="http://reranker:8080", tei_batch_size=300,
                     max_tokens=256, usable_cores=2)
    for key, value in get_target("onnx").env_keys(config, ctx).items():
        monkeypatch.setenv(key, value)
    clear_config_cache()
    try:
        onnx = get_config().reranker_chain()[0].onnx
    finally:
        clear_config_cache()
    assert (onnx.model_path, onnx.tokenizer_name_or_path) == (f"{ctx_dir}/model.onnx", ctx_dir)
    assert (onnx.batch_size, onnx.threads, onnx.max_tokens, onnx.cpu_mem_arena, onnx.max_concurrent) == (
        4, 1, 256, True, 1)
