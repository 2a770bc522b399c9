"""Parsers and handlers for the commands beyond probe/run/check/compose."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]
_HANDLERS: dict[str, Handler] = {}


def add_parsers(sub: Any) -> None:
    pass


def handler(name: str) -> Handler:
    return _HANDLERS[name]
