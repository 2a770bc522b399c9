"""The key types a profile's `.env` values are held to (issue 50, items 7 and 8)."""

from __future__ import annotations

import pytest

from autotune.runtime.targets.key_spec import PATH, URL


@pytest.mark.parametrize("url", ["http://:8080", "http://re ranker:8080", "http://h:99999", "http://h:8080,http://i",
                                 "http://u:p@h:1", "http://h:0", "ftp://h", "http://[zz]:80", "http://-h-:80"])
def test_what_is_no_url_is_refused(url):
    assert URL.problem(url) is not None


@pytest.mark.parametrize("url", ["http://[::1]:8080", "http://reranker:8080", "https://a.b.c/x", "http://10.0.0.1"])
def test_urls_hindsight_can_reach_are_taken(url):
    assert URL.problem(url) is None


@pytest.mark.parametrize("path", ["models/a\\b/model.onnx", "models/a\0b", "models/a'b", "models/$HOME", "x\n"])
def test_a_path_that_python_dotenv_and_sh_read_apart_is_refused(path):
    assert PATH.problem(path) is not None
