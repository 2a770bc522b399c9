from __future__ import annotations

from autotune.runtime.model import default_weights_dir
from autotune.runtime.tokenize import PairTokenizer

TOKENIZER = default_weights_dir() / "tokenizer.json"


def test_pair_encoding_has_no_fixed_padding():
    """tokenizer.json ships padding to 128; per-batch padding needs it off."""
    tok = PairTokenizer(TOKENIZER, 512)
    enc = tok.encode("what is the capital of france?", ["Paris is the capital of France."])[0]
    # [CLS] what is the capital of france ? [SEP] paris is the capital of france . [SEP]
    assert len(enc.ids) == 17
    assert enc.type_ids.count(1) == 8


def test_truncation_to_max_length_both_directions():
    long_doc = " ".join(["memory"] * 2000)
    right = PairTokenizer(TOKENIZER, 64).encode("q", [long_doc])[0]
    left = PairTokenizer(TOKENIZER, 64, direction="left").encode("q", [long_doc])[0]
    assert len(right.ids) == len(left.ids) == 64
    untruncated = PairTokenizer(TOKENIZER, 64, truncate=False).encode("q", [long_doc])[0]
    assert len(untruncated.ids) > 64


def test_japanese_and_emoji():
    enc = PairTokenizer(TOKENIZER, 128).encode("日本の首都は？", ["東京は日本の首都です。🍣"])[0]
    assert 5 < len(enc.ids) < 40


def test_pad_fills_only_to_longest():
    tok = PairTokenizer(TOKENIZER, 128)
    encs = tok.encode("q", ["a", "a much longer document with several words"])
    batch = tok.pad(encs, ("input_ids", "attention_mask"))
    assert set(batch.feeds) == {"input_ids", "attention_mask"}
    assert batch.feeds["input_ids"].shape == (2, max(len(e.ids) for e in encs))
    assert batch.feeds["attention_mask"].sum() == batch.real_tokens
