"""The flags and environment of text-embeddings-inference's launcher, for `autotune serve` as a drop-in.

Hindsight's Helm chart runs its reranker image as `--model-id <model> --hostname 0.0.0.0 <args>`
with `PORT` in the environment; an image whose entrypoint is `autotune serve` must accept that.
TEI flags autotune has no use for are ignored with one warning each; one that would change the
scores (another dtype, pooling, revision or prompt) is refused, since the profile was tuned and
parity-checked without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.errors import OptionsError

SCORE_CHANGING = ("--dtype", "--pooling", "--revision", "--default-prompt", "--default-prompt-name", "--dense-path")
FP32_DTYPES = ("float32",)


@dataclass(frozen=True)
class Leftover:
    flag: str
    values: tuple[str, ...]


def split_flags(tokens: Sequence[str]) -> list[Leftover]:
    """`--flag value...` and `--flag=value` groups, in order; a stray value is an error."""
    groups: list[Leftover] = []
    for token in tokens:
        if token.startswith("--"):
            flag, _, value = token.partition("=")
            groups.append(Leftover(flag, (value,) if value else ()))
        elif groups and not token.startswith("-"):
            last = groups[-1]
            groups[-1] = Leftover(last.flag, (*last.values, token))
        else:
            raise OptionsError(f"unrecognized argument {token!r} (see `autotune serve --help`)")
    return groups


def ignored_flags(tokens: Sequence[str]) -> list[str]:
    """One warning line per TEI flag `serve` ignores; a flag that would change the scores is refused."""
    warnings = []
    for group in split_flags(tokens):
        if group.flag in SCORE_CHANGING:
            if group.flag == "--dtype" and all(v in FP32_DTYPES for v in group.values):
                warnings.append(f"{group.flag} {' '.join(group.values)}: autotune serves the profile's precision")
                continue
            raise OptionsError(f"{group.flag} would change the scores the profile was tuned and parity-checked "
                               "with: remove it, or tune a profile for it")
        warnings.append(f"{group.flag} is a text-embeddings-inference flag autotune serve ignores")
    return warnings
