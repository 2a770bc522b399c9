"""A model whose weights lie outside its graph is hashed, copied and rewritten whole, and its data locations are
held inside its directory (issue 52)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from autotune.errors import ModelError
from autotune.fileio import sha256_file
from autotune.runtime import onnx_files
from autotune.runtime.model import load_model_dir
from autotune.runtime.quantize import Int8Variant, quantize_to
from tests.support.large import build_xlmr

FEEDS = {"input_ids": np.array([[2, 5, 6, 3, 3, 7, 8, 3]]), "attention_mask": np.ones((1, 8), np.int64)}


def _logits(path: Path) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, FEEDS)[0]


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="module")
def per_tensor_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_xlmr(tmp_path_factory.mktemp("per-tensor") / "model", layout="per-tensor")


def test_the_weights_lie_in_one_data_file_and_the_models_sha_covers_it(external_model_dir, tmp_path):
    graph = external_model_dir / "model.onnx"
    assert [p.name for p in onnx_files.data_files(graph)] == ["model.onnx_data"]
    assert graph.stat().st_size < 100_000 < (external_model_dir / "model.onnx_data").stat().st_size
    bundle = load_model_dir(external_model_dir)
    assert bundle.sha256 != sha256_file(graph)
    damaged = _copy(external_model_dir, tmp_path / "damaged")
    with open(damaged / "model.onnx_data", "r+b") as handle:
        handle.seek(5000)
        byte = handle.read(1)
        handle.seek(5000)
        handle.write(bytes([byte[0] ^ 1]))
    assert load_model_dir(damaged).sha256 != bundle.sha256


def test_a_graph_with_inline_weights_keeps_its_files_sha(tiny_model_dir):
    assert load_model_dir(tiny_model_dir).sha256 == sha256_file(tiny_model_dir / "model.onnx")


def test_a_file_per_tensor_is_copied_into_one_data_file_with_the_same_scores(per_tensor_dir, tmp_path):
    assert len(onnx_files.data_files(per_tensor_dir / "model.onnx")) > 10
    out = onnx_files.copy_model(per_tensor_dir / "model.onnx", tmp_path / "model.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx_data"]
    np.testing.assert_array_equal(_logits(out), _logits(per_tensor_dir / "model.onnx"))


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/hostname", "sub/../../x"])
def test_a_location_outside_the_models_directory_is_refused(external_model_dir, tmp_path, location):
    model = onnx_files.read_graph(external_model_dir / "model.onnx")
    for tensor in onnx_files.tensors(model):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    (tmp_path / "m").mkdir()
    onnx.save_model(model, str(tmp_path / "m" / "model.onnx"))
    (tmp_path / "outside.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ModelError, match="leaves the model's directory"):
        onnx_files.model_sha256(tmp_path / "m" / "model.onnx")


def test_a_data_file_that_links_to_a_regular_file_is_followed_and_one_to_a_device_refused(external_model_dir,
                                                                                         tmp_path):
    """A Hugging Face snapshot links every file to a blob outside it: the data file too. A link to `/dev/zero`
    would hash forever: refused unread."""
    linked = _copy(external_model_dir, tmp_path / "linked")
    (linked / "model.onnx_data").rename(tmp_path / "blob")
    os.symlink(tmp_path / "blob", linked / "model.onnx_data")
    assert load_model_dir(linked).sha256 == load_model_dir(external_model_dir).sha256
    (linked / "model.onnx_data").unlink()
    os.symlink("/dev/zero", linked / "model.onnx_data")
    with pytest.raises(ModelError, match="not a regular file"):
        load_model_dir(linked)


def test_a_missing_data_file_is_one_line(external_model_dir, tmp_path):
    missing = _copy(external_model_dir, tmp_path / "missing")
    (missing / "model.onnx_data").unlink()
    with pytest.raises(ModelError, match="is missing"):
        load_model_dir(missing)


def _int8_pair(external_model_dir: Path, tmp_path: Path, scales: str) -> tuple[Path, Path, Path]:
    """The same model quantized as `scales` from its external-data form and from a copy with its weights inline."""
    inline = tmp_path / "inline" / "model.onnx"
    inline.parent.mkdir()
    onnx_files.save_model(onnx_files.read_graph(external_model_dir / "model.onnx"), inline,
                          base=external_model_dir, external=False)
    assert onnx_files.data_files(inline) == []
    outs = []
    for name, source in (("ext", external_model_dir / "model.onnx"), ("inl", inline)):
        (tmp_path / name).mkdir()
        outs.append(quantize_to(tmp_path / name / "model.onnx", source, has_vnni=True, variant=Int8Variant(scales)))
    assert sorted(p.name for p in (tmp_path / "ext").iterdir()) == ["model.onnx", "model.onnx_data"]
    return outs[0], outs[1], inline


def test_per_token_int8_of_an_external_graph_is_that_of_the_same_graph_inline(external_model_dir, tmp_path):
    """The rewrite streams one weight at a time; it must give the very scores of the graph with every weight in
    memory, and hand on one data file."""
    external, inline_int8, inline = _int8_pair(external_model_dir, tmp_path, "per-token")
    np.testing.assert_array_equal(_logits(external), _logits(inline_int8))
    assert abs(float(_logits(external)[0, 0]) - float(_logits(inline)[0, 0])) < 0.05


@pytest.mark.parametrize("scales", ["per-channel", "per-tensor"])
def test_dynamic_int8_of_an_external_graph_is_onnxruntimes_scheme_one_weight_at_a_time(external_model_dir,
                                                                                       tmp_path, scales):
    """onnxruntime's quantizer loads every weight (6.6 GB on a 2.2 GB graph); the streaming rewrite stores the
    very int8 weights and scales it stores, as the kernel onnxruntime fuses its graph into."""
    from onnx import numpy_helper

    external, inline_int8, _ = _int8_pair(external_model_dir, tmp_path, scales)
    ours = onnx.load(str(external))
    assert {n.op_type for n in ours.graph.node} >= {"DynamicQuantizeMatMul"}
    assert "MatMulInteger" not in {n.op_type for n in ours.graph.node}
    theirs = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(inline_int8)).graph.initializer}
    kernels = [n for n in ours.graph.node if n.op_type == "DynamicQuantizeMatMul"]
    weights = {i.name: numpy_helper.to_array(i) for i in ours.graph.initializer}
    source = onnx_files.read_graph(external_model_dir / "model.onnx")
    names = {n.name: n.input[1] for n in source.graph.node if n.op_type == "MatMul"}
    for kernel in kernels:
        np.testing.assert_array_equal(weights[kernel.input[1]], theirs[names[kernel.name] + "_quantized"])
        np.testing.assert_allclose(weights[kernel.input[2]], theirs[names[kernel.name] + "_scale"], rtol=1e-6)
    # the activations are quantized by the same rule; where onnxruntime folds a bias or shares a quantized input
    # its float rounding differs, and a value on a rounding edge can move one step
    np.testing.assert_allclose(_logits(external), _logits(inline_int8), atol=2e-3)


def test_a_rewritten_graph_is_checked_before_it_is_handed_on(tmp_path, monkeypatch):
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("NoSuchOp", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])]))
    onnx.save_model(model, str(tmp_path / "bad.onnx"))
    with pytest.raises(ModelError, match="fails onnx's checker"):
        onnx_files.check_saved(tmp_path / "bad.onnx", "the graph")
