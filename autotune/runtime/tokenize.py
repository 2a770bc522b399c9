"""Pair tokenization, always through `tokenizers.Tokenizer.from_file` on tokenizer.json.

An older tokenizer dispatch once produced 55 tokens where this one produces 25; there is
exactly one way in here so that cannot happen again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from autotune.errors import ModelError

DIRECTIONS = ("right", "left")


@dataclass
class Batch:
    feeds: dict[str, np.ndarray]
    real_tokens: int
    padded_tokens: int


class PairTokenizer:
    """(query, document) pairs -> truncated encodings -> per-batch padded arrays."""

    def __init__(self, path: Path, max_length: int, *, direction: str = "right", truncate: bool = True) -> None:
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ModelError(f"cannot load {path}: {str(exc).splitlines()[0] if str(exc) else exc}") from exc
        padding = self._tok.padding
        self._tok.no_padding()
        if truncate:
            self._tok.enable_truncation(max_length, strategy="longest_first", direction=direction)
        else:
            self._tok.no_truncation()
        self.max_length = max_length
        self.pad_id = int(padding["pad_id"]) if padding else (self._tok.token_to_id("[PAD]") or 0)
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, query: str, documents: list[str]) -> list[Encoding]:
        return self._tok.encode_batch([(query, d) for d in documents])

    def pad(self, encodings: list[Encoding], input_names: tuple[str, ...]) -> Batch:
        """Pad only to this batch's longest sequence."""
        longest = max(len(e.ids) for e in encodings)
        n = len(encodings)
        ids = np.full((n, longest), self.pad_id, dtype=np.int64)
        mask = np.zeros((n, longest), dtype=np.int64)
        types = np.zeros((n, longest), dtype=np.int64)
        real = 0
        for row, enc in enumerate(encodings):
            k = len(enc.ids)
            real += k
            ids[row, :k] = enc.ids
            mask[row, :k] = 1
            types[row, :k] = enc.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return Batch({name: arrays[name] for name in input_names}, real, n * longest)
