"""An ONNX model as files: the graph and the external data files its weights live in.

A graph past protobuf's 2 GB limit (XLM-R large, 568M parameters, is 2.2 GB in fp32) keeps its weights beside
it: one `model.onnx_data` (optimum's layout, and the sidecar Hindsight fetches with a hub model) or one file per
tensor (PyTorch's exporter). Everything autotune does to a model goes through here, so that such a model is
hashed, copied and rewritten whole, and so that no rewrite holds the weights in memory more than one tensor at
a time: the graph is read without its data, and each tensor's bytes are streamed from where they lie to where
they go.

A location is a file name the graph gives; one that leaves the model's directory (`../../etc/shadow`, an
absolute path) is refused: reading it would hash or copy a file the model does not own. A file there may be a
link, as every file of a Hugging Face snapshot is, where it ends at a regular file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from autotune.errors import AutotuneError, ModelError, first_line
from autotune.fileio import sha256_file

if TYPE_CHECKING:  # onnx is imported where a graph is read: 0.7 s of every start (ml_dtypes)
    import onnx
    from onnx import TensorProto

_EXTERNAL = 1  # TensorProto.EXTERNAL, without importing onnx to read it

DATA_SUFFIX = "_data"  # model.onnx -> model.onnx_data: optimum's name, and the one Hindsight downloads
EXTERNAL_FROM_BYTES = 1024  # a tensor this large or larger goes to the data file (onnx's own default)
INLINE_LIMIT_BYTES = 1_800 * 2**20  # a graph whose tensors pass this is written with external data
_CHUNK = 16 * 2**20
_ALIGN = 4096  # offsets a page apart: onnxruntime can map each tensor where it lies


def read_graph(path: Path) -> onnx.ModelProto:
    """The graph without its external data (KBs to MBs, whatever the weights weigh)."""
    import onnx

    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf and onnx raise many kinds on a file that is not a model
        raise ModelError(f"{path} is not a readable ONNX model: {first_line(exc)}") from exc


def tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every tensor the graph carries: initializers and constant attributes (subgraphs included)."""
    def graph_tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    yield from graph_tensors(attr.g)
                for sub in attr.graphs:
                    yield from graph_tensors(sub)

    yield from graph_tensors(model.graph)


def _is_external(tensor: TensorProto) -> bool:
    return tensor.data_location == _EXTERNAL


def _external_info(tensor: TensorProto) -> tuple[str, int, int | None]:
    info = {entry.key: entry.value for entry in tensor.external_data}
    try:
        return (info["location"], int(info.get("offset") or 0),
                int(info["length"]) if info.get("length") else None)
    except (KeyError, ValueError):
        raise ModelError(f"tensor {tensor.name!r} has external data without a valid location, offset or "
                         "length") from None


def data_path(directory: Path, location: str) -> Path:
    """The file a location names: a name inside the model's directory, and a regular file there. A link is
    followed where it ends at a regular file (a Hugging Face snapshot links each file to a blob, the graph
    too); one to a device, a FIFO or a directory is refused unread."""
    parts = Path(location).parts
    if not location or Path(location).is_absolute() or any(p in ("..", "") for p in parts) or "\0" in location:
        raise ModelError(f"external data location {location!r} leaves the model's directory: refused")
    path = Path(directory) / location
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ModelError(f"external data file {path} is missing (the graph keeps its weights there)") from None
    except OSError as exc:
        raise ModelError(f"external data file {path} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ModelError(f"external data file {path} is not a regular file (a device, a FIFO or a directory): "
                         "refused unread")
    return path


def data_files(path: Path, model: onnx.ModelProto | None = None) -> list[Path]:
    """The external data files the graph at `path` reads, in the order their names sort."""
    model = model if model is not None else read_graph(path)
    locations = sorted({_external_info(t)[0] for t in tensors(model) if _is_external(t)})
    return [data_path(Path(path).parent, loc) for loc in locations]


def model_sha256(path: Path, *, error: type[AutotuneError] = ModelError) -> str:
    """The model's identity: its graph file's sha256 where the weights are inline (as before external data
    was read), else a sha256 over the graph's and each data file's, with their names."""
    graph_sha = sha256_file(path, what="model", error=error)
    files = data_files(path)
    if not files:
        return graph_sha
    lines = [f"{Path(path).name} {graph_sha}"] + [f"{f.name} {sha256_file(f, what='model data', error=error)}"
                                                  for f in files]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def model_bytes(path: Path) -> int:
    """What the model weighs on disk: its graph and every data file."""
    return Path(path).stat().st_size + sum(f.stat().st_size for f in data_files(path))


def _read_span(path: Path, offset: int, length: int | None) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        handle.seek(offset)
        left = length
        while left is None or left > 0:
            chunk = handle.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            yield chunk
        if left:
            raise ModelError(f"external data file {path} ends {left} bytes short of a tensor")


def tensor_bytes(tensor: TensorProto, base: Path) -> bytes:
    """One tensor's raw bytes, from the graph or its data file."""
    from onnx import numpy_helper

    if not _is_external(tensor):
        return numpy_helper.to_array(tensor).tobytes() if not tensor.raw_data else tensor.raw_data
    location, offset, length = _external_info(tensor)
    return b"".join(_read_span(data_path(base, location), offset, length))


def tensor_array(tensor: TensorProto, base: Path) -> np.ndarray:
    """One tensor as an array, reading only its own bytes from a data file."""
    import onnx
    from onnx import numpy_helper

    if not _is_external(tensor):
        return numpy_helper.to_array(tensor)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    return np.frombuffer(tensor_bytes(tensor, base), dtype=dtype).reshape(tuple(tensor.dims))


def _size(tensor: TensorProto) -> int:
    import onnx

    if _is_external(tensor):
        length = _external_info(tensor)[2]
        if length is not None:
            return length
        count = int(np.prod(tensor.dims)) if tensor.dims else 1
        return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return len(tensor.raw_data) if tensor.raw_data else tensor.ByteSize()


def save_model(model: onnx.ModelProto, out: Path, *, base: Path | None = None, external: bool | None = None) -> Path:
    """Write `model` to `out`, tensor by tensor: its external tensors' bytes (read from `base`, the directory
    of the graph they came from) are streamed into `out`'s data file, never all held at once.

    `external` None writes external data when the weights pass 2 GB's reach or some already lie outside the
    graph (a model given that way stays that way), else one file; the data file is `<out name>_data`."""
    import onnx

    out = Path(out)
    all_tensors = list(tensors(model))
    if external is None:
        external = (any(_is_external(t) for t in all_tensors)
                    or sum(_size(t) for t in all_tensors) > INLINE_LIMIT_BYTES)
    if any(_is_external(t) for t in all_tensors) and base is None:
        raise ValueError("a graph with external data needs the directory its data lies in")
    data_name = out.name + DATA_SUFFIX
    data_file = out.with_name(data_name)
    try:
        if external:
            _write_data(all_tensors, base, data_file, data_name)
        else:
            for tensor in all_tensors:
                if _is_external(tensor):
                    raw = tensor_bytes(tensor, base)  # type: ignore[arg-type]  # checked above
                    del tensor.external_data[:]
                    tensor.data_location = onnx.TensorProto.DEFAULT
                    tensor.raw_data = raw
            data_file.unlink(missing_ok=True)
        onnx.save_model(model, str(out))
    except OSError as exc:
        raise ModelError(f"writing the model {out} failed: {exc.strerror or exc}") from exc
    return out


def _write_data(all_tensors: list[TensorProto], base: Path | None, data_file: Path, data_name: str) -> None:
    from onnx import TensorProto

    with open(data_file, "wb") as sink:
        for tensor in all_tensors:
            if _is_external(tensor):
                location, offset, length = _external_info(tensor)
                chunks: Iterator[bytes] = _read_span(data_path(base, location), offset, length)  # type: ignore[arg-type]  # base is set: external
            elif tensor.HasField("raw_data") and len(tensor.raw_data) >= EXTERNAL_FROM_BYTES:
                chunks = iter((tensor.raw_data,))
            else:
                continue
            start = -(-sink.tell() // _ALIGN) * _ALIGN
            sink.seek(start)
            for chunk in chunks:
                sink.write(chunk)
            written = sink.tell() - start
            tensor.ClearField("raw_data")
            del tensor.external_data[:]
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", data_name), ("offset", str(start)), ("length", str(written))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value


def check_saved(path: Path, what: str) -> Path:
    """`onnx.checker` over a written graph, by its path (the only way it reads a graph past 2 GB)."""
    import onnx

    try:
        onnx.checker.check_model(str(path))
    except Exception as exc:  # ValidationError, and protobuf's own on a broken file
        raise ModelError(f"{what} fails onnx's checker: {first_line(exc)}") from exc
    return Path(path)


def copy_model(source: Path, out: Path) -> Path:
    """`source`'s graph and weights at `out`: a graph with its weights inline is copied byte for byte; one
    with external data is written with one data file, `<out name>_data`, whatever layout it came in."""
    model = read_graph(source)
    if not any(_is_external(t) for t in tensors(model)):
        import shutil

        shutil.copyfile(source, out)
        return out
    return save_model(model, out, base=Path(source).parent, external=True)
