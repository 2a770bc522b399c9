"""One contract, every target (as optuna runs one suite over every storage): what the tuner, `bench`, `apply`,
`compose` and `helm` ask of a target and of its pool, and nothing they may ask of one kind only."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autotune.errors import OptionsError
from autotune.outputs.envfile import check_entry
from autotune.runtime.engine import REFERENCE, EngineConfig
from autotune.runtime.sessions import EnginePool
from autotune.runtime.targets import TARGET_NAMES, EnvContext, SpaceLimits, get_target
from autotune.runtime.targets.base import PREFIX

ROOT = Path(__file__).resolve().parents[3]
CTX = EnvContext(model_ref="default", model_dir="/models/r", tei_url="http://reranker:8080", tei_batch_size=300,
                 max_tokens=512, usable_cores=2,
                 client_keys={"HINDSIGHT_API_RERANKER_TEI_MAX_CONCURRENT": "2",
                              "HINDSIGHT_API_RERANKER_TEI_HTTP_TIMEOUT": "45"})
LIMITS = SpaceLimits(usable_cores=2, max_candidates=40)


@pytest.fixture(params=TARGET_NAMES)
def target(request):
    return get_target(request.param)


def test_the_keys_written_are_the_keys_declared_and_each_is_one_safe_line(target):
    space = target.space(SpaceLimits(usable_cores=2, max_candidates=20))
    for config in (space.baseline(), target.defaults(), replace(space.baseline(), batch_size=3)):
        keys = target.env_keys(config, CTX)
        assert set(keys) <= set(target.env_names), set(keys) - set(target.env_names)
        assert keys["HINDSIGHT_API_RERANKER_PROVIDER"] == target.provider
        for key, value in keys.items():
            check_entry(key, value)


def test_every_attribute_the_callers_read_is_set(target):
    assert target.defaults_label and target.summary and target.env_names
    assert isinstance(target.sidecar, bool) and isinstance(target.emits_model, bool)
    assert isinstance(target.has_max_tokens, bool) and isinstance(target.stock_default, bool)
    assert set(target.config_keys) <= set(target.env_names) | {k for k in target.config_keys if "AUTOTUNE" in k}
    if not target.has_max_tokens:
        from autotune.errors import OptionsError

        with pytest.raises(OptionsError, match="--max-tokens"):
            target.traits(2, 512, 128)


@pytest.fixture()
def pool_of(tiny_model_dir):
    """The pool a target scores with: the tiny model for ONNX pools, the default's stand-in form for PyTorch."""
    def make(target):
        from autotune.runtime.model import build_default_model, load_model_dir

        if target.stock_default:
            pytest.importorskip("torch", reason="the local target's pool needs the torch extra")
            bundle = build_default_model(stock=True)
        else:
            bundle = load_model_dir(tiny_model_dir)
        return target.pool(bundle, has_vnni=False, usable_cores=2)
    return make


def test_the_pool_answers_every_question_the_callers_ask(target, pool_of):
    from autotune.workload.queries import Query

    pool = pool_of(target)
    config = target.defaults()
    queries = [Query(id="q", query="capital of France?", documents=["Paris is in France.", "Bananas."])]
    path = pool.model_path(config)
    assert path is None or Path(path).is_file()
    lengths = pool.pair_lengths(queries)
    assert lengths is None or (len(lengths) == 1 and len(lengths[0]) == 2 and all(n > 0 for n in lengths[0]))
    assert path is None or lengths is not None  # an ONNX pool can be estimated
    assert pool.checkpoint is None or Path(pool.checkpoint).is_dir()
    assert pool.bundle is not None and pool.traits is not None
    assert len(pool.serving(replace(config, workers=1))) == 1
    assert pool.effective(pool.effective(config)) == pool.effective(config)
    scores = pool.engine(config).score(queries[0].query, queries[0].documents).scores
    assert scores.shape == (2,) and np.all(np.isfinite(scores))
    assert pool.max_sessions >= 1
    pool.keep_sessions(1)  # what a large model's run asks (issue 52): one session at a time, and it still scores
    assert pool.max_sessions == 1
    assert np.all(np.isfinite(pool.engine(config).score(queries[0].query, queries[0].documents).scores))
    pool.release()


def test_a_pool_that_runs_onnx_graphs_declares_the_int8_operations(target, pool_of, tmp_path):
    """Issue 53: the int8 judge's operations are a declared interface (`OnnxPool`), asked of the pool's type, not
    called past the Protocol: a pool either offers all of them, and they work, or is not one."""
    from autotune.runtime.engine import onnx_pool
    from autotune.runtime.quantize import Int8Variant

    pool = pool_of(target)
    onnx = onnx_pool(pool)
    assert (onnx is None) == (pool.model_path(target.defaults()) is None)
    if onnx is None:
        assert not ({"use_int8", "engine_on"} & set(dir(pool)))  # half an interface would pass for none
        return
    int8 = replace(target.defaults(), precision="int8", batch_size=1)
    onnx.use_int8(Int8Variant("per-channel"))
    assert onnx.int8_variant == Int8Variant("per-channel")
    engine = onnx.engine_on(onnx.model_path(int8), int8)
    assert np.all(np.isfinite(engine.score("capital of France?", ["Paris is in France."]).scores))
    pool.release()


def test_no_caller_asks_which_target_or_which_pool_it_has():
    """The seam (issues 34, 45): outside the targets package nothing branches on a target's name or a pool's
    class, nor keys a table by a target's name (`{"onnx": ...}`)."""
    pattern = re.compile(r'(==|!=)\s*"(tei|onnx|local)"|isinstance\(pool|getattr\(pool|target\.name\s*(==|!=)'
                         r'|["\'](tei|onnx|local)["\']\s*:')
    offenders = []
    for path in (ROOT / "autotune").rglob("*.py"):
        if "runtime/targets" in path.as_posix():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and "# seam-ok:" not in line:  # a marker must say why the name is not a target's
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


# What a target is called and which keys it writes describe it; every other class attribute is a capability
DESCRIPTIVE = {"name", "provider", "summary", "env_spec", "env_names", "config_keys"}


def test_no_capability_of_a_target_is_read_outside_the_targets():
    """Issues 45 and 53: a capability is asked through a method that does the thing (`served_by`, `missing_in`,
    `tuned_max_tokens`, `defaults_for`, `bench_references`, `load_concurrency`, `model_dir`, `compose_wanted`,
    `no_compose_note`, `helm_refusal`), never read as a flag by a caller."""
    from autotune.runtime.targets.base import Target

    capabilities = {name for name in Target.__annotations__ if name not in DESCRIPTIVE}
    assert {"sidecar", "server_module", "emits_model", "has_max_tokens", "bench_against",
            "min_hindsight"} <= capabilities
    reads = []
    for path in (ROOT / "autotune").rglob("*.py"):
        if "runtime/targets" in path.as_posix():
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            reads += [f"{path.relative_to(ROOT)}:{n}: .{c}" for c in capabilities
                      if re.search(rf"\btarget\.{c}\b|\bt\.{c}\b", line)]
    assert not reads, reads


def test_every_capability_method_answers_consistently(target):
    """The contract over every capability, not only the booleans: each method's answer, and how they agree."""
    import importlib

    from autotune.analysis.bench import REFERENCES

    server = target.served_by()
    if server is not None:
        importlib.import_module(server)  # the module the memory figure is measured with
        assert target.compose_wanted(None) and target.helm_refusal() is None  # a service of its own
    else:
        assert target.helm_refusal() is not None
    assert target.missing_in((99, 0)) is None
    too_old = target.missing_in((0, 0))
    assert too_old is None or f"`{target.name}`" in too_old
    tuned = target.tuned_max_tokens({"max_tokens": 256})
    assert tuned in (None, 256) and target.tuned_max_tokens({"max_tokens": True}) is None
    if tuned is None:
        with pytest.raises(OptionsError, match="--max-tokens"):
            target.traits(2, 512, 128)
    owned = [r for r in REFERENCES if target.defaults_for(r) is not None]
    assert len(owned) <= 1
    for reference in owned:
        label, config = target.defaults_for(reference)
        assert label and config == target.defaults()
    refs = target.bench_references()
    assert refs and set(refs) <= set(REFERENCES) and (not owned or refs[0] == owned[0])


def test_each_bench_reference_is_the_defaults_of_one_target_at_most():
    from autotune.analysis.bench import REFERENCES

    for reference in REFERENCES:
        assert sum(get_target(n).defaults_for(reference) is not None for n in TARGET_NAMES) <= 1


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


def test_unknown_target_names_the_valid_ones():
    with pytest.raises(OptionsError, match="onnx, tei, local"):
        get_target("gpu")


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
