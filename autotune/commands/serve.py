"""`autotune serve`: the TEI-compatible reranker, also a drop-in for TEI's image and its flags."""

from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from autotune.commands.argtypes import finite_float, positive_int
from autotune.commands.base import Command
from autotune.errors import ExitStatus, OptionsError
from autotune.serve.app import serve
from autotune.serve.settings import resolve_settings
from autotune.serve.tei_flags import ignored_flags


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionsError(f"{name} must be an integer, got {value!r}") from None
    if number < 1:
        raise OptionsError(f"{name} must be at least 1, got {number}")
    return number


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


class ServeCommand(Command):
    """`autotune serve`: the TEI-compatible reranker, also a drop-in for TEI's image and its flags."""

    accepts_unknown = True  # other TEI launcher flags: ignored with a warning each (see serve.tei_flags)
    owns_signals = True  # SIGTERM and Ctrl-C drain the server and exit 0 ("stopped"): not an interrupted command

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--profile", type=Path, help="serve this profile's configuration")
        p.add_argument("--env-file", type=Path, help="or the AUTOTUNE_* keys of this .env")
        p.add_argument("--host", "--hostname", dest="host", default="127.0.0.1",
                       help="address to listen on (TEI's --hostname)")
        p.add_argument("--port", type=int, default=None, help="port (default: PORT, else 8080)")
        p.add_argument("--model-id", default=None,
                       help="TEI's flag: a model directory, or `default` for the embedded model (overrides "
                            "AUTOTUNE_MODEL)")
        p.add_argument("--auto-truncate", action="store_true",
                       help="TEI's flag; autotune serve truncates by default (Hindsight sends no `truncate`)")
        p.add_argument("--max-client-batch-size", type=positive_int, default=None,
                       help="texts per request (default: MAX_CLIENT_BATCH_SIZE, else AUTOTUNE_MAX_CLIENT_BATCH_SIZE)")
        p.add_argument("--payload-limit", type=positive_int, default=None,
                       help="request body bytes (default: PAYLOAD_LIMIT, else 8 MiB)")
        p.add_argument("--max-concurrent-requests", type=positive_int, default=None,
                       help="requests queued or running before 429 (AUTOTUNE_MAX_QUEUE)")
        p.add_argument("--max-batch-tokens", type=positive_int, default=None,
                       help="padded tokens (rows x longest) per batch; bounds each batch's memory whatever a client "
                            "sends (default: AUTOTUNE_MAX_BATCH_TOKENS, else 16384 as TEI)")
        p.add_argument("--api-key", default=None,
                       help="TEI's flag: /rerank, /info and /metrics want `Authorization: Bearer KEY` "
                            "(default: API_KEY); "
                            "Hindsight 1.1's TEI client sends no such header, so put a proxy that adds it in between")
        p.add_argument("--graceful-timeout", type=finite_float, default=10.0, metavar="SECONDS",
                       help="on SIGTERM, finish requests in flight for at most this long (compose and Kubernetes "
                            "give 10 s)")

    def run(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        for line in ignored_flags(getattr(args, "unknown", [])):
            print(f"autotune serve: warning: {line}", file=err, flush=True)
        if args.graceful_timeout < 0:
            raise OptionsError("--graceful-timeout must not be negative")
        settings = resolve_settings(args.profile, args.env_file)
        changes: dict[str, Any] = {}
        if args.model_id is not None:
            changes["model"] = args.model_id
        if args.max_batch_tokens is not None:
            changes["max_batch_tokens"] = args.max_batch_tokens
        batch = args.max_client_batch_size or _env_int("MAX_CLIENT_BATCH_SIZE")  # TEI's env, as the chart sets it
        if batch is not None:
            changes["max_client_batch_size"] = batch
        payload = args.payload_limit or _env_int("PAYLOAD_LIMIT")
        if payload is not None:
            changes["max_body_bytes"] = payload
        if args.max_concurrent_requests is not None:
            changes["max_queue"] = args.max_concurrent_requests
        if args.auto_truncate:
            changes["auto_truncate"] = True
        key = args.api_key if args.api_key is not None else os.environ.get("API_KEY")  # TEI's env, as the chart sets it
        if key is not None:
            changes["api_key"] = key
        settings = replace(settings, **changes)
        port = args.port if args.port is not None else (_env_int("PORT") or 8080)
        if not _loopback(args.host) and settings.api_key is None:
            print(f"autotune serve: warning: listening on {args.host}: anyone who can reach port {port} can use this "
                  "reranker; keep it on a private network (compose and Kubernetes do), or set --api-key",
                  file=err, flush=True)
        serve(settings, args.host, port, graceful_timeout_s=args.graceful_timeout,
              announce=lambda where: print(f"autotune serve: {where}", file=err, flush=True))
        return ExitStatus.OK
