"""A trained sentence encoder scored as a bi-encoder inside a cross-encoder graph (the embedded default).

Hindsight's `onnx` provider feeds any cross-encoder the tokenized pair `[CLS] q [SEP] d [SEP]` with
`token_type_ids` 0 for the query segment and 1 for the document's. This graph takes exactly those
inputs and, in one pass over the pair (the same layers and, but for one column, the same sequence
length as a MiniLM-L6 cross-encoder, so the same cost profile), computes what
sentence-transformers' `encode` + cosine computes on the same weights:

- attention is confined to each segment (a block-diagonal mask built from `token_type_ids`);
- positions restart per segment, as if each text were encoded alone, and every token gets the type
  embedding the encoder was trained with (0);
- the document's own `[CLS]` is one extra column (a copy of the pair's first id) at position 0 of
  the document's segment: attention is order-free once positions are given, so where that column
  sits does not matter;
- each segment is mean-pooled over its tokens and L2-normalised; the one logit is
  `SCALE * cos + SHIFT`, a cross-encoder-like range whose sigmoid Hindsight takes.

The scores come from trained weights; a trained cross-encoder still ranks better.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from autotune.runtime.bert_onnx import BertShape, _GraphBuilder, encoder_layers, finish_model

# 20 is the temperature sentence-transformers' contrastive losses train with; -10 centres the
# sigmoid on a cosine of 0.5, between MiniLM's usual unrelated (~0.1-0.3) and related (~0.6-0.9) pairs.
SCALE = 20.0
SHIFT = -10.0
DESCRIPTION = ("all-MiniLM-L6-v2 scored as a bi-encoder inside a cross-encoder graph; a trained cross-encoder "
               "ranks better; tune yours with --model")


def build_biencoder_graph(weights: dict[str, np.ndarray], config: dict[str, Any], *,
                          fused_attention: bool = False) -> onnx.ModelProto:
    """The graph described above, from a BERT sentence encoder's safetensors (keys with or without `bert.`)."""
    shape = BertShape.from_config(config)
    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    g = _GraphBuilder()
    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"

    def i64(hint: str, value: int | list[int]) -> str:
        return g.const(hint, np.array(value, np.int64))

    one_i, zero_i = i64("one_i", 1), i64("zero_i", 0)  # scalars (CumSum's axis is one too)
    seq_axis = i64("seq_axis", [1])  # ReduceSum's axes: a vector
    first_col = g.op("Slice", [ids, i64("s0", [0]), i64("s1", [1]), i64("ax1", [1])])  # [B, 1]: each pair's [CLS]
    ones_col = g.op("Add", [g.op("Mul", [first_col, zero_i]), one_i])
    zeros_col = g.op("Mul", [first_col, zero_i])

    def extend(x: str, col: str) -> str:  # [B, S] -> [B, S + 1]: the document's [CLS] column at the end
        return g.op("Concat", [x, col], axis=1)

    doc = g.op("Mul", [mask, types])  # 1 on the document's tokens (its [SEP] included)
    query = g.op("Mul", [mask, g.op("Sub", [one_i, types])])  # 1 on [CLS] q [SEP]
    doc_x, query_x = extend(doc, ones_col), extend(query, zeros_col)
    q_pos = g.op("Mul", [g.op("Sub", [g.op("CumSum", [query, one_i]), one_i]), query])  # 0, 1, ...
    d_pos = g.op("Mul", [g.op("CumSum", [doc, one_i]), doc])  # 1, 2, ... after the document's [CLS] at 0
    positions = extend(g.op("Add", [q_pos, d_pos]), zeros_col)

    word = g.const("word_embeddings", w["embeddings.word_embeddings.weight"].astype(np.float32))
    pos_table = g.const("position_embeddings", w["embeddings.position_embeddings.weight"].astype(np.float32))
    type0 = g.const("token_type_0", w["embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    emb = g.op("Add", [g.op("Add", [g.op("Gather", [word, extend(ids, first_col)], axis=0), type0]),
                       g.op("Gather", [pos_table, positions], axis=0)])
    hidden = g.layer_norm(emb, w, "embeddings.LayerNorm", shape.layer_norm_eps)

    # token i may attend to token j when j is a real token of i's segment (padding falls in the query's
    # segment as a row, so no row is empty, and is masked out as a column)
    same = g.op("Equal", [g.op("Unsqueeze", [doc_x, i64("ax2", [2])]), g.op("Unsqueeze", [doc_x, i64("ax1b", [1])])])
    valid = g.op("Cast", [g.op("Unsqueeze", [extend(mask, ones_col), i64("ax1c", [1])])], to=TensorProto.BOOL)
    allowed = g.op("And", [same, valid])  # [B, S + 1, S + 1]
    if fused_attention:
        mask_in = g.op("Cast", [allowed], to=TensorProto.INT32)
    else:
        bias = g.op("Where", [allowed, g.const("zero_f", np.array(0.0, np.float32)),
                              g.const("neg", np.array(np.finfo(np.float32).min, np.float32))])
        mask_in = g.op("Unsqueeze", [bias, i64("ax1d", [1])])  # [B, 1, S + 1, S + 1]
    hidden = encoder_layers(g, hidden, w, shape, mask_in, fused_attention)

    def pooled(indicator: str, hint: str) -> str:
        """Mean over the segment, then L2-normalised, as sentence-transformers' Pooling and Normalize do."""
        weight = g.op("Unsqueeze", [g.op("Cast", [indicator], to=TensorProto.FLOAT), i64(f"{hint}_ax", [2])])
        total = g.op("ReduceSum", [g.op("Mul", [hidden, weight]), seq_axis], keepdims=0)
        count = g.op("Max", [g.op("ReduceSum", [weight, seq_axis], keepdims=0),
                             g.const(f"{hint}_min_count", np.array(1e-9, np.float32))])
        mean = g.op("Div", [total, count])
        norm = g.op("Max", [g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [mean, mean]), seq_axis], keepdims=1)]),
                            g.const(f"{hint}_min_norm", np.array(1e-12, np.float32))])
        return g.op("Div", [mean, norm])

    cosine = g.op("ReduceSum", [g.op("Mul", [pooled(query_x, "query"), pooled(doc_x, "doc")]), seq_axis],
                  keepdims=1)
    logits = g.op("Add", [g.op("Mul", [cosine, g.const("scale", np.array(SCALE, np.float32))]),
                          g.const("shift", np.array(SHIFT, np.float32))])
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    return finish_model(g, "biencoder_in_cross_encoder", [ids, mask, types], outputs, fused_attention)
