"""Hindsight's HTTP client: options and URLs checked before any request, bank ids kept to one path segment, and
recalls retried only where retrying can help (time-outs, 429, 5xx), never on a client error or a bad answer."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import ClassVar

import httpx
import pytest

from autotune.errors import OptionsError, UpstreamError
from autotune.hindsight.client import check_http_options, check_url, post_with_retry, recall_path, server_version
from tests.support.captured import captured_recall
from tests.support.http import JsonHandler, serving


class Scripted(JsonHandler):
    """Answers each POST with the next scripted status (200: a captured recall), and GET /version."""

    script: ClassVar[list[int]] = []
    posts: ClassVar[int] = 0
    version: ClassVar[object] = {"api_version": "1.1.0"}

    def do_GET(self) -> None:
        self._json(200, self.version)

    def do_POST(self) -> None:
        Scripted.posts += 1
        self.rfile.read(int(self.headers["content-length"]))
        status = self.script.pop(0)
        self._json(status, captured_recall() if status == 200 else {"detail": "no"})


@pytest.fixture()
def scripted() -> Iterator[httpx.Client]:
    Scripted.script, Scripted.posts, Scripted.version = [], 0, {"api_version": "1.1.0"}
    with serving(Scripted) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def test_5xx_and_429_are_retried_until_an_answer(scripted, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    Scripted.script = [503, 429, 200]
    answer = post_with_retry(scripted, recall_path("b"), {"query": "q", "trace": True}, retries=2)
    assert answer["trace"]["reranked"] and Scripted.posts == 3


@pytest.mark.parametrize(("status", "message"), [(400, "HTTP 400"), (404, "HTTP 404"), (401, "API key")])
def test_a_client_error_is_not_retried(scripted, status, message):
    Scripted.script = [status, 200]
    with pytest.raises(UpstreamError, match=message):
        post_with_retry(scripted, recall_path("b"), {"query": "q"}, retries=3)
    assert Scripted.posts == 1


def test_retries_run_out_with_the_last_problem_named(scripted, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    Scripted.script = [502, 502]
    with pytest.raises(UpstreamError, match="HTTP 502 after 2 attempts"):
        post_with_retry(scripted, recall_path("b"), {"query": "q"}, retries=1)


def test_the_version_is_read_or_is_none(scripted):
    assert server_version(scripted) == "1.1.0"
    Scripted.version = "<html>"
    assert server_version(scripted) is None


@pytest.mark.parametrize("bank", ["../admin", "a/b", "x?y=1", "a#b"])
def test_a_bank_id_stays_one_segment(bank):
    segment = recall_path(bank).removeprefix("/v1/default/banks/").removesuffix("/memories/recall")
    assert "/" not in segment and "?" not in segment and "#" not in segment


@pytest.mark.parametrize("bank", ["", " ", ".", "..", "a\nb", "x" * 257])
def test_a_bank_id_hindsight_would_not_accept_is_refused(bank):
    with pytest.raises(OptionsError, match="--bank"):
        recall_path(bank)


@pytest.mark.parametrize("url", ["localhost:8888", "ftp://h/x", "http://", "http://u:p@[::1"])
def test_a_url_that_is_not_http_is_refused(url):
    with pytest.raises(OptionsError, match="--url"):
        check_url(url)
    assert check_url("http://localhost:8888/") == "http://localhost:8888"


@pytest.mark.parametrize(("timeout", "retries"), [(0.0, 1), (math.nan, 1), (math.inf, 1), (5.0, -1), (5.0, 21)])
def test_http_options_out_of_range_are_refused(timeout, retries):
    with pytest.raises(OptionsError):
        check_http_options(timeout, retries)
    check_http_options(5.0, 3)

