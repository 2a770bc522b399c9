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


def _logits(path, feeds=None):  # type: ignore[no-untyped-def]
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.array([[2, 15, 26, 37, 3, 48, 59, 3]], np.int64)
    given = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    return session.run(None, {i.name: given[i.name] for i in session.get_inputs()})[0]


@pytest.mark.parametrize("scales", ["per-token", "per-channel", "per-tensor"])
def test_each_matmul_alone_in_int8_is_the_graph_its_builder_makes(tiny_model_dir, tmp_path, scales):
    """The fallback's sensitivity graphs are rewritten in memory, one weight MatMul int8 in each: per-token is
    its builder's very graph; the dynamic scales are the kernel onnxruntime fuses its quantizer's graph into, a
    logit within 2e-3 of it."""
    import numpy as np

    from autotune.runtime.quantize import alone_in_int8

    source = tiny_model_dir / "model.onnx"
    names = weight_matmuls(source)
    (tmp_path / "scratch").mkdir()
    seen, moved = [], []
    for name, path in alone_in_int8(source, scales, has_vnni=True, scratch=tmp_path / "scratch"):
        assert _float_weight_matmuls(path) == len(names) - 1
        built = quantize_to(tmp_path / f"{len(seen)}.onnx", source, has_vnni=True,
                            variant=Int8Variant(scales, tuple(n for n in names if n != name), len(names)))
        np.testing.assert_allclose(_logits(path), _logits(built), atol=1e-6 if scales == "per-token" else 2e-3)
        moved.append(float(np.max(np.abs(_logits(path) - _logits(source)))))
        seen.append(name)
    assert seen == names and max(moved) > 1e-6  # each graph is int8 somewhere, and that moves a logit


def test_a_graph_with_external_weights_is_rewritten_alone_through_its_builder(external_model_dir, tmp_path):
    """No copy of a large graph is held in memory: each of its graphs is streamed through the builder."""
    from itertools import islice

    from autotune.runtime import onnx_files
    from autotune.runtime.quantize import alone_in_int8

    source = external_model_dir / "model.onnx"
    names = weight_matmuls(source)
    for name, path in islice(alone_in_int8(source, "per-channel", has_vnni=True, scratch=tmp_path), 2):
        assert onnx_files.data_files(path) and name in names
        model = onnx.load(str(path))
        assert [n.name for n in model.graph.node if n.op_type == "DynamicQuantizeMatMul"] == [name]
