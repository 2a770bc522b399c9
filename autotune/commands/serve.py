"""`autotune serve`: the TEI-compatible reranker."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from autotune.errors import ExitStatus

NAME = "serve"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="TEI-compatible /rerank server using a tuned profile")
    p.add_argument("--profile", type=Path)
    p.add_argument("--env-file", type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.serve.app import resolve_settings, serve

    settings = resolve_settings(args.profile, args.env_file)
    print(f"autotune serve: {settings.config.label()} on http://{args.host}:{args.port}", file=err)
    serve(settings, args.host, args.port)
    return ExitStatus.OK
