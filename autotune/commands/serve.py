"""`autotune serve`: the TEI-compatible reranker."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from autotune.commands.argtypes import finite_float, positive_int
from autotune.errors import ExitStatus

NAME = "serve"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(NAME, help="TEI-compatible /rerank server using a tuned profile")
    p.add_argument("--profile", type=Path)
    p.add_argument("--env-file", type=Path)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--max-batch-tokens", type=positive_int, default=None,
                   help="padded tokens (rows x longest) per batch; bounds each batch's memory whatever a client "
                        "sends (default: AUTOTUNE_MAX_BATCH_TOKENS, else 16384 as TEI)")
    p.add_argument("--graceful-timeout", type=finite_float, default=10.0, metavar="SECONDS",
                   help="on SIGTERM, finish requests in flight for at most this long (compose and Kubernetes "
                        "give 10 s)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from autotune.serve.app import resolve_settings, serve

    settings = resolve_settings(args.profile, args.env_file)
    if args.max_batch_tokens is not None:
        from dataclasses import replace

        settings = replace(settings, max_batch_tokens=args.max_batch_tokens)
    if args.graceful_timeout < 0:
        from autotune.errors import OptionsError

        raise OptionsError("--graceful-timeout must not be negative")
    serve(settings, args.host, args.port, graceful_timeout_s=args.graceful_timeout,
          announce=lambda where: print(f"autotune serve: {where}", file=err, flush=True))
    return ExitStatus.OK
