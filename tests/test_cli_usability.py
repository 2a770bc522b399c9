"""Issue 35, item 7: the CLI a newcomer meets. No abbreviated flags, defaults and help on every flag, a version,
one name for the profile directory, and messages that name what they are about."""

from __future__ import annotations

import argparse

import pytest

from autotune.cli import build_parser, main
from autotune.errors import ExitStatus
from tests.support.cli import run_cli


def _subparsers():
    return build_parser(every=True)._subparsers._group_actions[0].choices  # type: ignore[union-attr]


def test_an_abbreviated_flag_is_refused_not_guessed(tmp_path, monkeypatch):
    """`run --profile x.yaml` once meant `--profile-dir x.yaml` and made a directory of that name."""
    monkeypatch.chdir(tmp_path)
    status, _, err = run_cli(["run", "--workload", "w.jsonl", "--profile", "x.yaml"])
    assert status == ExitStatus.BAD_OPTIONS and "--profile" in err
    assert not (tmp_path / "x.yaml").exists()


def test_every_flag_has_help_and_shows_its_default():
    for name, parser in _subparsers().items():
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{name} {action.option_strings[0]} has no help"
        assert issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter), name
        assert "(default: None)" not in parser.format_help() and "(default: False)" not in parser.format_help(), name
    assert "(default: 3)" in _subparsers()["run"].format_help()


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("autotune ")


def test_apply_and_run_name_the_profile_directory_alike():
    apply_flags = {s for a in _subparsers()["apply"]._actions for s in a.option_strings}
    run_flags = {s for a in _subparsers()["run"]._actions for s in a.option_strings}
    assert "--profile-dir" in apply_flags and "--profile-dir" in run_flags


@pytest.mark.parametrize(("line", "says"), [
    ('{"query": "q', "malformed JSON (Unterminated string starting at: column 11)"),
    ('{"query": "q", "documents": "one text"}', '"documents" is a str, not a list'),
    ('{"query": "q"}', 'missing "documents"'),
])
def test_workload_messages_say_what_is_wrong(tmp_path, line, says):
    from autotune.errors import WorkloadError
    from autotune.workload.queries import load_workload

    path = tmp_path / "w.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert says in info.value.message and " at at " not in info.value.message


def test_a_negative_wait_is_refused(tmp_path):
    """Issue 36, item 15: --wait-quiet -5 was accepted."""
    status, _, err = run_cli(["run", "--workload", str(tmp_path / "w.jsonl"), "--wait-quiet", "-5"])
    assert status == ExitStatus.BAD_OPTIONS and "--wait-quiet" in err


def test_concurrency_is_bounded_in_one_line(tmp_path):
    """Issue 46, item 13: `--concurrency 100000` ended in an internal error (can't start new thread)."""
    status, _, err = run_cli(["run", "--workload", str(tmp_path / "w.jsonl"), "--concurrency", "100000"])
    assert status == ExitStatus.BAD_OPTIONS and "at most 256" in err and len(err.strip().splitlines()) == 1
