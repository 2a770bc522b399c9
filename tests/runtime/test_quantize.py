"""The int8 fallback's fp32 MatMuls hold on every graph it is applied to (issue 50, item 3): the fused graph names
and numbers its MatMuls apart from the plain one, so the kept set is matched by the weights' values."""

from __future__ import annotations

import onnx
import pytest

from autotune.errors import ModelError
from autotune.runtime.fusion import fused_model_path
from autotune.runtime.model import build_default_model
from autotune.runtime.quantize import Int8Variant, fp32_nodes_in, quantize_to, weight_matmuls


def _float_weight_matmuls(path) -> int:  # type: ignore[no-untyped-def]
    model = onnx.load(str(path))
    weights = {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    return sum(n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in weights for n in model.graph.node)


@pytest.fixture(scope="module")
def graphs():  # type: ignore[no-untyped-def]
    bundle = build_default_model()
    return bundle.onnx_path, fused_model_path(bundle)


@pytest.mark.parametrize("scales", ["per-token", "per-channel"])
@pytest.mark.parametrize("graph", ["plain", "fused"])
def test_the_kept_matmuls_stay_fp32_on_both_graphs(graphs, tmp_path, scales, graph):
    plain, fused = graphs
    ffn = [n for n in weight_matmuls(plain) if ".intermediate" in n or n.split("_")[0].endswith(".output")]
    kept = tuple(ffn[:3])  # feed-forward MatMuls: in both graphs (the fused graph folds Q, K and V into Attention)
    source = plain if graph == "plain" else fused
    out = quantize_to(tmp_path / "m.onnx", source, has_vnni=True, variant=Int8Variant(scales, kept, 36),
                      names_from=plain)
    assert _float_weight_matmuls(out) == len(kept)
    assert len(fp32_nodes_in(source, kept, plain)) == len(kept)


def test_a_kept_set_naming_nothing_in_the_graph_is_refused(graphs, tmp_path):
    plain, fused = graphs
    with pytest.raises(ModelError, match="none of which"):
        quantize_to(tmp_path / "m.onnx", fused, has_vnni=True, variant=Int8Variant("per-channel", ("nope",), 36),
                    names_from=plain)


def test_every_variant_has_one_builder_and_each_checks_what_it_wrote(tiny_model_dir, tmp_path, monkeypatch):
    """Issue 53: a registry, name -> builder, so a profile's variant is rebuilt through the code the run used; the
    graph each writes goes through onnx's checker."""
    from autotune.runtime import onnx_files, quantize

    assert set(quantize.BUILDERS) == set(quantize.SCALES)
    checked: list[str] = []
    real = onnx_files.check_saved
    monkeypatch.setattr(onnx_files, "check_saved", lambda path, what: checked.append(what) or real(path, what))
    monkeypatch.setattr(quantize, "check_saved", onnx_files.check_saved)
    from autotune.runtime import matmul_rewrite

    monkeypatch.setattr(matmul_rewrite, "check_saved", onnx_files.check_saved)
    for scales in quantize.SCALES:
        (tmp_path / scales).mkdir()
        quantize.quantize_to(tmp_path / scales / "model.onnx", tiny_model_dir / "model.onnx", has_vnni=True,
                             variant=quantize.Int8Variant(scales))
    assert len(checked) == len(quantize.SCALES), checked
