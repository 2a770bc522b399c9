"""Every file Hindsight loads from an emitted model directory, hashed, and where a profile's directory lives here.

`model.onnx` alone is not what Hindsight loads: a large model's weights are in `model.onnx_data` beside it; its
tokenizer reads `tokenizer.json`, `tokenizer_config.json`,
the vocabulary and `config.json`, and a one-byte change to any of them changes the ids and so the scores. A
run records the sha256 of each file it staged (`model.files`); `apply` and `check` compare them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotune.errors import OptionsError, OutputError
from autotune.fileio import sha256_file
from autotune.outputs.ownership import MODEL_MARKER

MODEL_FILE = "model.onnx"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")  # what `run` names a profile (`profile.check_name`)


def file_hashes(directory: Path) -> dict[str, str]:
    """name -> sha256 of every regular file in the directory but autotune's marker, in name order."""
    return {p.name: sha256_file(p) for p in sorted(Path(directory).iterdir())
            if p.is_file() and p.name != MODEL_MARKER}


def expected_files(model: Mapping[str, Any]) -> dict[str, str]:
    """What the profile recorded: every file (`files`), or for a profile written before that, model.onnx alone."""
    files = model.get("files")
    if isinstance(files, dict) and files:
        return {str(k): str(v) for k, v in files.items()}
    emitted = model.get("emitted_sha256")
    return {MODEL_FILE: str(emitted)} if emitted else {}


def files_drift(expected: Mapping[str, str], *, directory: Path, model_file: Path | None = None) -> list[str]:
    """One line per file Hindsight would load that is missing or not what the run wrote. `model_file` is the
    model's own path where the `.env` names it apart from the directory."""
    lines = []
    for name, sha in expected.items():
        path = Path(directory) / name
        if model_file is not None and name.startswith(MODEL_FILE):  # the graph, and its data file beside it
            path = model_file if name == MODEL_FILE else model_file.parent / name
        if not os.path.lexists(path):
            lines.append(f"{path} is missing")
            continue
        try:
            actual = sha256_file(path, what="model file")
        except OutputError as exc:
            lines.append(exc.message)
            continue
        if actual != sha:
            lines.append(f"{path} has sha256 {actual[:12]}, the run wrote {sha[:12]}")
    return lines


def local_model_dir(profile: Mapping[str, Any], override: Path | None = None, *, reading: bool = False) -> Path:
    """Where this node keeps the profile's model directory: `override` (`--model-out`), else the recorded `dir`
    when it lies inside the working directory (or, only `reading`, wherever it is and exists), else
    `models/<profile name>` there, as `run` writes it.

    A profile's `dir` is a path on the host that tuned it: on another node it may not exist, and a tampered
    one (`../../etc`) must never send a build outside the project."""
    if override is not None:
        return Path(override)
    from autotune.runtime.targets.key_spec import PATH

    model = profile.get("model") or {}
    name = str(profile.get("name") or "model")
    if not NAME.fullmatch(name) or name in (".", ".."):  # it becomes a path in the .env: no `\\`, NUL or quote
        raise OptionsError(f"the profile's name {name!r} is not a directory name (letters, digits, '.', '_', '-')")
    default = Path("models") / name
    recorded = model.get("dir")
    if not recorded:
        return default
    problem = PATH.problem(str(recorded))
    if problem is not None:
        raise OptionsError(f"the profile's model.dir {problem} (refused: it becomes the .env's model path)")
    path = Path(str(recorded))
    if any(part in (".", "..") for part in Path(str(recorded)).parts) or str(recorded).endswith("/."):
        raise OptionsError(f"the profile's model.dir {str(recorded)!r} holds a '.' or '..' step: refused (pass "
                           "--model-out to choose where the model goes)")
    # one rule, by the path as written, whether or not `models/` is a link the user made to another disk
    inside = not path.is_absolute() or Path.cwd() in path.parents
    return path if inside or (reading and path.is_dir()) else default
