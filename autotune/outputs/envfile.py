"""Merge autotune's keys into a user's `.env` as one marked block.

Every byte outside the block is kept as it was; a rerun replaces the block; a key the
user already set outside the block is left to the user (and reported, without its value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from autotune.errors import OptionsError, OutputError
from autotune.fileio import read_regular, write_atomic
from autotune.redact import has_userinfo

BEGIN = "# >>> autotune managed block: `autotune run` rewrites it; edit outside it >>>"
END = "# <<< autotune managed block <<<"
_LINE = re.compile(r"(?<=\n)")
_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")
MAX_ENV_BYTES = 1024 * 1024
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_./:@+,-]+$")


@dataclass(frozen=True)
class MergeResult:
    text: str
    written_keys: list[str]
    user_keys_kept: list[str] = field(default_factory=list)


def split_lines(text: str) -> list[str]:
    """Lines with their terminators, split on "\\n" only (never on other Unicode breaks)."""
    return [line for line in _LINE.split(text) if line]


def parse_env(text: str) -> dict[str, str]:
    """KEY -> raw value (last one wins), understanding `export `, quotes and CRLF."""
    values: dict[str, str] = {}
    for line in split_lines(text):
        match = _KEY.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        value = line[match.end():].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[match.group(1)] = value
    return values


_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_entry(key: str, value: str) -> None:
    """One `.env` line autotune may write: a plain key, and a value `check_value` accepts."""
    if not _KEY_NAME.match(key):
        raise OptionsError(f"refusing to write the .env key {key!r}: not a plain KEY_NAME")
    check_value(key, value)


def check_value(name: str, value: str) -> None:
    """A non-empty, one-line value with no marker in it. Anything else could add lines of its own
    (`x\nLD_PRELOAD=...`) or break the block; refused in one line naming the key or flag."""
    if not value:
        raise OptionsError(f"refusing to write {name} with an empty value: Hindsight's int() would crash on it")
    if any(c in value for c in "\n\r\0") or BEGIN in value or END in value:
        raise OptionsError(f"refusing to write {name}: its value holds a line break, a NUL or autotune's marker")
    if "'" in value:
        raise OptionsError(f"refusing to write {name}: its value holds a single quote, which no quoting keeps "
                           "literal for both a shell and Hindsight's .env reader")
    if has_userinfo(value):
        raise OptionsError(f"refusing to write {name}: its URL carries a user name or password, which would end "
                           "up in the committed profile; the reranker takes none")


def format_value(value: str) -> str:
    """Bare where every character is plain; else in single quotes, inside which neither a shell sourcing the
    `.env` (`set -a; . ./.env`) nor python-dotenv nor compose expands `$(...)`, backticks or `$VAR`.
    A value with a single quote has no such form, and `check_value` refuses it."""
    if not value:
        raise ValueError("autotune never writes an empty value: Hindsight's int() would crash on it")
    if _SAFE_VALUE.match(value):
        return value
    if "'" in value:
        raise ValueError("a value with a single quote cannot be written literally")
    return f"'{value}'"


def _block_span(lines: list[str]) -> tuple[int, int] | None:
    starts = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise OutputError("the .env has a damaged autotune block (markers missing or repeated); "
                          "remove the autotune lines and rerun")
    return starts[0], ends[0]


def merge_env(existing: str, keys: Mapping[str, str]) -> MergeResult:
    for key, value in keys.items():
        check_entry(key, value)
    lines = split_lines(existing)
    newline = "\r\n" if sum(ln.endswith("\r\n") for ln in lines) * 2 > len(lines) > 0 else "\n"
    span = _block_span(lines)
    outside = lines if span is None else lines[:span[0]] + lines[span[1] + 1:]
    user_keys = {m.group(1) for ln in outside if (m := _KEY.match(ln)) and not ln.lstrip().startswith("#")}
    kept = [k for k in keys if k in user_keys]
    written = [k for k in keys if k not in user_keys]
    block = [BEGIN + newline] + [f"{k}={format_value(keys[k])}{newline}" for k in written] + [END + newline]
    if span is None:
        head = lines[:]
        if head and not head[-1].endswith("\n"):
            head[-1] += newline
        merged = head + block
    else:
        merged = lines[:span[0]] + block + lines[span[1] + 1:]
    return MergeResult("".join(merged), written, kept)


def read_text_exact(path: Path) -> str:
    """Decode so that re-encoding gives back the very same bytes, whatever they were. A missing file is empty;
    a device, a FIFO, a directory or a file past 1 MiB is refused unread (`fileio.read_regular`)."""
    path = Path(path)
    if not os.path.lexists(path):
        return ""
    data = read_regular(path, MAX_ENV_BYTES, what=".env file", error=OutputError)
    return data.decode("utf-8", "surrogateescape")


def write_env(path: Path, keys: Mapping[str, str]) -> MergeResult:
    result = merge_env(read_text_exact(path), keys)
    write_atomic(path, result.text.encode("utf-8", "surrogateescape"))
    return result


def _values(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The keys inside autotune's block, and those the user set outside it."""
    lines = split_lines(text)
    span = _block_span(lines)
    if span is None:
        return {}, parse_env(text)
    return parse_env("".join(lines[span[0] + 1:span[1]])), parse_env("".join(lines[:span[0]] + lines[span[1] + 1:]))


def managed_values(path: Path) -> dict[str, str]:
    """The keys inside autotune's block (for `autotune check` and `serve --env-file`)."""
    return _values(read_text_exact(path))[0]


def user_values(text: str) -> dict[str, str]:
    """The keys the user set outside autotune's block: they win over anything autotune would write."""
    return _values(text)[1]


def effective_values(path: Path) -> dict[str, str]:
    """The keys as Hindsight sees them: autotune's block, with any key the user set outside it winning."""
    block, user = _values(read_text_exact(path))
    return {**block, **user}
