"""What `record` and `verify` read of an answer is bounded (issue 46, item 10), and an interrupted `record` says
what it wrote and how to go on (item 11)."""

from __future__ import annotations

import os
import signal
from typing import ClassVar

import httpx
import pytest

from autotune.errors import ExitStatus, UpstreamError
from autotune.hindsight import client as hindsight_client
from tests.support.captured import captured_recall
from tests.support.cli import run_cli
from tests.support.http import JsonHandler, serving


class Huge(JsonHandler):
    mode: ClassVar[str] = "declared"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        if self.mode == "declared":
            self.send_header("content-length", str(10**9))
            self.end_headers()
            return
        self.send_header("transfer-encoding", "chunked")  # endless
        self.end_headers()
        chunk = b"x" * 65536
        try:
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            return


@pytest.mark.parametrize("mode", ["declared", "endless"])
def test_an_answer_past_the_cap_is_one_error_not_a_growing_buffer(monkeypatch, mode):
    monkeypatch.setattr(hindsight_client, "MAX_ANSWER_BYTES", 4 * 1024 * 1024)
    Huge.mode = mode
    with (serving(Huge) as url, httpx.Client(base_url=url, timeout=20) as http,
          pytest.raises(UpstreamError, match="the answer passed 4 MB")):
        hindsight_client.post_with_retry(http, "/recall", {"query": "q"}, retries=2)


class InterruptedHindsight(JsonHandler):
    """Answers the first recall, then interrupts the process (as Ctrl-C would) while the second is asked."""

    calls: ClassVar[int] = 0

    def do_GET(self) -> None:
        self._json(404, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        InterruptedHindsight.calls += 1
        if InterruptedHindsight.calls == 2:
            os.kill(os.getpid(), signal.SIGINT)
        self._json(200, captured_recall())


def test_an_interrupted_record_names_what_it_wrote_and_how_to_resume(tmp_path):
    InterruptedHindsight.calls = 0
    queries = tmp_path / "q.txt"
    queries.write_text("first\nsecond\nthird\n")
    out = tmp_path / "w.jsonl"
    with serving(InterruptedHindsight) as url:
        status, _, err = run_cli(["record", "--url", url, "--bank", "b", "--queries", str(queries), "-o", str(out)])
    assert status == ExitStatus.INTERRUPTED, err
    assert "nothing was written" not in err
    assert "holds the 1 recall(s)" in err and "--resume" in err, err
    assert len(out.read_text().splitlines()) == 1
