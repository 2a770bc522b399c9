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


def _trained(kind: str, path) -> str:
    """A byte-level BPE (RoBERTa, ModernBERT) or a Metaspace unigram (XLM-R) tokenizer, trained here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    corpus = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] * 5
    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "<pad>"],
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    else:
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.train_from_iterator(corpus, trainers.UnigramTrainer(vocab_size=200, special_tokens=["<s>", "</s>", "<pad>"],
                                                                unk_token="<pad>"))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    tok.save(str(path))
    return str(path)


WORDS = ["memory", "Maya", "allergic", "peanuts,", "deploy", "freeze", "(staging)", "déjà", "vu", "東京は", "🍣",
         "renewal:", "2026-12-05", "don't", "churn", "x" * 40, "boiler.", "\n", "  ", "\t", "end.", "qz" * 70]


def _text(rng, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_long_texts_are_cut_where_truncation_gives_the_same_ids(tmp_path):
    """The cut before tokenizing (a 50 MB document is never tokenized whole) changes no id, on WordPiece,
    byte-level BPE and Metaspace tokenizers, with the query, the document or both past the model's length,
    and near the odd/even split `longest_first` makes when both are."""
    import random

    rng = random.Random(7)
    paths = [TOKENIZER, _trained("bpe", tmp_path / "bpe.json"), _trained("unigram", tmp_path / "uni.json")]
    cut = 0
    for path in paths:
        for max_length in (64, 65):
            tok = PairTokenizer(path, max_length)
            for _ in range(15):
                query = _text(rng, rng.choice([3, 20, 100, 200]))
                docs = [_text(rng, rng.choice([2, 60, 120, 300])) for _ in range(4)]
                expected = tok._tok.encode_batch([(query, d) for d in docs])
                got = tok.encode(query, docs)
                cut += sum(p != (query, d) for p, d in zip(tok.pairs(query, docs), docs, strict=True))
                assert [e.ids for e in got] == [e.ids for e in expected], (path, max_length, query[:40])
                assert [e.type_ids for e in got] == [e.type_ids for e in expected]
    assert cut > 40, "too few pairs were cut: the test would not see a wrong cut"


def test_a_huge_document_is_never_tokenized_whole():
    tok = PairTokenizer(TOKENIZER, 512)
    huge = "memory " * 2_000_000  # 14 MB
    [(_query, doc)] = tok.pairs("what is remembered?", [huge])
    assert len(doc) < 100_000 and huge.startswith(doc)


def test_a_cut_that_leaves_no_room_for_the_texts_is_refused(tiny_model_dir):
    """Issue 46, item 7: `--max-tokens 1` or `2` cut nothing at all (25 tokens came back) and the run wrote
    ONNX_MAX_TOKENS=1 with its gate at 1.000."""
    import pytest

    from autotune.errors import OptionsError
    from autotune.runtime.tokenize import PairTokenizer

    for length in (1, 2, 4):
        with pytest.raises(OptionsError, match="the shortest cut this model takes is 5"):
            PairTokenizer(tiny_model_dir / "tokenizer.json", length)
    shortest = PairTokenizer(tiny_model_dir / "tokenizer.json", 5)
    assert all(len(e.ids) == 5 for e in shortest.encode("what is the capital", ["Paris is the capital of France"]))
