"""No password that sits in a URL is ever shown (issue 46, item 1)."""

from __future__ import annotations

import pytest

from autotune.redact import has_userinfo, redact
from tests.support.cli import run_cli


@pytest.mark.parametrize(("text", "shown"), [
    ("connection to http://alice:S3cretPW@127.0.0.1:1 failed", "connection to http://***@127.0.0.1:1 failed"),
    ("http://a:p@ss@host/x?y=a@b", "http://***@host/x?y=a@b"),
    ("postgresql+psycopg://u:pw@db/x", "postgresql+psycopg://***@db/x"),
    ("--url 'http://u:p@[::1' is not", "--url 'http://***@[::1' is not"),
    ("http://host/path@x and no url", "http://host/path@x and no url"),
])
def test_redact_hides_the_userinfo_and_keeps_the_rest(text, shown):
    assert redact(text) == shown


def test_has_userinfo():
    assert has_userinfo("http://u:p@h") and not has_userinfo("http://h/a@b") and not has_userinfo("/m/a@b")


@pytest.mark.parametrize("command", ["record", "verify"])
def test_record_and_verify_never_print_the_password(tmp_path, command):
    queries = tmp_path / "q.txt"
    queries.write_text("when is the car insurance due?\n")
    args = [command, "--url", "http://alice:S3cretPW@127.0.0.1:1", "--bank", "b", "--queries", str(queries),
            "--timeout", "2"]
    if command == "record":
        args += ["-o", str(tmp_path / "w.jsonl"), "--retries", "0"]
    code, out, err = run_cli(args)
    assert code != 0
    assert "S3cretPW" not in out + err and "alice" not in out + err
    assert "127.0.0.1:1" in err  # the host is still named


def test_a_malformed_url_with_a_password_is_refused_without_it(tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("q\n")
    code, out, err = run_cli(["record", "--url", "http://u:S3cretPW@[::1", "--bank", "b", "--queries", str(queries),
                              "-o", str(tmp_path / "w.jsonl")])
    assert code == 4 and "S3cretPW" not in out + err
