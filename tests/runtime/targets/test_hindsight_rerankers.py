"""Hindsight 1.1.0's own rerankers, configured only from the `.env` autotune writes, score like autotune.

These run Hindsight's real classes (`create_cross_encoder_from_env`, its config loader), not a
copy: install them with `pip install -e '.[hindsight]'` (`.ci/run` does).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np
import pytest

from autotune.outputs.envfile import managed_values
from autotune.pipeline.options import RunOptions
from autotune.pipeline.tune import tune
from autotune.runtime.engine import EngineTraits
from autotune.runtime.targets import get_target, hindsight_native_threads
from autotune.search.space import SearchSettings
from autotune.workload.queries import load_workload
from tests.conftest import TINY_CONFIG, tiny_weights, write_model_dir, write_workload

hindsight = pytest.importorskip("hindsight_api", reason="Hindsight 1.1.0 is absent (pip install -e '.[hindsight]')")

FAST = SearchSettings(trials=4, repeats=1, final_rounds=1)


def hindsight_scores(env: dict[str, str], workload_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Build the reranker the way Hindsight's API does at start-up, from the environment alone."""
    from hindsight_api.config import clear_config_cache
    from hindsight_api.engine.cross_encoder import create_cross_encoder_from_env

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_config_cache()
    try:
        encoder = create_cross_encoder_from_env()

        async def score_all() -> list[np.ndarray]:
            await encoder.initialize()
            out = []
            for q in load_workload(workload_path).queries:
                out.append(np.asarray(await encoder.predict([(q.query, d) for d in q.documents]), dtype=np.float64))
            return out

        return asyncio.run(score_all())
    finally:
        clear_config_cache()


def assert_same_scores(ours: list[np.ndarray], theirs: list[np.ndarray], atol: float) -> None:
    assert len(ours) == len(theirs)
    for q, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        np.testing.assert_allclose(a, b, atol=atol, err_msg=f"query #{q}")
        assert list(np.argsort(-a, kind="stable")) == list(np.argsort(-b, kind="stable")), f"order of query #{q}"


@pytest.mark.parametrize("n_logits", [1, 2])
def test_onnx_env_builds_hindsights_provider_and_it_scores_like_autotune(tmp_path, monkeypatch, n_logits):
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
    from autotune.runtime.model import load_model_dir

    pool = target.pool(load_model_dir(tmp_path / "emitted"), has_vnni=outcome.host.has_vnni,
                       usable_cores=outcome.host.cores.usable)
    engine = pool.engine(outcome.result.winner.config)
    ours = [engine.score(q.query, q.documents).raw for q in outcome.workload.queries]
    assert_same_scores(ours, theirs, atol=1e-5)


def test_hindsight_reads_every_key_as_written(tmp_path, monkeypatch):
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


def test_thread_cap_matches_hindsights(monkeypatch):
    from hindsight_api._thread_limits import _available_cpu_count, onnx_intra_op_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert hindsight_native_threads(_available_cpu_count()) == onnx_intra_op_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert hindsight_native_threads(_available_cpu_count()) == onnx_intra_op_threads() == 3


def test_local_env_builds_hindsights_local_provider_and_it_scores_like_autotune(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="the local target needs the torch extra (pip install -e '.[torch]')")
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


def hindsight_burst(env: dict[str, str], n: int, texts: list[str], monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """`n` recalls at once through Hindsight's own TEI client, built from the environment alone."""
    from hindsight_api.config import clear_config_cache
    from hindsight_api.engine.cross_encoder import create_cross_encoder_from_env

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_config_cache()
    try:
        encoder = create_cross_encoder_from_env()

        async def go() -> list[bool]:
            await encoder.initialize()

            async def recall(i: int) -> bool:
                try:
                    await encoder.predict([(f"query {i}", t) for t in texts])
                    return True
                except RuntimeError:
                    return False
            return list(await asyncio.gather(*(recall(i) for i in range(n))))

        return asyncio.run(go())
    finally:
        clear_config_cache()


def test_hindsights_tei_client_survives_eight_recalls_with_the_sized_keys(tiny_model_dir, monkeypatch):
    """Hindsight's real client, its semaphore and its retries; a server that takes 0.4 s a request and a
    1 s time-out. With one permit per worker (what `run` writes) all eight recalls succeed, each request
    sent once, and the server drops nothing; with Hindsight's 8 permits, requests queue in the server
    past the time-out, and the client gives up on them and sends them again."""
    from autotune.search.client_sizing import HTTP_TIMEOUT_KEY, MAX_CONCURRENT_KEY
    from tests.serve.test_load import SlowService, metric, slow
    from tests.support.http import LiveServer

    texts = ["Paris is the capital of France.", "Berlin is in Germany.", "The sky is blue."] * 4
    base = {"HINDSIGHT_API_RERANKER_PROVIDER": "tei", "HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE": "300",
            HTTP_TIMEOUT_KEY: "1"}
    with LiveServer(slow(tiny_model_dir, max_queue=16, client_timeout_s=1000.0)) as live:
        before = hindsight_burst({**base, "HINDSIGHT_API_RERANKER_TEI_URL": live.url, MAX_CONCURRENT_KEY: "8"}, 8,
                                 texts, monkeypatch)
        time.sleep(8 * SlowService.delay)
        assert metric(live.url, "autotune_dropped_requests") > 0
        assert metric(live.url, "te_request_count", '{method="batch"}') > 8  # retries
    assert len(before) == 8
    service = slow(tiny_model_dir, max_queue=16, client_timeout_s=1.0)
    with LiveServer(service) as live:
        after = hindsight_burst({**base, "HINDSIGHT_API_RERANKER_TEI_URL": live.url, MAX_CONCURRENT_KEY: "1"}, 8,
                                texts, monkeypatch)
        assert metric(live.url, "autotune_dropped_requests") == 0
        assert metric(live.url, "autotune_abandoned_inference_seconds") == 0
        assert metric(live.url, "te_request_count", '{method="batch"}') == 8
    assert all(after) and service.ran == 8
