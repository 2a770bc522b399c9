"""Pair tokenization, always through `tokenizers.Tokenizer.from_file` on tokenizer.json.

An older tokenizer dispatch once produced 55 tokens where this one produces 25; there is
exactly one way in here so that cannot happen again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from autotune.errors import ModelError, OptionsError

DIRECTIONS = ("right", "left")
CLIP_CHARS_PER_TOKEN = 8  # the first prefix tried holds this many characters per token of the model's length


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
        shortest = self._tok.num_special_tokens_to_add(True) + 2
        if truncate and max_length < shortest:  # below it `tokenizers` silently cuts nothing at all
            raise OptionsError(f"a pair cut to {max_length} tokens leaves no room for its texts: the shortest cut "
                               f"this model takes is {shortest} (its {shortest - 2} special tokens and one token "
                               "of each text)")
        if truncate:
            self._tok.enable_truncation(max_length, strategy="longest_first", direction=direction)
        else:
            self._tok.no_truncation()
        self._path = path
        self._clips = truncate and direction == "right"
        self.first_cut = max_length * CLIP_CHARS_PER_TOKEN  # texts no longer than this are never counted
        self.max_length = max_length
        self.pad_id = int(padding["pad_id"]) if padding else (self._tok.token_to_id("[PAD]") or 0)
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, query: str, documents: list[str]) -> list[Encoding]:
        """The truncated encodings of each (query, document) pair. A text far longer than the model is cut
        first (see `pairs`), so a 50 MB document or a 7 MB query is never tokenized whole."""
        return self._tok.encode_batch(self.pairs(query, documents))

    def pairs(self, query: str, documents: list[str]) -> list[tuple[str, str]]:
        """The pairs to encode: texts far longer than the model cut where truncation gives the same ids.

        Why that is exact: a cut falls before a space, where every pre-tokenizer (WordPiece, Metaspace, byte
        level) splits, so a prefix's tokens are the whole text's first tokens; and a side of more tokens than
        the model's length is truncated the same whatever its length, because `longest_first` asks only which
        side is longer. That is settled by cutting the long side past the other's count; where both sides
        are cut, the whole texts are encoded.
        """
        if not self._clips or all(len(t) <= self.first_cut for t in (query, *documents)):
            return [(query, d) for d in documents]  # the common case: nothing is counted
        q = _Side(query, self)
        return [_pair(q, _Side(d, self), self.max_length) for d in documents]

    @cached_property
    def _counter(self) -> Tokenizer:
        """A second copy with no truncation and no padding, loaded only when a text is long enough to cut."""
        counter = Tokenizer.from_file(str(self._path))
        counter.no_truncation()
        counter.no_padding()
        return counter

    def count(self, text: str) -> int:
        return len(self._counter.encode(text, add_special_tokens=False).ids)

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


class _Side:
    """One side of a pair, cut lazily: the shortest prefix before a space with at least N tokens."""

    def __init__(self, text: str, tokenizer: PairTokenizer) -> None:
        self.text, self._tok = text, tokenizer
        self._count: int | None = None
        self._cuts: dict[int, str | None] = {}

    def whole_count(self) -> int:
        if self._count is None:
            self._count = self._tok.count(self.text)
        return self._count

    def cut(self, at_least: int) -> str | None:
        """A prefix of at least `at_least` tokens, or None when only the whole text has them."""
        if at_least not in self._cuts:
            self._cuts[at_least] = self._find(at_least)
        return self._cuts[at_least]

    def _find(self, at_least: int) -> str | None:
        text, chars = self.text, self._tok.first_cut
        while chars < len(text):
            prefix = text[:max(text.rfind(" ", 0, chars + 1), 0)].rstrip()  # ends on a word, before a space
            if prefix and self._tok.count(prefix) >= at_least:
                return prefix
            chars *= 2
        return None


def _pair(query: _Side, document: _Side, max_length: int) -> tuple[str, str]:
    long = max_length + 1  # more tokens than the pair may hold: truncation cuts this side whatever its length
    q, d = query.cut(long), document.cut(long)
    if (q is None) == (d is None):
        return query.text, document.text  # nothing to cut, or both sides long: only whole texts are exact
    if q is not None:
        return query.cut(max(long, document.whole_count() + 1)) or query.text, document.text  # still the longer
    return query.text, document.cut(max(long, query.whole_count() + 1)) or document.text
