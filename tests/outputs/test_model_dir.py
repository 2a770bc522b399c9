from __future__ import annotations

import builtins
import json
import stat

import pytest

from autotune.errors import ModelError
from autotune.fileio import umask
from autotune.outputs.model_dir import check_tokenizer, stage_model_dir
from autotune.outputs.ownership import MODEL_MARKER, marker_text
from autotune.runtime.tokenize import PairTokenizer

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
QUERIES = [("what is the capital of France?", ["Paris is the capital.", "東京 " * 200])]
PAIRS = [[(q, d) for d in docs] for q, docs in QUERIES]


def expected(model_dir, max_tokens=128):
    tok = PairTokenizer(model_dir / "tokenizer.json", max_tokens)
    return [[{"input_ids": e.ids, "token_type_ids": e.type_ids, "attention_mask": [1] * len(e.ids)}
             for e in tok.encode(q, docs)] for q, docs in QUERIES]


def test_staged_dir_is_readable_by_others_and_commits_whole(tmp_path, tiny_model_dir):
    dest = tmp_path / "models" / "r"
    dest.mkdir(parents=True)
    (dest / MODEL_MARKER).write_text(marker_text("r", "0" * 64))  # an earlier run's
    (dest / "stale.txt").write_text("from an earlier run")
    staged = stage_model_dir(dest, onnx_file=tiny_model_dir / "model.onnx", source_dir=tiny_model_dir,
                             input_names=INPUTS, max_tokens=128, owner="r")
    assert (dest / "stale.txt").exists()  # nothing changes until commit
    staged.commit()
    assert not (dest / "stale.txt").exists() and (dest / "model.onnx").exists()
    assert stat.S_IMODE(dest.stat().st_mode) == 0o755 & ~umask()
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 & ~umask() for p in dest.iterdir())
    assert [p.name for p in dest.parent.iterdir()] == ["r"]


def test_missing_tokenizer_config_is_written_with_the_graphs_inputs(tmp_path, tiny_model_dir):
    pytest.importorskip("transformers", reason="the AutoTokenizer check needs transformers (the torch extra)")
    staged = stage_model_dir(tmp_path / "r", onnx_file=tiny_model_dir / "model.onnx", source_dir=tiny_model_dir,
                             input_names=INPUTS, max_tokens=128, owner="r")
    config = json.loads((staged.staging / "tokenizer_config.json").read_text())
    assert config["model_input_names"] == list(INPUTS)
    check = check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS)
    assert check.checked and check.pairs == 2
    staged.discard()
    assert not list(tmp_path.iterdir())


def test_a_tokenizer_without_token_type_ids_is_refused(tmp_path, tiny_model_dir):
    """Hindsight would feed zeros for the second segment: the scores of a BERT then change."""
    pytest.importorskip("transformers", reason="the AutoTokenizer check needs transformers (the torch extra)")
    staged = stage_model_dir(tmp_path / "r", onnx_file=tiny_model_dir / "model.onnx", source_dir=tiny_model_dir,
                             input_names=INPUTS, max_tokens=128, owner="r")
    (staged.staging / "tokenizer_config.json").write_text(json.dumps({"model_input_names": ["input_ids",
                                                                                           "attention_mask"]}))
    with pytest.raises(ModelError, match=r"token_type_ids differ.*gives no token_type_ids"):
        check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS)


def test_a_different_truncation_is_refused(tmp_path, tiny_model_dir):
    pytest.importorskip("transformers", reason="the AutoTokenizer check needs transformers (the torch extra)")
    staged = stage_model_dir(tmp_path / "r", onnx_file=tiny_model_dir / "model.onnx", source_dir=tiny_model_dir,
                             input_names=INPUTS, max_tokens=128, owner="r")
    with pytest.raises(ModelError, match="input_ids differ, 128 tokens against 64"):
        check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir, 64), 128, INPUTS)


def test_without_transformers_the_check_says_it_was_skipped(tmp_path, tiny_model_dir, monkeypatch):
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name.startswith("transformers"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    check = check_tokenizer(tmp_path, PAIRS, expected(tiny_model_dir), 128, INPUTS)
    assert not check.checked and "skipped" in check.note


def test_a_passed_check_is_read_again_for_the_same_files_and_pairs_only(tmp_path, tiny_model_dir, monkeypatch):
    """`import transformers` takes seconds (torch, scikit-learn): a rerun on the same files and workload reads the
    verdict; another tokenizer file, other pairs or `--fresh` check again."""
    from autotune.outputs import model_dir
    from autotune.paths import read_caches

    pytest.importorskip("transformers", reason="the AutoTokenizer check needs transformers (the torch extra)")
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "cache"))
    staged = stage_model_dir(tmp_path / "r", onnx_file=tiny_model_dir / "model.onnx", source_dir=tiny_model_dir,
                             input_names=INPUTS, max_tokens=128, owner="r")
    first = check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS)
    assert first.checked and not first.remembered
    checked = []
    real = model_dir._check_with_transformers
    monkeypatch.setattr(model_dir, "_check_with_transformers", lambda *a: checked.append(a) or real(*a))
    again = check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS)
    assert again.remembered and again.tokenizer_class == first.tokenizer_class and again.pairs == 2 and not checked
    check_tokenizer(staged.staging, [PAIRS[0][:1]], [expected(tiny_model_dir)[0][:1]], 128, INPUTS)
    assert len(checked) == 1  # other pairs: checked
    (staged.staging / "special_tokens_map.json").write_text("{}")
    check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS)
    assert len(checked) == 2  # another file AutoTokenizer may read: checked
    read_caches(False)
    try:
        assert not check_tokenizer(staged.staging, PAIRS, expected(tiny_model_dir), 128, INPUTS).remembered
    finally:
        read_caches(True)
    assert len(checked) == 3
    staged.discard()
