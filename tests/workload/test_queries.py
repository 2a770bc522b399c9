from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autotune.errors import WorkloadError
from autotune.workload.queries import load_workload, parse_workload

GOOD = {"query": "q", "documents": ["a", {"text": "b", "node_id": "n1"}]}


def _lines(*objs: object) -> bytes:
    return ("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n").encode()


@pytest.mark.parametrize(("data", "message"), [
    (_lines(GOOD, "{not json"), "line 2: malformed JSON"),
    (_lines({"documents": ["a"]}), "line 1: missing \"query\""),
    (_lines({"query": "  ", "documents": ["a"]}), "line 1: \"query\" is empty"),
    (_lines(GOOD, GOOD, {"query": "q"}), "line 3: missing \"documents\""),
    (_lines({"query": "q", "documents": []}), "line 1: \"documents\" is empty"),
    (_lines({"query": "q", "documents": ["a", 3]}), "line 1: document 1 is not a string"),
    (_lines({"query": "q", "documents": [{"txt": "a"}]}), "line 1: document 0"),
    (_lines([1, 2]), "line 1: expected a JSON object"),
    (b"[" * 100_000 + b"\n", "line 1: malformed JSON"),
    (b"", "no queries"),
    (b"\n\n  \n", "no queries"),
    (b'{"query": "caf\xe9", "documents": ["a"]}\n', "not UTF-8"),
    (b'{"query": "q", "documents": ["a\x00b"]}\n', "line 1: contains a NUL byte"),
])
def test_bad_workloads_name_the_line_and_problem(data, message):
    with pytest.raises(WorkloadError, match=message):
        parse_workload(data)


def test_missing_file(tmp_path):
    with pytest.raises(WorkloadError, match="does not exist"):
        load_workload(tmp_path / "nope.jsonl")


def test_documents_as_objects_budget_and_id():
    wl = parse_workload(_lines({**GOOD, "budget": "mid", "id": 7, "hindsight_rerank_s": 0.4}))
    q = wl.queries[0]
    assert q.documents == ["a", "b"] and q.budget == "mid" and q.id == "7"
    assert q.extra == {"hindsight_rerank_s": 0.4}


def test_unicode_line_separators_inside_strings_do_not_split_lines():
    wl = parse_workload(_lines({"query": "a\u2028b", "documents": ["日本語 🍣", "x" * 1_000_000]}))
    assert wl.queries[0].query == "a\u2028b"
    assert len(wl.queries[0].documents[1]) == 1_000_000


def test_crlf_and_summary_hash_only():
    secret = {"query": "where is the secret vault", "documents": ["the vault key is under the mat"]}
    wl = parse_workload(_lines(secret, secret).replace(b"\n", b"\r\n"))
    summary = wl.summary()
    assert summary["queries"] == 2 and len(summary["sha256"]) == 64
    assert "vault" not in json.dumps(summary)


texts = st.text(min_size=1).filter(lambda s: s.strip() and "\x00" not in s)


@given(st.lists(st.tuples(texts, st.lists(st.text().filter(lambda s: "\x00" not in s), min_size=1, max_size=5)),
                min_size=1, max_size=5))
def test_parser_round_trips_any_valid_workload(rows):
    data = "\n".join(json.dumps({"query": q, "documents": d}, ensure_ascii=False) for q, d in rows).encode()
    wl = parse_workload(data)
    assert [(q.query, q.documents) for q in wl.queries] == rows


@given(st.binary(max_size=200))
def test_parser_never_crashes_on_arbitrary_bytes(data):
    try:
        parse_workload(data)
    except WorkloadError as exc:
        assert "\n" not in exc.message


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("extra", "says"), [
    (f'"meta": {_deep(900)}', "nested more than 32 levels"),
    ('"n": ' + "9" * 5000, "too many digits"),
    ('"hindsight_scores": [' + "9" * 400 + ', 1.0]', "one finite number"),
    ('"hindsight_scores": [1.0]', "one finite number"),
])
def test_lines_that_used_to_crash_later_are_refused_at_once(tmp_path, extra, says):
    """Issue 36, item 12: each parsed, then died after the whole search (RecursionError while pickling,
    ValueError, TypeError); now one line naming the line, before anything runs."""
    from autotune.errors import WorkloadError
    from autotune.workload.queries import load_workload

    path = tmp_path / "w.jsonl"
    path.write_text('{"query": "q", "documents": ["a", "b"], ' + extra + "}\n")
    with pytest.raises(WorkloadError, match=says):
        load_workload(path)


def test_unscored_candidates_stay_allowed(tmp_path):
    from autotune.workload.queries import load_workload

    path = tmp_path / "w.jsonl"
    path.write_text('{"query": "q", "documents": ["a", "b"], "hindsight_scores": [0.5, null]}\n')
    assert load_workload(path).queries[0].extra["hindsight_scores"] == [0.5, None]


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "too-large"])
def test_a_workload_that_is_no_bounded_file_is_refused_before_it_is_read(tmp_path, kind, monkeypatch):
    """Issue 36, item 11: /dev/zero read without limit; a FIFO with no writer hung."""
    import os

    import autotune.workload.queries as queries
    from autotune.errors import WorkloadError

    if kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "big.jsonl"
        path.write_text('{"query": "q", "documents": ["a"]}\n' * 100)
        monkeypatch.setattr(queries, "MAX_WORKLOAD_BYTES", 1000)
    with pytest.raises(WorkloadError, match="not a regular file" if kind != "too-large" else "larger than"):
        queries.load_workload(path)
