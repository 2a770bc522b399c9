"""int8 graphs: which variant (per-token, per-channel or per-tensor scales, and which weight MatMuls stay fp32),
quantized once and cached, or written to a scratch file while a variant is being judged.

`per-token` scales each token's activations on its own (`runtime/per_token.py`), so a pair scores the same in
any batch; `per-channel` and `per-tensor` are onnxruntime's dynamic quantization, which scales a MatMul's
whole input per batch, so a pair's scores move with its batch mates. Finer weight scales (one per output
channel) keep closer to fp32 at the same int8 GEMM cost; a MatMul kept in fp32 keeps all of its accuracy
and loses its int8 speed. Which variant keeps what the recall returns is the
search's question (`gates/int8_judge.py`); this module only builds them.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import ModelError, first_line
from autotune.paths import cache_dir
from autotune.runtime.onnx_files import check_saved, data_files, read_graph, tensor_array

if TYPE_CHECKING:
    import onnx

# tried in this order: per-token's verdict holds at every batch (and it kept the most results on the embedded
# default); per-channel keeps more of the results than per-tensor. Both of those are faster where they pass
# (1.64x and 1.46x fp32 against per-token's 1.32x on the example: docs/benchmarks.md)
SCALES = ("per-token", "per-channel", "per-tensor")


def int8_format(has_vnni: bool) -> str:
    """Which dynamic-quantization format to use on this host.

    Dynamic quantization makes activations uint8. With int8 weights (U8S8), CPUs without
    VNNI multiply through `vpmaddubsw`, whose int16 accumulator can saturate and corrupt
    scores; ORT's docs advise U8U8 (or reduce_range) there. With VNNI (`vpdpbusd`
    accumulates in int32) U8S8 is both exact and the fast path; MLAS picks AMX tiles for it
    by itself where the CPU and the OS enable them.
    """
    return "u8s8" if has_vnni else "u8u8"


@dataclass(frozen=True)
class Int8Variant:
    """One int8 graph: its scales, and the weight MatMuls left in fp32 (most sensitive first)."""

    scales: str = "per-tensor"
    fp32_nodes: tuple[str, ...] = ()
    matmuls: int = 0  # weight MatMuls in the graph, for the label (0: not counted)

    def __post_init__(self) -> None:
        if self.scales not in SCALES:
            raise ModelError(f"unknown int8 scales {self.scales!r}; choose from {', '.join(SCALES)}")

    def label(self) -> str:
        if not self.matmuls:
            return self.scales
        return f"{self.scales}, {self.matmuls - len(self.fp32_nodes)}/{self.matmuls} MatMuls"

    def tag(self) -> str:
        """What tells this variant's cached graph from another's."""
        tag = "" if self.scales == "per-tensor" else f"-{self.scales}"
        if self.fp32_nodes:
            tag += "-fp32x" + hashlib.sha256("\n".join(self.fp32_nodes).encode()).hexdigest()[:10]
        return tag

    def to_dict(self) -> dict[str, Any]:
        return {"scales": self.scales, "fp32_nodes": list(self.fp32_nodes), "matmuls": self.matmuls}

    @classmethod
    def from_dict(cls, data: Any) -> Int8Variant:
        """A profile's record; a profile written before variants existed ran per-tensor, every MatMul int8."""
        if isinstance(data, str):  # a bare scales name
            return cls(scales=data)
        if not isinstance(data, dict):
            return cls()
        nodes = data.get("fp32_nodes") or []
        matmuls = data.get("matmuls") or 0
        if not isinstance(nodes, list) or not all(isinstance(n, str) and "\0" not in n for n in nodes):
            raise ModelError("the profile's int8_variant.fp32_nodes must be a list of MatMul names")
        if isinstance(matmuls, bool) or not isinstance(matmuls, int) or not 0 <= matmuls <= 100_000:
            raise ModelError(f"the profile's int8_variant.matmuls must be a whole number of MatMuls, got {matmuls!r}")
        return cls(scales=str(data.get("scales", "per-tensor")), fp32_nodes=tuple(nodes), matmuls=matmuls)


def weight_matmuls(path: Path) -> list[str]:
    """The MatMul nodes that multiply by a weight (an initializer): the ones quantization makes int8."""
    model = read_graph(path)
    weights = {init.name for init in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and any(i in weights for i in n.input)]


def _weight_digests(path: Path) -> dict[str, str]:
    """Each weight MatMul's node name -> a digest of its weight's values: what two graphs of one model share
    when their names do not (the fused graph's MatMuls are named and numbered apart from the plain one's)."""
    model = read_graph(path)  # one weight's bytes at a time
    weights = {init.name: init for init in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type == "MatMul" and len(node.input) == 2 and node.input[1] in weights:
            array = tensor_array(weights[node.input[1]], Path(path).parent)
            out[node.name] = hashlib.sha256(str(array.shape).encode() + array.tobytes()).hexdigest()
    return out


def fp32_nodes_in(source: Path, kept: Sequence[str], names_from: Path | None = None) -> tuple[str, ...]:
    """The nodes of `source` that `kept` (weight MatMul names of `names_from`, the graph the variant was judged
    on) leaves in fp32, matched by their weights' values. A kept set none of which is in `source` is refused:
    quantizing every MatMul there would run a variant the verdict never passed (issue 50)."""
    if not kept:
        return ()
    here = _weight_digests(source)
    if names_from is None or Path(names_from) == Path(source) or all(n in here for n in kept):
        resolved = tuple(n for n in kept if n in here)
    else:
        judged = _weight_digests(names_from)
        wanted = [judged[n] for n in kept if n in judged]
        by_digest: dict[str, list[str]] = {}
        for name, digest in here.items():
            by_digest.setdefault(digest, []).append(name)
        resolved = tuple(dict.fromkeys(n for d in wanted for n in by_digest.get(d, ())))
    if not resolved:
        raise ModelError(f"the int8 variant keeps {len(kept)} MatMul(s) in fp32, none of which is a weight MatMul "
                         f"of {source}: refused rather than quantizing them all")
    return resolved


# (source, out, unsigned weights, MatMuls kept fp32) -> out: how each variant's graph is made, so that a profile's
# variant is rebuilt by name through the very code the run used
Builder = Callable[[Path, Path, bool, tuple[str, ...]], Path]


def _per_token(source: Path, out: Path, unsigned: bool, keep: tuple[str, ...]) -> Path:
    from autotune.runtime.per_token import write_per_token

    return write_per_token(source, out, unsigned_weights=unsigned, keep_fp32=keep)


def _dynamic(per_channel: bool) -> Builder:
    def build(source: Path, out: Path, unsigned: bool, keep: tuple[str, ...]) -> Path:
        if data_files(source):  # weights outside the graph: rewritten one at a time, never all loaded
            from autotune.runtime.dynamic_int8 import write_dynamic

            return write_dynamic(source, out, unsigned_weights=unsigned, per_channel=per_channel, keep_fp32=keep)
        return _onnxruntime_dynamic(source, out, unsigned, keep, per_channel)

    return build


BUILDERS: dict[str, Builder] = {"per-token": _per_token, "per-channel": _dynamic(True), "per-tensor": _dynamic(False)}


@dataclass(frozen=True)
class Rewriter:
    """A variant's graph made in memory: `read` once (per-token converts the opset), then `rewrite` a copy
    (base directory, unsigned weights, MatMuls kept fp32) as often as asked."""

    read: Callable[[Path], onnx.ModelProto]
    rewrite: Callable[[onnx.ModelProto, Path, bool, tuple[str, ...]], onnx.ModelProto]


def _rewriters() -> dict[str, Rewriter]:
    from autotune.runtime.dynamic_int8 import dynamic_graph
    from autotune.runtime.per_token import per_token_graph, per_token_source

    def dynamic(per_channel: bool) -> Rewriter:
        return Rewriter(read_graph, lambda model, base, unsigned, keep: dynamic_graph(
            model, base, unsigned_weights=unsigned, per_channel=per_channel, keep_fp32=keep))

    return {"per-token": Rewriter(per_token_source, lambda model, base, unsigned, keep: per_token_graph(
                model, base, unsigned_weights=unsigned, keep_fp32=keep)),
            "per-channel": dynamic(True), "per-tensor": dynamic(False)}


def alone_in_int8(source: Path, scales: str, *, has_vnni: bool, scratch: Path) -> Iterator[tuple[str, Path]]:
    """Each weight MatMul of `source` the only one made int8 (as `scales` makes it), written in turn to one
    file in `scratch`: the int8 fallback's sensitivities, one graph per MatMul (36 on the embedded default).

    Through each variant's builder that was a whole quantization per MatMul, onnxruntime's for the dynamic
    scales (about 1.2 s of a 90 MB graph's 1.4 s each). Here the graph is read once and each copy rewritten in
    memory by autotune's own rewrite, unchecked, since nothing of it is kept: for the dynamic scales that is
    the kernel onnxruntime fuses its own graph into, with the very int8 weights it stores (a logit within
    2e-3 of its graph's: `tests/runtime/test_onnx_files.py`). The variant the fallback then chooses is built,
    checked and judged through its builder. A graph whose weights lie outside it is written through the
    builder, streamed, as before: no copy of it is held in memory."""
    names = weight_matmuls(source)
    unsigned = int8_format(has_vnni) == "u8u8"
    out = Path(scratch) / "model.onnx"
    if data_files(source):
        for name in names:
            others = tuple(n for n in names if n != name)
            yield name, BUILDERS[scales](source, out, unsigned, others)
        return
    import onnx

    rewriter = _rewriters()[scales]
    model = rewriter.read(source)
    for name in names:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        graph = rewriter.rewrite(copy, Path(source).parent, unsigned, tuple(n for n in names if n != name))
        out.write_bytes(graph.SerializeToString())
        yield name, out


def quantize_to(out: Path, source: Path, *, has_vnni: bool, variant: Int8Variant,
                names_from: Path | None = None) -> Path:
    """Write `source` quantized as `variant` to `out`, checked by onnx's checker (every builder checks what it
    wrote); `names_from` is the graph whose
    MatMul names the variant's fp32 set holds, where that is not `source` (the plain graph, for the fused one)."""
    fp32_nodes = fp32_nodes_in(source, variant.fp32_nodes, names_from)
    return BUILDERS[variant.scales](source, out, int8_format(has_vnni) == "u8u8", fp32_nodes)


def _onnxruntime_dynamic(source: Path, out: Path, unsigned: bool, keep: tuple[str, ...], per_channel: bool) -> Path:
    """onnxruntime's own dynamic quantization, for a graph whose weights are inline (every earlier profile's
    int8 model was built by it, and `apply` rebuilds those byte for byte)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from autotune.runtime.model import quiet_root_logger

    try:
        with warnings.catch_warnings(), quiet_root_logger():
            warnings.simplefilter("ignore")
            quantize_dynamic(
                source,
                out,
                op_types_to_quantize=["MatMul"],  # embeddings and LayerNorm stay fp32
                weight_type=QuantType.QUInt8 if unsigned else QuantType.QInt8,
                per_channel=per_channel,
                nodes_to_exclude=list(keep),
                # a fused Attention's output has no inferred type: it is fp32, as every activation here
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    except Exception as exc:
        raise ModelError(f"int8 quantization of {source} failed: {first_line(exc)}") from exc
    return check_saved(out, "onnxruntime's int8 graph")


def int8_model_path(bundle: Any, has_vnni: bool, source: Path | None = None, graph: str = "plain",
                    variant: Int8Variant | None = None) -> Path:
    """Quantize (once, cached by fp32 sha256, graph, ORT version, format and variant) and return the path.

    `source` is the fp32 graph to quantize (the fused variant's file for `graph="fused"`); its
    MatMuls are quantized, a fused Attention kernel stays fp32.
    """
    import onnxruntime

    from autotune.runtime.model import cached_build

    variant = variant or Int8Variant()
    tag = ("" if graph == "plain" else f"-{graph}") + variant.tag()
    target = (cache_dir() / "int8" / f"{bundle.sha256[:16]}{tag}-ort{onnxruntime.__version__}-{int8_format(has_vnni)}"
              / "model.onnx")
    return cached_build(target, lambda tmp: quantize_to(tmp, source or bundle.onnx_path, has_vnni=has_vnni,
                                                        variant=variant, names_from=bundle.onnx_path))


def least_sensitive_first(sensitivity: dict[str, float]) -> list[str]:
    """MatMul names from the one whose quantization moves the scores least (ties by name, so it is stable)."""
    return sorted(sensitivity, key=lambda n: (sensitivity[n], n))


def keep_fp32(order: Sequence[str], quantized: int) -> tuple[str, ...]:
    """The fp32 nodes when only the `quantized` least sensitive of `order` are int8: the most sensitive first."""
    return tuple(reversed(order[quantized:]))
