"""Every answer from a server is checked once, where it enters autotune (issue 36, item 13)."""

from __future__ import annotations

import json

import pytest

from autotune.hindsight.schema import BadAnswer, parse_recall, parse_version_body
from tests.hindsight.test_versions import response_1_1


def test_a_hindsight_1_1_answer_passes_unchanged():
    answer = response_1_1()
    assert parse_recall(json.dumps(answer).encode()) == answer


def test_a_bare_trace_is_checked_as_a_trace():
    with pytest.raises(BadAnswer, match=r"reranked\[0\]\.text"):
        parse_recall(json.dumps({"reranked": [{"text": True}]}))


BAD = {
    "a list": ("[]", "is a JSON list, not an object"),
    "not JSON": ("{oops", "is not JSON"),
    "phase_metrics: 5": ('{"trace": {"summary": {"phase_metrics": 5}}}', "trace.summary.phase_metrics"),
    "a 400-digit score": ('{"trace": {"reranked": [{"score_components": {"cross_encoder_score": 1' + "0" * 400
                          + "}}]}}", r"trace.reranked[0].score_components.cross_encoder_score"),
    "NaN score": ('{"trace": {"reranked": [{"rerank_score": NaN}]}}', "trace.reranked[0].rerank_score"),
    "a boolean budget": ('{"trace": {"query": {"budget": true}}}', "trace.query.budget"),
    "a string duration": ('{"trace": {"summary": {"phase_metrics": [{"duration_seconds": "5"}]}}}',
                          "duration_seconds"),
    "results as an object": ('{"results": {"a": 1}}', "results"),
    "nested 100000 deep": ('{"trace": ' + "[" * 100_000 + "]" * 100_000 + "}", "is not JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_answer_is_one_line_naming_the_field(case):
    body, named = BAD[case]
    with pytest.raises(BadAnswer) as caught:
        parse_recall(body.encode())
    assert named in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(("body", "version"), [
    (b'{"api_version": "1.1.0", "features": {}}', "1.1.0"), (b'{"version": "v0.9.2rc1"}', "v0.9.2rc1"),
    (b'"1.0"', "1.0"), (b"1.1.0\n", "1.1.0"), (b'{"version": 5}', None), (b'"<html>"', None),
    (b'"1.1.0; rm -rf /"', None), (b"[" * 100_000, None), (b"\x00\x01", None), (b"{}", None),
])
def test_only_a_version_passes_for_a_version(body, version):
    assert parse_version_body(body) == version
