"""A run's options: the CLI's defaults are the library's, so `tune(RunOptions(workload=...))` is `autotune run`."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from autotune.cli import build_parser
from autotune.commands.run import options_from
from autotune.pipeline.options import RunOptions


def parsed(*argv: str) -> RunOptions:
    return options_from(build_parser(["run"]).parse_args(["run", "--workload", "w.jsonl", *argv]))


def test_the_cli_defaults_are_the_librarys():
    assert parsed() == RunOptions(workload=Path("w.jsonl"))


@pytest.mark.parametrize(("argv", "field", "value"), [
    (["--no-compose"], "compose_file", None),
    (["--no-pool-tuning"], "tune_pool", False),
    (["--target", "tei"], "target", "tei"),
    (["--precisions", "fp32, int8"], "precisions", ["fp32", "int8"]),
    (["--batch-sizes", "2,4"], "batch_sizes", [2, 4]),
])
def test_each_flag_lands_in_its_field(argv, field, value):
    assert getattr(parsed(*argv), field) == value
    assert {f.name for f in fields(RunOptions)} >= {field}


def test_the_outputs_are_the_options_paths():
    opts = RunOptions(workload=Path("w"), env_file=Path("a/.env"), profile_dir=Path("p"), compose_file=None,
                      name="node", model_out=Path("m"), tei_url="http://r:1")
    out = opts.outputs()
    assert (out.env_file, out.profile_dir, out.compose_file, out.model_out, out.name, out.tei_url) == (
        Path("a/.env"), Path("p"), None, Path("m"), "node", "http://r:1")
