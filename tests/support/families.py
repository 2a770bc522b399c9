"""Tiny random cross-encoders of three families (BERT, XLM-R, ModernBERT with 8192 positions), exported to ONNX
with a word-level tokenizer: what the family tests hold the engine to, and what benchmarks measure memory on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from tests.support.corpus import DOCS

WORDS = sorted({w.strip(".,!?;:()[]").lower() for d in DOCS for w in d.split()} | {"what", "is", "the", "capital",
                                                                                      "of", "france", "word"})
LONG_DOC = "word " * 2100


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


def word_tokenizer(family: Family, size: int = 0) -> Tokenizer:
    """A word-level tokenizer with the family's pair template (RoBERTa doubles the separator), its vocabulary
    filled to `size` entries where a model of a real vocabulary's size is wanted."""
    pad, unk, cls, sep = family.special
    words = [pad, unk, cls, sep, *WORDS]
    vocab = {tok: i for i, tok in enumerate(words + [f"w{i}" for i in range(max(0, size - len(words)))])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()])
    pair = f"{cls} $A {sep} {sep} $B:1 {sep}:1" if family.model_type == "xlm-roberta" else \
        f"{cls} $A {sep} $B:1 {sep}:1"
    tok.post_processor = processors.TemplateProcessing(single=f"{cls} $A {sep}", pair=pair,
                                                       special_tokens=[(cls, 2), (sep, 3)])
    tok.enable_padding(pad_id=0, pad_token=pad)
    return tok


def export(family: Family, directory: Path) -> tuple[Path, torch.nn.Module]:
    """A tiny random cross-encoder of the family, exported as ONNX with its tokenizer and config."""
    tokenizer = word_tokenizer(family)
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
