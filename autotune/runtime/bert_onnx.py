"""Build a 1-logit BERT cross-encoder ONNX graph from safetensors weights, without torch.

The graph is the one `BertForSequenceClassification` computes at inference:
embeddings -> N encoder layers (post-LN, exact-erf GELU) -> tanh pooler on [CLS] -> linear head.
ONNX Runtime's optimizer fuses attention, GELU and LayerNorm on load, so the plain ops
here still run on ORT's fast kernels.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
PROTOBUF_LIMIT = 2**31 - 1  # past it a graph is saved with external data and checked from disk
STAND_IN_HEAD_SEED = 20240917


@dataclass(frozen=True)
class BertShape:
    """The few config.json fields the graph depends on."""

    num_layers: int
    hidden_size: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float
    vocab_size: int
    max_position_embeddings: int
    type_vocab_size: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BertShape:
        try:
            shape = cls(
                num_layers=int(config["num_hidden_layers"]),
                hidden_size=int(config["hidden_size"]),
                num_heads=int(config["num_attention_heads"]),
                intermediate_size=int(config["intermediate_size"]),
                layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
                vocab_size=int(config["vocab_size"]),
                max_position_embeddings=int(config.get("max_position_embeddings", 512)),
                type_vocab_size=int(config.get("type_vocab_size", 2)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"config.json lacks a BERT field: {exc}") from exc
        if shape.hidden_size % shape.num_heads:
            raise ValueError("config.json: hidden_size is not a multiple of num_attention_heads")
        if config.get("hidden_act", "gelu") not in ("gelu", "gelu_python"):
            raise ValueError(f"config.json: unsupported hidden_act {config.get('hidden_act')!r}")
        return shape


def classifier_head(weights: dict[str, np.ndarray], hidden: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """The checkpoint's `classifier.*` head (1 or 2 logits), or a seeded 1-logit stand-in (third item False)."""
    if "classifier.weight" in weights:
        weight = weights["classifier.weight"].astype(np.float32)
        bias = weights.get("classifier.bias", np.zeros(weight.shape[0], np.float32)).astype(np.float32)
        if weight.ndim != 2 or weight.shape[0] not in (1, 2) or weight.shape[1] != hidden:
            raise ValueError(f"classifier.weight has shape {weight.shape}; a cross-encoder head is (1 or 2, {hidden})")
        return weight, bias, True
    warnings.warn(
        "checkpoint has no classifier.* weights: using a seeded stand-in head. "
        "Latency is representative; rankings are not meaningful.",
        stacklevel=2,
    )
    rng = np.random.default_rng(STAND_IN_HEAD_SEED)
    weight = rng.normal(0.0, 0.5, size=(1, hidden)).astype(np.float32)
    return weight, np.zeros(1, np.float32), False


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._n = 0

    def name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, hint: str) -> str:
        w = self.const(f"{hint}.weight_t", np.ascontiguousarray(weight.T.astype(np.float32)))
        b = self.const(f"{hint}.bias", bias.astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w], hint), b], hint)

    def layer_norm(self, x: str, weights: dict[str, np.ndarray], prefix: str, eps: float) -> str:
        scale = self.const(f"{prefix}.weight", weights[f"{prefix}.weight"].astype(np.float32))
        bias = self.const(f"{prefix}.bias", weights[f"{prefix}.bias"].astype(np.float32))
        return self.op("LayerNormalization", [x, scale, bias], prefix, axis=-1, epsilon=eps)


def _plain_attention(g: _GraphBuilder, hidden: str, w: dict[str, np.ndarray], p: str, bias: str,
                     split_heads: str, merge_heads: str, scale: str) -> str:
    """Self-attention in standard ops: Q/K/V projections, scaled scores plus the mask bias, softmax."""
    heads = {}
    for name, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
        projected = g.linear(hidden, w[f"{p}.attention.self.{name}.weight"],
                             w[f"{p}.attention.self.{name}.bias"], f"{p}.{name}")
        heads[name] = g.op("Transpose", [g.op("Reshape", [projected, split_heads])], perm=perm)
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [heads["query"], heads["key"]]), scale]), bias])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [probs, heads["value"]])], perm=[0, 2, 1, 3])
    return g.op("Reshape", [ctx, merge_heads])


def _fused_attention(g: _GraphBuilder, hidden: str, w: dict[str, np.ndarray], p: str, num_heads: int,
                     mask_i32: str) -> str:
    """The same attention as one `com.microsoft.Attention` node: QKV packed as [hidden, 3 x hidden]."""
    names = ("query", "key", "value")
    packed = np.concatenate([w[f"{p}.attention.self.{n}.weight"].T for n in names], axis=1)
    packed_bias = np.concatenate([w[f"{p}.attention.self.{n}.bias"] for n in names])
    qkv = g.const(f"{p}.qkv.weight", np.ascontiguousarray(packed.astype(np.float32)))
    qkv_bias = g.const(f"{p}.qkv.bias", packed_bias.astype(np.float32))
    out = g.name(f"{p}.attention")
    g.nodes.append(helper.make_node("Attention", [hidden, qkv, qkv_bias, mask_i32], [out], name=out,
                                    domain="com.microsoft", num_heads=num_heads))
    return out


def encoder_layers(g: _GraphBuilder, hidden: str, w: dict[str, np.ndarray], shape: BertShape, mask_in: str,
                   fused_attention: bool) -> str:
    """The N post-LN BERT layers. `mask_in` is what the attention takes: an additive float bias that
    broadcasts to [B, heads, S, S] for the plain ops, or the int32 0/1 mask ([B, S] or [B, S, S]) for
    the fused op."""
    head_dim = shape.hidden_size // shape.num_heads
    if not fused_attention:  # the fused op splits heads and scales itself
        split_heads = g.const("split_heads", np.array([0, 0, shape.num_heads, head_dim], np.int64))
        merge_heads = g.const("merge_heads", np.array([0, 0, shape.hidden_size], np.int64))
        scale = g.const("scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    sqrt2 = g.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    half = g.const("half", np.array(0.5, np.float32))
    one = g.const("one_g", np.array(1.0, np.float32))
    for i in range(shape.num_layers):
        p = f"encoder.layer.{i}"
        if fused_attention:
            ctx = _fused_attention(g, hidden, w, p, shape.num_heads, mask_in)
        else:
            ctx = _plain_attention(g, hidden, w, p, mask_in, split_heads, merge_heads, scale)
        attn = g.linear(ctx, w[f"{p}.attention.output.dense.weight"], w[f"{p}.attention.output.dense.bias"],
                        f"{p}.attention.output")
        hidden = g.layer_norm(g.op("Add", [attn, hidden]), w, f"{p}.attention.output.LayerNorm",
                              shape.layer_norm_eps)
        inter = g.linear(hidden, w[f"{p}.intermediate.dense.weight"], w[f"{p}.intermediate.dense.bias"],
                         f"{p}.intermediate")
        erf = g.op("Erf", [g.op("Div", [inter, sqrt2])])
        gelu = g.op("Mul", [g.op("Mul", [inter, half]), g.op("Add", [erf, one])])
        out = g.linear(gelu, w[f"{p}.output.dense.weight"], w[f"{p}.output.dense.bias"], f"{p}.output")
        hidden = g.layer_norm(g.op("Add", [out, hidden]), w, f"{p}.output.LayerNorm", shape.layer_norm_eps)
    return hidden


def finish_model(g: _GraphBuilder, name: str, inputs: list[str], outputs: list[onnx.ValueInfoProto],
                 fused_attention: bool) -> onnx.ModelProto:
    """Inputs are int64 [batch, sequence]; the model is checked before it is returned where protobuf can hold it
    in memory (past 2 GB it is checked once saved)."""
    graph = helper.make_graph(g.nodes, name,
                              [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
                               for n in inputs], outputs, g.initializers)
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid("com.microsoft", 1)] if fused_attention else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="autotune")
    model.ir_version = 8
    if model.ByteSize() < PROTOBUF_LIMIT:
        onnx.checker.check_model(model)
    # else the checker cannot take it in memory: whoever saves it checks it by its path (`onnx_files.check_saved`)
    return model


def build_bert_cross_encoder(
    weights: dict[str, np.ndarray], config: dict[str, Any], *, hidden_state_output: bool = False,
    fused_attention: bool = False,
) -> tuple[onnx.ModelProto, bool]:
    """Return (model, has_trained_head). Keys may carry a `bert.` prefix or not.

    `hidden_state_output` also exposes `last_hidden_state` [batch, sequence, hidden] as the
    first output: the same weights as a sentence encoder (mean pooling is the caller's).
    `fused_attention` emits onnxruntime's `com.microsoft.Attention` op per layer (packed QKV,
    one kernel) where ORT's optimizer would not find the pattern in the plain ops.
    """
    shape = BertShape.from_config(config)
    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    head_w, head_b, trained = classifier_head(w, shape.hidden_size)
    g = _GraphBuilder()

    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    word = g.const("word_embeddings", w["embeddings.word_embeddings.weight"].astype(np.float32))
    pos = g.const("position_embeddings", w["embeddings.position_embeddings.weight"].astype(np.float32))
    tok = g.const("token_type_embeddings", w["embeddings.token_type_embeddings.weight"].astype(np.float32))

    seq_len = g.op("Slice", [g.op("Shape", [ids]), g.const("one", np.array([1], np.int64)),
                             g.const("two", np.array([2], np.int64))])
    pos_rows = g.op("Slice", [pos, g.const("zero", np.array([0], np.int64)), seq_len,
                              g.const("axis0", np.array([0], np.int64))])
    emb = g.op("Add", [g.op("Gather", [word, ids], axis=0), g.op("Gather", [tok, types], axis=0)])
    hidden = g.layer_norm(g.op("Add", [emb, pos_rows]), w, "embeddings.LayerNorm", shape.layer_norm_eps)

    if fused_attention:  # the fused op takes the raw 0/1 mask as int32 [B, S]
        mask_in = g.op("Cast", [mask], to=TensorProto.INT32)
    else:  # (1 - mask) * large negative, broadcast as [B, 1, 1, S]
        mask_f = g.op("Cast", [mask], to=TensorProto.FLOAT)
        inverted = g.op("Sub", [g.const("one_f", np.array(1.0, np.float32)), mask_f])
        mask_in = g.op("Mul", [inverted, g.const("neg", np.array(np.finfo(np.float32).min, np.float32))])
        mask_in = g.op("Unsqueeze", [mask_in, g.const("axes12", np.array([1, 2], np.int64))])
    hidden = encoder_layers(g, hidden, w, shape, mask_in, fused_attention)

    cls = g.op("Gather", [hidden, g.const("cls_index", np.array(0, np.int64))], axis=1)
    pooled = g.op("Tanh", [g.linear(cls, w["pooler.dense.weight"], w["pooler.dense.bias"], "pooler")])
    logits = g.linear(pooled, head_w, head_b, "classifier")
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))

    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", int(head_w.shape[0])])]
    if hidden_state_output:
        g.nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"], name="last_hidden_state"))
        outputs.insert(0, helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                                        ["batch", "sequence", shape.hidden_size]))
    return finish_model(g, "bert_cross_encoder", [ids, mask, types], outputs, fused_attention), trained
