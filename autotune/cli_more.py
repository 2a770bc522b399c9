"""Parsers and handlers for serve, record, bench, explain and report."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from autotune.errors import ExitStatus

Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def add_parsers(sub: Any) -> None:
    serve = sub.add_parser("serve", help="TEI-compatible /rerank server using a tuned profile")
    serve.add_argument("--profile", type=Path)
    serve.add_argument("--env-file", type=Path)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.serve import resolve_settings, serve

    settings = resolve_settings(args.profile, args.env_file)
    print(f"autotune serve: {settings.config.label()} on http://{args.host}:{args.port}", file=err)
    serve(settings, args.host, args.port)
    return ExitStatus.OK


_HANDLERS: dict[str, Handler] = {"serve": cmd_serve}


def handler(name: str) -> Handler:
    return _HANDLERS[name]
