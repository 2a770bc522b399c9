"""One contract suite over every target: keys, spaces, baselines, and scores equal to the reference."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.errors import OptionsError
from autotune.runtime.engine import REFERENCE, EngineConfig, EngineTraits
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets import TARGETS, EnvContext, SpaceLimits, get_target, hindsight_native_threads
from autotune.runtime.targets.base import PREFIX

CTX = EnvContext(model_ref="default", model_dir="/models/reranker", tei_url="http://reranker:8080",
                 tei_batch_size=300, max_tokens=512, usable_cores=2)
LIMITS = SpaceLimits(usable_cores=2, max_candidates=40)


@pytest.fixture(params=sorted(TARGETS))
def target(request):
    return get_target(request.param)


def test_keys_are_never_empty_and_booleans_are_hindsights_spellings(target):
    space = target.space(LIMITS)
    for config in (target.baseline(space), EngineConfig(4, 1, True, "fp32", mem_arena=False)):
        keys = target.env_keys(config, CTX)
        assert keys[f"{PREFIX}PROVIDER"] == target.provider
        assert all(isinstance(v, str) and v for v in keys.values())
        for key, value in keys.items():
            if key.endswith(("_SORT", "_BATCHING", "_ARENA")):
                assert value in ("true", "false"), key


def test_baseline_is_in_the_space_and_is_hindsights_default(target):
    space = target.space(LIMITS)
    base = target.baseline(space)
    assert base.batch_size == 32 and base.intra_op_threads == 0 and base.precision == "fp32"
    for name, values in space.dimensions().items():
        assert getattr(base, name) in values, name


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


def test_local_target_is_fp32_only_and_writes_omp_threads():
    target = get_target("local")
    with pytest.raises(OptionsError, match="fp32 only"):
        target.space(SpaceLimits(usable_cores=2, max_candidates=40, precisions=["int8"]))
    keys = target.env_keys(EngineConfig(8, 0, True, "fp32"), CTX)
    assert keys["OMP_NUM_THREADS"] == str(hindsight_native_threads(2))
    assert keys[f"{PREFIX}LOCAL_BUCKET_BATCHING"] == "true" and keys[f"{PREFIX}LOCAL_BATCH_SIZE"] == "8"


def test_unknown_target_names_the_valid_ones():
    with pytest.raises(OptionsError, match="onnx, tei, local"):
        get_target("gpu")


def test_hindsight_thread_cap(monkeypatch):
    assert hindsight_native_threads(64, {}) == 16
    assert hindsight_native_threads(2, {}) == 2
    assert hindsight_native_threads(64, {"OMP_NUM_THREADS": "3"}) == 3
    assert hindsight_native_threads(2, {"OMP_NUM_THREADS": "x"}) == 2


@pytest.mark.parametrize("name", ["onnx", "tei"])
def test_ort_targets_score_like_the_reference(name, tiny_model_dir):
    """Sort key, batching, spinning and the arena never change a score beyond fp32 summation order."""
    from autotune.runtime.model import load_model_dir

    bundle = load_model_dir(tiny_model_dir)
    target = get_target(name)
    pool = target.pool(bundle, has_vnni=False, usable_cores=2)
    ref_pool = EnginePool(bundle, has_vnni=False)
    query = "where did the meeting happen"
    docs = [f"document {i} " + "words " * (i * 7 % 23) for i in range(11)]
    want = ref_pool.engine(REFERENCE).score(query, docs).raw
    for config in (EngineConfig(4, 1, True, "fp32", mem_arena=False), EngineConfig(3, 2, True, "fp32")):
        got = pool.engine(config).score(query, docs).raw
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_character_sort_orders_as_hindsight_does(tiny_model_dir):
    from autotune.runtime.model import load_model_dir

    pool = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(sort_key="chars_desc"))
    engine = pool.engine(EngineConfig(2, 1, True, "fp32"))
    docs = ["bb", "a", "dddd", "cc"]
    pairs = [("q", d) for d in docs]
    hindsight = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]), reverse=True)
    assert engine._order("q", docs, [0] * 4) == hindsight == [2, 0, 3, 1]
    asc = EnginePool(load_model_dir(tiny_model_dir), has_vnni=False, traits=EngineTraits(sort_key="chars_asc"))
    assert asc.engine(EngineConfig(2, 1, True, "fp32"))._order("q", docs, [0] * 4) == [1, 0, 3, 2]
