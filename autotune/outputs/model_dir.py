"""The model directory Hindsight loads as it is: `model.onnx` (with `model.onnx_data` where its weights lie
outside the graph) and the tokenizer files.

It is staged beside its destination, checked, and swapped in whole, so a failed run leaves
the previous directory untouched. Only a directory carrying autotune's marker is ever replaced
(see `ownership`). Staging directories carry the process id, so the next run removes what a
killed one left. Modes are 0755/0644 after the umask: Hindsight often runs as another user, and a
`mkdtemp` directory (0700) would be unreadable to it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autotune.errors import ModelError, OutputError
from autotune.fileio import read_bound, record_commit, sha256_bytes, sha256_file, umask, write_bound
from autotune.outputs.model_files import file_hashes
from autotune.outputs.ownership import (
    MODEL_MARKER,
    OLD,
    STAGE,
    marker_text,
    model_owner,
    scratch_prefix,
    sweep_leftovers,
)
from autotune.paths import cache_dir, caches_readable
from autotune.runtime.onnx_files import copy_model

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                   "vocab.json", "merges.txt", "added_tokens.json", "sentencepiece.bpe.model", "spiece.model",
                   "config.json")
TORCH_FILES = ("model.safetensors", "pytorch_model.bin", "config.json", "modules.json",
               "sentence_bert_config.json", "config_sentence_transformers.json")


@dataclass
class StagedModel:
    """A model directory written next to its destination, not yet in place."""

    staging: Path
    destination: Path
    sha256: str = ""  # of the staged model.onnx
    files: dict[str, str] = field(default_factory=dict)  # every staged file's sha256: what `check` compares

    def commit(self) -> Path:
        """Swap the staged directory in; the old one, if any, is removed only once the new one is there.

        The old one must be autotune's own (checked before the search too; checked here again because
        minutes passed in between)."""
        old = None
        if self.destination.is_symlink() or self.destination.exists():
            if self.destination.is_symlink() or model_owner(self.destination) is None:
                raise OutputError(f"{self.destination} appeared while tuning and autotune did not write it: "
                                  "left as it is, and no model was written")
            old = Path(tempfile.mkdtemp(prefix=scratch_prefix(self.destination, OLD), dir=self.destination.parent))
            old.rmdir()
            self.destination.rename(old)
        try:
            self.staging.rename(self.destination)
        except OSError as exc:
            if old is not None:
                old.rename(self.destination)
            raise OutputError(f"cannot move the model into {self.destination}: {exc.strerror}") from exc
        record_commit(self.destination)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.destination

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def stage_model_dir(destination: Path, *, onnx_file: Path, source_dir: Path, input_names: Sequence[str],
                    max_tokens: int, owner: str, torch_dir: Path | None = None) -> StagedModel:
    """Copy the chosen ONNX file (fp32 or int8) and the tokenizer files into a staging directory, with
    the marker that names `owner` (the profile) and the model's sha256.

    Where the source has no `tokenizer_config.json`, a minimal one names the graph's inputs:
    without it transformers builds a tokenizer that gives no `token_type_ids`.
    """
    destination = Path(destination)
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        sweep_leftovers(destination)
        staging = Path(tempfile.mkdtemp(prefix=scratch_prefix(destination, STAGE), dir=destination.parent))
    except OSError as exc:
        raise OutputError(f"cannot create the model directory {destination}: {exc.strerror}") from exc
    staged = StagedModel(staging, destination)
    try:
        copy_model(onnx_file, staging / "model.onnx")  # with its weights' data file, where it has one
        for name in TOKENIZER_FILES:
            if (source_dir / name).is_file():
                shutil.copyfile(source_dir / name, staging / name)
        if not (staging / "tokenizer_config.json").exists():
            (staging / "tokenizer_config.json").write_text(json.dumps(
                {"model_input_names": list(input_names), "model_max_length": max_tokens}, indent=2) + "\n")
        if torch_dir is not None:
            for name in TORCH_FILES:
                if (torch_dir / name).is_file():
                    shutil.copyfile(torch_dir / name, staging / name)
        staged.sha256 = sha256_file(staging / "model.onnx")
        staged.files = file_hashes(staging)
        (staging / MODEL_MARKER).write_text(marker_text(owner, staged.sha256))
        _make_readable(staging)
    except OSError as exc:
        staged.discard()
        raise OutputError(f"cannot write the model directory {destination}: {exc.strerror}") from exc
    except BaseException:  # Ctrl-C or SIGTERM mid-copy: no partial model.onnx left beside the destination
        staged.discard()
        raise
    return staged


def _make_readable(directory: Path) -> None:
    mask = umask()
    os.chmod(directory, 0o755 & ~mask)
    for path in directory.rglob("*"):
        os.chmod(path, (0o755 if path.is_dir() else 0o644) & ~mask)


Feeds = dict[str, list[int]]


@dataclass(frozen=True)
class TokenizerCheck:
    """Whether transformers' AutoTokenizer on the emitted directory gives autotune's ids."""

    checked: bool
    pairs: int = 0
    tokenizer_class: str = ""
    note: str = ""
    remembered: bool = False  # an earlier run checked these very files on these very pairs

    def to_dict(self) -> dict[str, object]:
        return {"checked": self.checked, "pairs": self.pairs, "tokenizer_class": self.tokenizer_class,
                "note": self.note, "remembered": self.remembered}


NO_TRANSFORMERS = TokenizerCheck(False, note="transformers is not installed: the AutoTokenizer check was skipped "
                                             "(pip install transformers to run it)")


def check_tokenizer(directory: Path, pairs_by_query: Sequence[Sequence[tuple[str, str]]],
                    expected: Sequence[Sequence[Feeds]], max_tokens: int, input_names: Sequence[str]
                    ) -> TokenizerCheck:
    """Feed for feed, as Hindsight builds them: `tokenizer(queries, docs, truncation=True, max_length=...)`,
    then zeros for `token_type_ids` where the graph wants them and the tokenizer gives none.

    The pairs are `PairTokenizer.pairs`: texts far past the model already cut where truncation gives the
    same ids, since a whole 50 MB document made the tokenizer hold 7.6 GB.

    A different tokenizer path once gave 55 tokens where the right one gave 25; a tokenizer that
    gives no `token_type_ids` makes a BERT score every pair as if it were one segment. Either
    way scores drift for no reason the parity gate can see. Without transformers the check is
    skipped, and the result says so.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        binding = _check_binding(directory, pairs_by_query, expected, max_tokens, input_names, version("transformers"))
    except PackageNotFoundError:
        return NO_TRANSFORMERS
    entry = cache_dir() / "tokenizer-check" / f"{sha256_bytes(json.dumps(binding, sort_keys=True).encode())[:24]}.json"
    if caches_readable():
        payload, _ = read_bound(entry, binding)
        name = None if payload is None else payload.decode("utf-8", "replace")
        if name is not None and name.isidentifier():
            return TokenizerCheck(True, sum(len(q) for q in expected), name, remembered=True)
    try:
        check = _check_with_transformers(directory, pairs_by_query, expected, max_tokens, input_names)
    except ImportError:  # installed but not importable
        return NO_TRANSFORMERS
    write_bound(entry, binding, check.tokenizer_class.encode())
    return check


def _check_binding(directory: Path, pairs_by_query: Sequence[Sequence[tuple[str, str]]],
                   expected: Sequence[Sequence[Feeds]], max_tokens: int, input_names: Sequence[str],
                   transformers: str) -> dict[str, object]:
    """What a passed check holds for: the tokenizer files a model directory carries (`TOKENIZER_FILES`, the
    only ones AutoTokenizer reads there: not the graph, not a PyTorch checkpoint), the pairs and autotune's
    feeds (as hashes), the cut, the inputs and transformers' version. `import transformers` took 6.5 s of
    every run that wrote a model (it imports torch and scikit-learn); a rerun on the same files and workload
    reads the verdict instead."""
    files = {name: sha256_file(directory / name) for name in TOKENIZER_FILES if (directory / name).is_file()}
    fed = sha256_bytes(json.dumps([[list(p) for p in q] for q in pairs_by_query]).encode()
                       + json.dumps([[{k: list(v) for k, v in f.items()} for f in q] for q in expected]).encode())
    return {"kind": "tokenizer-check", "files": files, "pairs": fed, "max_tokens": max_tokens,
            "inputs": list(input_names), "transformers": transformers}


def _check_with_transformers(directory: Path, pairs_by_query: Sequence[Sequence[tuple[str, str]]],
                             expected: Sequence[Sequence[Feeds]], max_tokens: int, input_names: Sequence[str]
                             ) -> TokenizerCheck:
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    try:
        tok = AutoTokenizer.from_pretrained(str(directory))
    except Exception as exc:  # transformers raises many kinds here
        raise ModelError(f"transformers' AutoTokenizer cannot load {directory}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    if not tok.is_fast:
        raise ModelError(f"AutoTokenizer loads {type(tok).__name__} from {directory}, a slow tokenizer: Hindsight "
                         "would tokenize differently from autotune; add tokenizer.json to the model")
    total = mismatched = 0
    first = ""
    for q_index, (pairs, ours_q) in enumerate(zip(pairs_by_query, expected, strict=True)):
        got = tok([q for q, _ in pairs], [d for _, d in pairs], truncation=True, max_length=max_tokens)
        for d_index, ours in enumerate(ours_q):
            total += 1
            theirs = {name: list(got[name][d_index]) if name in got else [0] * len(got["input_ids"][d_index])
                      for name in input_names}
            differs = [name for name in input_names if theirs[name] != list(ours[name])]
            if differs:
                mismatched += 1
                first = first or (f"query #{q_index} document #{d_index}: {differs[0]} differ, "
                                  f"{len(theirs['input_ids'])} tokens against {len(ours['input_ids'])}"
                                  + ("; it gives no token_type_ids" if "token_type_ids" not in got else ""))
    if mismatched:
        raise ModelError(f"transformers' AutoTokenizer on {directory} feeds the model other inputs than "
                         f"tokenizer.json for {mismatched} of {total} pairs ({first}): Hindsight would score "
                         "other inputs")
    return TokenizerCheck(True, total, type(tok).__name__)
