"""Per-token int8: a pair scores nearly the same in any batch (dynamic int8 does not), the fp32 nodes asked for
stay fp32, and the weights are stored unsigned where the CPU lacks VNNI."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from autotune.measure.timing import replay
from autotune.runtime.engine import REFERENCE, EngineConfig
from autotune.runtime.model import resolve_model
from autotune.runtime.per_token import write_per_token
from autotune.runtime.quantize import Int8Variant, quantize_to, weight_matmuls
from autotune.runtime.sessions import EnginePool
from autotune.workload.queries import load_workload
from tests.support.corpus import DOCS
from tests.support.paths import EXAMPLE_WORKLOAD

pytestmark = pytest.mark.filterwarnings("ignore")
QUERY = "what is the capital of france?"


@pytest.fixture(scope="module")
def fp32() -> tuple[EnginePool, Path]:
    pool = EnginePool(resolve_model(None), has_vnni=True)
    return pool, pool.model_path(REFERENCE)


def _alone_and_batched(pool: EnginePool, path: Path) -> float:
    """The largest move of a score (0-1) between scoring each pair alone and in sorted batches of 32."""
    workload = load_workload(EXAMPLE_WORKLOAD)
    alone = replay(pool.engine_on(path, replace(REFERENCE, precision="int8")), workload.queries, keep_scores=True)
    batched = replay(pool.engine_on(path, EngineConfig(32, 0, True, "int8")), workload.queries, keep_scores=True)
    return max(float(np.max(np.abs(a - b))) for a, b in zip(alone.scores, batched.scores, strict=True))


def test_a_pairs_score_hardly_depends_on_its_batch_as_a_dynamic_ones_does(fp32, tmp_path):
    """Only fp32 rounding differs between batches (a value at a rounding edge can flip to the next integer):
    0.0014 at most on the example, against 0.085 for dynamic per-channel."""
    pool, source = fp32
    token = write_per_token(source, tmp_path / "token.onnx", unsigned_weights=False)
    dynamic = quantize_to(tmp_path / "dynamic.onnx", source, has_vnni=True, variant=Int8Variant("per-channel"))
    moved, dynamic_moved = _alone_and_batched(pool, token), _alone_and_batched(pool, dynamic)
    assert dynamic_moved > 0.02  # the batch's range scales every row: the test can tell the two apart
    assert moved < dynamic_moved / 10, (moved, dynamic_moved)


def test_it_stays_close_to_fp32_and_keeps_the_nodes_asked_for_in_fp32(fp32, tmp_path):
    pool, source = fp32
    names = weight_matmuls(source)
    kept = tuple(names[:4])
    path = write_per_token(source, tmp_path / "token.onnx", unsigned_weights=False, keep_fp32=kept)
    graph = onnx.load(str(path)).graph
    assert sum(n.op_type == "MatMulIntegerToFloat" for n in graph.node) == len(names) - len(kept)
    assert {n.name for n in graph.node if n.op_type == "MatMul"} >= set(kept)
    reference = pool.engine_on(source, REFERENCE).score(QUERY, DOCS).raw
    int8 = pool.engine_on(path, replace(REFERENCE, precision="int8")).score(QUERY, DOCS).raw
    assert 0 < float(np.max(np.abs(reference - int8))) < 0.5  # int8, and near fp32 in logits


def test_without_vnni_the_weights_are_unsigned_and_score_as_the_signed_ones(fp32, tmp_path):
    pool, source = fp32
    signed = write_per_token(source, tmp_path / "s8.onnx", unsigned_weights=False)
    unsigned = quantize_to(tmp_path / "u8.onnx", source, has_vnni=False, variant=Int8Variant("per-token"))
    weights = {i.name: i.data_type for i in onnx.load(str(unsigned)).graph.initializer if i.name.endswith("wq")}
    assert weights and set(weights.values()) == {onnx.TensorProto.UINT8}
    config = replace(REFERENCE, precision="int8")
    a = pool.engine_on(signed, config).score(QUERY, DOCS).raw
    b = pool.engine_on(unsigned, config).score(QUERY, DOCS).raw
    assert float(np.max(np.abs(a - b))) < 1e-3  # the same integers, offset by the zero point
