"""The model families users run, as tiny random-weight cross-encoders: BERT, XLM-R and ModernBERT.

Each is built with transformers and exported with torch's ONNX exporter (the one optimum drives;
optimum-onnx itself pins transformers < 4.58, which Hindsight 1.1's transformers >= 5.5 excludes
from this environment). One suite runs over all three: the engine and `serve` must give
transformers' own logits within 1e-4 in fp32, on the very token ids the engine fed, including a
ModernBERT pair far past 512 tokens; the fused graph is made or refused with a reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from autotune.runtime.engine import EngineConfig, EngineTraits
from autotune.runtime.fusion import FusionUnavailable, fused_model_path
from autotune.runtime.model import load_model_dir
from autotune.runtime.sessions import EnginePool
from autotune.serve.service import RerankService
from autotune.serve.settings import ServeSettings
from tests.conftest import DOCS
from tests.support.http import LiveServer

WORDS = sorted({w.strip(".,!?;:()[]").lower() for d in DOCS for w in d.split()} | {"what", "is", "the", "capital",
                                                                                      "of", "france", "word"})
LONG_DOC = "word " * 2100
CONFIG = EngineConfig(batch_size=4, intra_op_threads=1, length_sort=True, precision="fp32")


@dataclass(frozen=True)
class Family:
    name: str
    model_type: str
    special: tuple[str, ...]  # pad, unk, cls, sep
    positions: int
    type_ids: bool

    def config(self, vocab: int) -> transformers.PretrainedConfig:
        ids = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
        if self.model_type == "bert":
            return transformers.BertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=4, intermediate_size=64, num_labels=1,
                                           max_position_embeddings=self.positions, **ids)
        if self.model_type == "xlm-roberta":
            return transformers.XLMRobertaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2,
                                                 num_attention_heads=4, intermediate_size=64, num_labels=1,
                                                 max_position_embeddings=self.positions + 2, type_vocab_size=1,
                                                 **ids)
        return transformers.ModernBertConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=3,
                                             num_attention_heads=4, intermediate_size=64, num_labels=1,
                                             max_position_embeddings=self.positions, global_attn_every_n_layers=2,
                                             local_attention=16, cls_token_id=2, sep_token_id=3, **ids)


FAMILIES = [
    Family("bert", "bert", ("[PAD]", "[UNK]", "[CLS]", "[SEP]"), 512, True),
    Family("xlm-r", "xlm-roberta", ("<pad>", "<unk>", "<s>", "</s>"), 512, False),
    Family("modernbert", "modernbert", ("[PAD]", "[UNK]", "[CLS]", "[SEP]"), 8192, False),
]


def _tokenizer(family: Family) -> Tokenizer:
    """A word-level tokenizer with the family's pair template (RoBERTa doubles the separator)."""
    pad, unk, cls, sep = family.special
    vocab = {tok: i for i, tok in enumerate([pad, unk, cls, sep, *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()])
    pair = f"{cls} $A {sep} {sep} $B:1 {sep}:1" if family.model_type == "xlm-roberta" else \
        f"{cls} $A {sep} $B:1 {sep}:1"
    tok.post_processor = processors.TemplateProcessing(single=f"{cls} $A {sep}", pair=pair,
                                                       special_tokens=[(cls, 2), (sep, 3)])
    tok.enable_padding(pad_id=0, pad_token=pad)
    return tok


@pytest.fixture(scope="module", params=FAMILIES, ids=[f.name for f in FAMILIES])
def family_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    family: Family = request.param
    return family, *export(family, tmp_path_factory.mktemp(family.name))


def export(family: Family, directory: Path) -> tuple[Path, torch.nn.Module]:
    """A tiny random cross-encoder of the family, exported as ONNX with its tokenizer and config."""
    tokenizer = _tokenizer(family)
    tokenizer.save(str(directory / "tokenizer.json"))
    torch.manual_seed(0)
    model_cls = {"bert": transformers.BertForSequenceClassification,
                 "xlm-roberta": transformers.XLMRobertaForSequenceClassification,
                 "modernbert": transformers.ModernBertForSequenceClassification}[family.model_type]
    config = family.config(tokenizer.get_vocab_size())
    config._attn_implementation = "eager"  # the attention pattern onnxruntime's optimizer knows (SDPA's it does not)
    model = model_cls(config).eval()
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if family.type_ids else [])
    sample = tuple(torch.ones((2, 16), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"logits": {0: "batch"}}
    torch.onnx.export(model, sample, str(directory / "model.onnx"), input_names=names, output_names=["logits"],
                      dynamic_axes=axes, opset_version=17, dynamo=False)
    (directory / "config.json").write_text(json.dumps({**model.config.to_dict(),
                                                       "max_position_embeddings": family.positions}))
    return directory, model


def _transformers_logits(model: torch.nn.Module, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with torch.no_grad():
        return model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits[:, 0].numpy()


def test_engine_scores_like_transformers_on_the_ids_it_fed(family_dir):
    family, directory, model = family_dir
    pool = EnginePool(load_model_dir(directory), has_vnni=False)
    assert pool.max_length == family.positions
    docs = DOCS + ([LONG_DOC] if family.positions > 512 else [])
    result = pool.engine(CONFIG).score("What is the capital of France?", docs)
    encodings = pool.tokenizer.encode("What is the capital of France?", docs)
    if family.positions > 512:
        assert max(len(e.ids) for e in encodings) > 2000  # not truncated at 512
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose(result.raw, expected, atol=1e-4)


def test_truncation_at_max_tokens_matches_transformers_on_the_truncated_ids(family_dir):
    _family, directory, model = family_dir
    pool = EnginePool(load_model_dir(directory), has_vnni=False, traits=EngineTraits(max_tokens=64))
    result = pool.engine(CONFIG).score("What is the capital of France?", [LONG_DOC, DOCS[0]])
    encodings = pool.tokenizer.encode("What is the capital of France?", [LONG_DOC, DOCS[0]])
    assert len(encodings[0].ids) == 64
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose(result.raw, expected, atol=1e-4)


def test_serve_scores_like_transformers_within_its_token_budget(family_dir):
    family, directory, model = family_dir
    service = RerankService(ServeSettings(config=CONFIG, model=str(directory), max_batch_tokens=4096),
                            has_vnni=False)
    texts = [LONG_DOC if family.positions > 512 else DOCS[-1], *DOCS[:3]]
    with LiveServer(service) as live:
        answer = httpx.post(live.url + "/rerank", timeout=120,
                            json={"query": "What is the capital of France?", "texts": texts, "raw_scores": True})
    assert answer.status_code == 200
    got = {item["index"]: item["score"] for item in answer.json()}
    pool = EnginePool(load_model_dir(directory), has_vnni=False)
    encodings = pool.tokenizer.encode("What is the capital of France?", texts)
    expected = [_transformers_logits(model, pool.tokenizer.pad([e], pool.backend(CONFIG).input_names).feeds)[0]
                for e in encodings]
    np.testing.assert_allclose([got[i] for i in range(len(texts))], expected, atol=1e-4)


def test_the_fused_graph_is_made_and_scores_alike_or_refused_with_a_reason(family_dir):
    family, directory, _ = family_dir
    bundle = load_model_dir(directory)
    plain = EnginePool(bundle, has_vnni=False).engine(CONFIG).score("What is the capital of France?", DOCS).raw
    try:
        path = fused_model_path(bundle)
    except FusionUnavailable as exc:
        assert family.model_type == "modernbert", exc  # the BERT family's optimizer has no ModernBERT fusion
        assert "model_type" in str(exc)
        return
    assert Path(path).exists()
    fused = EnginePool(bundle, has_vnni=False).engine(EngineConfig(4, 1, True, "fp32", graph="fused"))
    np.testing.assert_allclose(fused.score("What is the capital of France?", DOCS).raw, plain, atol=1e-4)
