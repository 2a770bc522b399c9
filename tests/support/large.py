"""A cross-encoder of XLM-R large's shape (bge-reranker-v2-m3's class) with seeded random weights, stored with
external data: what the large-model tests and benchmarks run (issue 52).

Full size it is 24 layers, hidden 1024, 16 heads, FFN 4096 and a vocabulary of 250,002: 568M parameters, a
2.2 GB fp32 graph, past protobuf's 2 GB, so its weights lie in `model.onnx_data`. Its speed, its memory and every
file path are a real large reranker's; its rankings mean nothing (the weights are random), and every quality
figure on it says so. `SMALL` is the same family a few MB large, forced to external data, for the fast tests.

It is exported by PyTorch's exporter (what optimum drives), so onnxruntime's optimizer finds its attention as
it would in a real export; PyTorch writes one file per tensor past 2 GB, and `layout="per-tensor"` keeps that
form where a test wants it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx

from autotune.runtime.onnx_files import copy_model, read_graph, save_model
from tests.support.families import FAMILIES, word_tokenizer

XLMR = next(f for f in FAMILIES if f.model_type == "xlm-roberta")
MAX_TOKENS = 512  # 514 positions: XLM-R's start two past the padding id


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    positions: int = MAX_TOKENS + 2


LARGE = Shape(layers=24, hidden=1024, heads=16, ffn=4096, vocab=250_002)
SMALL = Shape(layers=2, hidden=64, heads=4, ffn=128, vocab=4_000)


def build_xlmr(directory: Path, shape: Shape = SMALL, *, layout: str = "one-file", seed: int = 0) -> Path:
    """The model directory: `model.onnx` with its weights outside it (one `model.onnx_data`, or with
    `layout="per-tensor"` a file per tensor), `tokenizer.json`, `tokenizer_config.json` and `config.json`."""
    import torch
    import transformers

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = word_tokenizer(XLMR, size=shape.vocab)
    tok.save(str(directory / "tokenizer.json"))
    config = transformers.XLMRobertaConfig(
        vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads, intermediate_size=shape.ffn, max_position_embeddings=shape.positions,
        type_vocab_size=1, num_labels=1, pad_token_id=0, bos_token_id=2, eos_token_id=3)
    config._attn_implementation = "eager"  # the attention pattern onnxruntime's optimizer fuses
    torch.manual_seed(seed)
    model = transformers.XLMRobertaForSequenceClassification(config).eval()
    names = ["input_ids", "attention_mask"]
    sample = tuple(torch.ones((2, 16), dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"logits": {0: "batch"}}
    scratch = Path(tempfile.mkdtemp(prefix=".export-", dir=directory))
    try:
        with torch.no_grad():
            torch.onnx.export(model, sample, str(scratch / "model.onnx"), input_names=names,
                              output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)
        (directory / "config.json").write_text(json.dumps(model.config.to_dict()))
        del model
        if layout == "per-tensor":
            graph = read_graph(scratch / "model.onnx")
            save_model(graph, scratch / "inline.onnx", base=scratch, external=False)
            graph = onnx.load(str(scratch / "inline.onnx"))
            onnx.external_data_helper.convert_model_to_external_data(graph, all_tensors_to_one_file=False,
                                                                     size_threshold=1024)
            onnx.save_model(graph, str(directory / "model.onnx"))
        else:
            graph = read_graph(scratch / "model.onnx")
            save_model(graph, directory / "model.onnx", base=scratch, external=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"model_max_length": MAX_TOKENS, "tokenizer_class": "PreTrainedTokenizerFast",
         "model_input_names": names, "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
         "unk_token": "<unk>"}))
    return directory


def copy_of(source: Path, directory: Path) -> Path:
    """Another directory of the same model (the graph rewritten with one data file, the rest copied)."""
    directory.mkdir(parents=True, exist_ok=True)
    copy_model(source / "model.onnx", directory / "model.onnx")
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy2(source / name, directory / name)
    return directory
