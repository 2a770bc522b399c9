"""What each `.env` key a target writes may hold: a type and a range, checked before any value is written.

A profile is input (it may come from a pull request): `apply` writes its `env` only when every value is what
the key's reader accepts. An integer is digits within the reader's range, a boolean is `true`/`false` (the one
spelling Hindsight documents), a path or a URL holds no character a shell sourcing the `.env` would act on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from autotune.errors import OptionsError

INT_MAX = 2**31 - 1
MAX_POSITIONS = 1 << 20  # a token count: past any model's positions
_DIGITS = re.compile(r"(?:0|[1-9][0-9]{0,9})\Z")
# a path, a URL or a model name: printable, and nothing a shell acts on even inside quotes
_PLAIN = re.compile(r"[A-Za-z0-9_./:@+,=%~ -]+\Z")


def env_text(value: object) -> str:
    """A profile's value as the `.env` text it stands for: YAML reads an unquoted `true` as a boolean, which is
    the key's `true`, not Python's `True`."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def env_texts(values: Mapping[object, object]) -> dict[str, str]:
    return {str(k): env_text(v) for k, v in values.items()}


def positive_int(value: str | None) -> int | None:
    """A key's value as Hindsight's readers take it leniently: a positive integer, else None (unset, empty,
    not a number, or below 1), so the caller's default applies."""
    try:
        n = int(value) if value is not None else None
    except ValueError:
        return None
    return n if n is not None and n > 0 else None


POSITIONS, CORES = "positions", "cores"  # what bounds a key's value on the host it runs on (`KeySpec.limit`)


@dataclass(frozen=True)
class KeySpec:
    """One key's type: `int` (within low..high), `bool`, `choice` (one of `choices`), `path` or `url`; `limit`
    names what bounds an integer where it runs: the model's positions (a token cut) or the usable cores (a
    thread count). Hindsight's parser takes `ONNX_MAX_TOKENS=100000` and then fails at `Gather` (issue 50)."""

    kind: str
    low: int = 0
    high: int = INT_MAX
    choices: tuple[str, ...] = ()
    limit: str = ""

    def problem(self, value: str) -> str | None:
        """Why `value` is not one this key takes, in a few words; None when it is."""
        if self.kind == "int":
            if not _DIGITS.match(value) or not self.low <= int(value) <= self.high:
                return f"must be an integer from {self.low} to {self.high}"
        elif self.kind == "bool":
            if value not in ("true", "false"):
                return "must be true or false"
        elif self.kind == "choice":
            if value not in self.choices:
                return f"must be one of {', '.join(self.choices)}"
        elif self.kind == "url":
            return url_problem(value)
        elif self.kind == "path":
            if not _PLAIN.match(value) or value != value.strip():
                return f"must be a plain {self.kind}: letters, digits, spaces and . _ / : @ + , = % ~ - only"
        else:
            raise ValueError(f"unknown key kind {self.kind!r}")
        return None


_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\Z")
_URL_CHARS = re.compile(r"[A-Za-z0-9_./:@+=%~\[\]-]+\Z")  # a URL's characters, none a shell acts on


def url_problem(value: str) -> str | None:
    """Why `value` is not an http(s) URL Hindsight's client can reach, parsed as one (urllib): a scheme, a host
    name or an IP literal (`[::1]` included), a port within 1-65535 if any, and no user name or password."""
    import ipaddress
    from urllib.parse import urlsplit

    if any(c in value for c in "\n\r\0"):
        return "must be an http(s) URL on one line: it holds a line break or a NUL"
    if not _URL_CHARS.match(value):
        return "must be an http(s) URL: no spaces, commas, quotes or other characters a shell acts on"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        return f"must be an http(s) URL with a valid host and port ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http(s) URL"
    if "@" in parts.netloc:
        return "must be an http(s) URL with no user name or password"
    host = parts.hostname or ""
    if not host:
        return "must be an http(s) URL with a host"
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"must be an http(s) URL: [{host}] is no IPv6 address"
    elif not _HOST.match(host):
        return f"must be an http(s) URL: {host!r} is no host name"
    if port == 0:
        return "must be an http(s) URL with a port from 1 to 65535"
    return None


def integer(low: int = 0, high: int = INT_MAX, limit: str = "") -> KeySpec:
    return KeySpec("int", low, high, limit=limit)


BOOL = KeySpec("bool")
PATH = KeySpec("path")
URL = KeySpec("url")


def choice(*values: str) -> KeySpec:
    return KeySpec("choice", choices=values)


def check_keys(keys: Mapping[str, str], specs: Mapping[str, KeySpec], *, source: str) -> None:
    """Every key known to `specs` and every value of its type, or a one-line OptionsError naming the first
    that is not (the value itself is shown only as its length: it may be hostile or secret)."""
    for key, value in keys.items():
        spec = specs.get(key)
        if spec is None:
            raise OptionsError(f"{source} carries {key!r}, a key its target never writes")
        problem = spec.problem(str(value))
        if problem is not None:
            raise OptionsError(f"{source}: {key} {problem} (refused: nothing was written)")


def limit_problems(keys: Mapping[str, str], specs: Mapping[str, KeySpec], *, positions: int | None,
                   cores: int) -> list[str]:
    """One line per key whose value passes what this host and model can run: a token cut past the model's
    positions, a thread count past the usable cores."""
    out = []
    for key, value in keys.items():
        spec = specs.get(key)
        n = positive_int(str(value)) if spec is not None and spec.limit else None
        if n is None or spec is None:
            continue
        if spec.limit == POSITIONS and positions is not None and n > positions:
            out.append(f"{key} is {n}, past the model's {positions} positions: Hindsight would fail on longer inputs")
        elif spec.limit == CORES and n > cores:
            out.append(f"{key} is {n}, past the {cores} cores usable on this host")
    return out
