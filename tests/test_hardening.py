"""Regression tests for the hostile-input sweep (issue 17): one line, a documented exit, nothing half-written."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.envfile import BEGIN
from autotune.runtime.bert_onnx import build_bert_cross_encoder
from tests.conftest import TINY_CONFIG, tiny_weights, write_model_dir, write_workload
from tests.support.cli import one_line, run_cli
from tests.support.http import JsonHandler, serving, wait_healthy

FAST = ["--trials", "3", "--repeats", "1", "--final-rounds", "2"]






def _nan_model(tmp_path: Path) -> Path:
    weights = tiny_weights(TINY_CONFIG)
    weights["classifier.bias"] = np.full_like(weights["classifier.bias"], np.nan)
    return write_model_dir(tmp_path / "nan", build_bert_cross_encoder(weights, TINY_CONFIG)[0], TINY_CONFIG)


def _vocab_behind_identity(tmp_path: Path) -> Path:
    """A 500-row embedding the graph inspection cannot see: its ids pass through an Identity first."""
    cfg = dict(TINY_CONFIG, vocab_size=500)
    model = build_bert_cross_encoder(tiny_weights(cfg), cfg)[0]
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name == "input_ids":
                node.input[i] = "input_ids_copy"
    model.graph.node.insert(0, onnx.helper.make_node("Identity", ["input_ids"], ["input_ids_copy"]))
    return write_model_dir(tmp_path / "identity", model, cfg)


RUN_CASES = {
    "D1-lone-surrogate": (lambda tmp, wl: ["--workload", _surrogate(tmp)], ExitStatus.BAD_WORKLOAD),
    "D2-nan-model": (lambda tmp, wl: ["--workload", wl, "--model", str(_nan_model(tmp))], ExitStatus.BAD_MODEL),
    "D3-vocab-behind-identity": (lambda tmp, wl: ["--workload", wl, "--model", str(_vocab_behind_identity(tmp))],
                                 ExitStatus.BAD_MODEL),
    "D4-threads-1000": (lambda tmp, wl: ["--workload", wl, "--max-threads", "1000"], ExitStatus.BAD_OPTIONS),
    "D5-nan-tolerance": (lambda tmp, wl: ["--workload", wl, "--fp32-max-abs", "nan"], ExitStatus.BAD_OPTIONS),
    "D5-nan-timeout": (lambda tmp, wl: ["--workload", wl, "--timeout", "nan"], ExitStatus.BAD_OPTIONS),
    "D5-inf-wait": (lambda tmp, wl: ["--workload", wl, "--wait-quiet", "inf"], ExitStatus.BAD_OPTIONS),
    "D6-seed-negative": (lambda tmp, wl: ["--workload", wl, "--seed", "-1"], ExitStatus.BAD_OPTIONS),
    "D6-seed-huge": (lambda tmp, wl: ["--workload", wl, "--seed", str(2**36)], ExitStatus.BAD_OPTIONS),
    "D6-storage-bogus": (lambda tmp, wl: ["--workload", wl, "--storage", "bogus://x"], ExitStatus.BAD_OPTIONS),
    "D6-storage-nowhere": (lambda tmp, wl: ["--workload", wl, "--storage", "sqlite:////nonexistent/dir/x.db"],
                           ExitStatus.BAD_OPTIONS),
    "D7-env-is-a-directory": (lambda tmp, wl: ["--workload", wl, "--env-file", _mkdir(tmp / "envdir")],
                              ExitStatus.IO_ERROR),
    "D7-env-dev-full": (lambda tmp, wl: ["--workload", wl, "--env-file", "/dev/full"], ExitStatus.IO_ERROR),
}


def _surrogate(tmp: Path) -> str:
    path = tmp / "surrogate.jsonl"
    path.write_bytes(b'{"query": "ok", "documents": ["a"]}\n{"query": "bad \\ud800", "documents": ["a"]}\n')
    return str(path)


def _mkdir(path: Path) -> str:
    path.mkdir()
    return str(path)


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_run_refuses_with_one_line_and_writes_nothing(tmp_path, tiny_model_dir, monkeypatch, case):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    make, expected = RUN_CASES[case]
    args = make(tmp_path, str(write_workload(tmp_path / "wl.jsonl")))
    if "--model" not in args:
        args += ["--model", str(tiny_model_dir)]
    started = time.monotonic()
    status, _, err = run_cli(["run", *args, *FAST])
    assert status == expected, err
    assert one_line(err), err
    assert list(work.iterdir()) == []
    if case.startswith(("D4", "D5", "D6", "D7")):
        assert time.monotonic() - started < 20  # refused up front, not after measuring
    if case == "D1-lone-surrogate":
        assert "line 2" in err


def test_a_damaged_env_block_changes_no_file(tmp_path, tiny_model_dir, workload_file):
    """D8: validated before measuring; the .env, the profile dir and the compose file stay as they were."""
    env = tmp_path / ".env"
    for text in (f"A=1\n{BEGIN}\nX=1\n", f"A=1\n{BEGIN}\n{BEGIN}\n"):
        env.write_text(text)
        status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                  "--env-file", str(env), "--profile-dir", str(tmp_path / "p"), "--compose-file",
                                  str(tmp_path / "c.yaml"), *FAST])
        assert status == ExitStatus.IO_ERROR and one_line(err) and env.read_text() == text
        assert not (tmp_path / "p").exists() and not (tmp_path / "c.yaml").exists()


def test_staged_outputs_commit_together_or_not_at_all(tmp_path):
    from autotune.errors import OutputError
    from autotune.fileio import StagedFiles

    (tmp_path / "a").write_text("old a")
    (tmp_path / "blocker").write_text("")
    with pytest.raises(OutputError), StagedFiles() as files:
        files.add(tmp_path / "a", "new a")
        files.add(tmp_path / "blocker" / "b", "x")  # cannot be staged: its parent is a file
        files.commit()
    assert (tmp_path / "a").read_text() == "old a"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_nothing_passing_parity_writes_nothing_unless_asked(tmp_path, tiny_model_dir, workload_file, monkeypatch):
    """D5: with every finalist failing parity, the run says so and writes nothing."""
    import autotune.pipeline.phases as tuner
    from autotune.search.parity import ParityReport, Tolerance

    failing = ParityReport(1.0, 0.0, 0.0, 0, Tolerance(1e-4, 0.999, 1.0))
    monkeypatch.setattr(tuner, "compare", lambda *a, **k: failing)
    out = tmp_path / "out"
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(out / ".env"), "--profile-dir", str(out / "p"), "--no-compose", "--target", "tei", *FAST]
    status, _, err = run_cli(args)
    errors = [ln for ln in err.splitlines() if ln.startswith("autotune: error:")]
    assert status == ExitStatus.BAD_OPTIONS and len(errors) == 1 and "--write-baseline" in errors[0]
    assert err.strip().splitlines()[-1] == errors[0] and "Traceback" not in err
    assert not out.exists()
    assert run_cli([*args, "--write-baseline"])[0] == ExitStatus.OK


def test_resuming_never_remeasures_a_configuration(tmp_path, tiny_model_dir, workload_file):
    """D9: --trials 3 then --trials 6 continues the sampler; a configuration it holds is reused, not re-run."""
    out = tmp_path / "out"
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(out / ".env"), "--profile-dir", str(out / "p"), "--no-compose", "--name", "r", "--target", "tei",
            "--repeats", "1", "--final-rounds", "2", "--seed", "5"]
    assert run_cli([*args, "--trials", "3"])[0] == ExitStatus.OK
    status, text, err = run_cli([*args, "--trials", "6"])
    assert status == ExitStatus.OK, err
    assert "6 trials (3 resumed" in text
    history = yaml.safe_load((out / "p" / "r.yaml").read_text())["search"]["history"]
    keys = ("batch_size", "intra_op_threads", "length_sort", "precision", "mem_arena", "graph", "spinning", "workers")
    measured = [tuple(t[k] for k in keys) for t in history if t.get("duplicate_of") is None]
    assert len(measured) == len(set(measured))
    first, later = history[:3], history[3:]
    assert [tuple(t[k] for k in keys) for t in later] != [tuple(t[k] for k in keys) for t in first]


def test_corrupt_journal_is_named_and_fresh_sets_it_aside(tmp_path, tiny_model_dir, workload_file, monkeypatch):
    """D11."""
    state = tmp_path / "state"
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(state))
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(tmp_path / ".env"), "--profile-dir", str(tmp_path / "p"), "--no-compose", *FAST]
    assert run_cli(args)[0] == ExitStatus.OK
    with open(state / "studies.journal", "a") as fh:
        fh.write("{garbage\n")
    status, _, err = run_cli(args)
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and "studies.journal" in err and "--fresh" in err, err
    assert run_cli([*args, "--fresh"])[0] == ExitStatus.OK
    assert list(state.glob("studies.journal.corrupt-*"))


@pytest.mark.parametrize("content", ['schema: 1\nconfig: {batch_size: 4}\nhost: "str"\n',
                                     'schema: 1\nconfig: {batch_size: 1, intra_op_threads: 0, length_sort: false, '
                                     'precision: fp32}\nhost: {isa: "x", cores: 3}\n',
                                     "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
                                     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nschema: 1\nconfig: *c\n"])
def test_check_and_report_on_a_malformed_profile(tmp_path, content, tiny_model_dir):
    """D10: exit 4 (or a drift line), never AttributeError."""
    path = tmp_path / "p.yaml"
    path.write_text(content)
    for command in (["check", "--profile", str(path), "--model", str(tiny_model_dir)],
                    ["report", "--profile", str(path), "--out", str(tmp_path / "r.html")]):
        status, _, err = run_cli(command)
        assert status in (ExitStatus.BAD_OPTIONS, ExitStatus.DRIFT), err
        assert "internal error" not in err and "Traceback" not in err


# ---- record ----------------------------------------------------------------------------------------------------

class Odd(JsonHandler):
    mode = "array"

    def do_GET(self) -> None:
        self._json(200, {"api_version": "1.1.0"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.mode == "drip-headers":  # a status line, then a header a byte at a time: every read succeeds
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(160):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.25)
            return
        if self.mode == "drip":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "1000")
            self.end_headers()
            for _ in range(40):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.25)
            return
        body = [1, 2] if self.mode == "array" else {"trace": {"query": {"query_text": "q"}, "reranked": [],
                                                               "retrieval_results": "nope"}}
        self._json(200, body)


@pytest.mark.parametrize("mode", ["array", "nope"])
def test_record_skips_and_counts_malformed_answers(tmp_path, mode):
    """D19."""
    Odd.mode = mode
    queries = tmp_path / "q.txt"
    queries.write_text("one\ntwo\n")
    with serving(Odd) as url:
        status, _, err = run_cli(["record", "--url", url, "--bank", "b", "--queries", str(queries), "-o",
                                  str(tmp_path / "o.jsonl"), "--retries", "0"])
    assert status == ExitStatus.UPSTREAM and "internal error" not in err, err


def test_record_gives_each_recall_a_total_deadline(tmp_path):
    """D18: a server that drips a byte every quarter second is cut off at --timeout, not per read."""
    Odd.mode = "drip"
    queries = tmp_path / "q.txt"
    queries.write_text("one\n")
    started = time.monotonic()
    with serving(Odd) as url:
        status, _, err = run_cli(["record", "--url", url, "--bank", "b", "--queries", str(queries), "-o",
                                  str(tmp_path / "o.jsonl"), "--retries", "0", "--timeout", "1"])
    assert status == ExitStatus.UPSTREAM and "timed out" in err
    assert time.monotonic() - started < 6


def test_record_bounds_a_recall_whose_headers_drip(tmp_path):
    """Issue 36, item 9: --timeout bounds the whole exchange, headers included (the run would take 40 s)."""
    Odd.mode = "drip-headers"
    queries = tmp_path / "q.txt"
    queries.write_text("one\n")
    with serving(Odd) as url:
        status, _, err = run_cli(["record", "--url", url, "--bank", "b", "--queries", str(queries), "-o",
                                  str(tmp_path / "o.jsonl"), "--retries", "0", "--timeout", "1"])
    assert status == ExitStatus.UPSTREAM and "timed out" in err, err


def test_from_traces_skips_a_directory_named_like_a_trace(tmp_path):
    traces = tmp_path / "t"
    (traces / "d.json").mkdir(parents=True)
    status, out, err = run_cli(["record", "--from-traces", str(traces), "-o", str(tmp_path / "o.jsonl")])
    assert status in (ExitStatus.UPSTREAM,) and "d.json" in out + err and "internal error" not in err


@pytest.mark.parametrize("flag", [["--retries", "-1"], ["--timeout", "-1"], ["--timeout", "0"],
                                  ["--timeout", "nan"]])
def test_record_rejects_bad_numbers_before_creating_a_file(tmp_path, flag):
    """D20."""
    queries = tmp_path / "q.txt"
    queries.write_text("one\n")
    status, _, err = run_cli(["record", "--url", "http://127.0.0.1:9", "--bank", "b", "--queries", str(queries),
                              "-o", str(tmp_path / "o.jsonl"), *flag])
    assert status == ExitStatus.BAD_OPTIONS and one_line(err)
    assert not (tmp_path / "o.jsonl").exists()


def test_resume_names_a_bad_line_and_changes_nothing(tmp_path):
    """D21."""
    out = tmp_path / "o.jsonl"
    text = '{"query": "a", "documents": ["x"]}\nnot json\n{"query": "b", "documents": ["y"]}\n{"quer'
    out.write_text(text)
    status, _, err = run_cli(["record", "--from-traces", str(tmp_path), "-o", str(out), "--resume"])
    assert status == ExitStatus.BAD_WORKLOAD and "line 2" in err and one_line(err)
    assert out.read_text() == text


@pytest.mark.parametrize("bank", ["../../../admin/delete?x=", "my bank#1"])
def test_bank_ids_stay_one_path_segment(bank):
    """D22."""
    from autotune.hindsight.client import recall_path

    path = recall_path(bank)
    assert path.startswith("/v1/default/banks/") and path.endswith("/memories/recall")
    assert path.count("/") == 6 and "#" not in path and "?" not in path and " " not in path


def test_workload_with_a_byte_order_mark_is_accepted(tmp_path):
    from autotune.workload.queries import load_workload

    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"query": "q", "documents": ["a"]}\n')
    assert load_workload(path).queries[0].query == "q"


def test_a_second_run_is_refused_before_the_model_loads(tmp_path, tiny_model_dir, workload_file, monkeypatch):
    """Even with another state directory (issue 36, item 15: such runs measured at once, unwarned)."""
    from autotune.runlock import host_lock

    loaded = []
    monkeypatch.setattr("autotune.pipeline.phases.resolve_model", lambda *a: loaded.append(1))
    with host_lock():
        monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path / "another-state"))
        status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                "--env-file", str(tmp_path / ".env"), "--no-compose", *FAST])
    assert status == ExitStatus.LOCKED and loaded == [] and f"pid {os.getpid()}" in err, err


# ---- serve -----------------------------------------------------------------------------------------------------

def test_serve_settings_out_of_range_exit_4():
    """D15."""
    from autotune.errors import OptionsError
    from autotune.serve.settings import settings_from_env

    base = {"AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "1", "AUTOTUNE_LENGTH_SORT": "true",
            "AUTOTUNE_PRECISION": "fp32"}
    for bad in ({"AUTOTUNE_MAX_QUEUE": "0"}, {"AUTOTUNE_MAX_CLIENT_BATCH_SIZE": "-5"}):
        with pytest.raises(OptionsError):
            settings_from_env({**base, **bad})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("case", ["D16-missing-model", "D17-port-out-of-range", "D17-port-in-use"])
def test_serve_start_up_failures_are_one_line(tmp_path, case):
    env = {"AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "1", "AUTOTUNE_LENGTH_SORT": "true",
           "AUTOTUNE_PRECISION": "fp32", "AUTOTUNE_MODEL": "/nonexistent" if case.startswith("D16") else "default"}
    (tmp_path / ".env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    holder = socket.socket()
    port = 99999 if "range" in case else _free_port()
    if case.endswith("in-use"):
        holder.bind(("127.0.0.1", port))
        holder.listen()
    try:
        status, _, err = run_cli(["serve", "--env-file", str(tmp_path / ".env"), "--port", str(port)])
    finally:
        holder.close()
    expected = ExitStatus.BAD_MODEL if case.startswith("D16") else ExitStatus.BAD_OPTIONS
    assert status == expected and one_line(err), err


def test_serve_validation_and_streaming_limits(tiny_model_dir):
    """D12, D13, D14: chunked bodies stop at the limit; bad text is 422; stalled clients cannot unhealthy it."""
    import httpx

    from tests.serve.test_app import JSON, LiveServer, _service

    with LiveServer(_service(tiny_model_dir, max_body_bytes=1024 * 1024)) as live:
        def chunks():
            for _ in range(2000):
                yield b"x" * 8192

        resp = httpx.post(live.url + "/rerank", content=chunks(), timeout=30, headers=JSON)
        assert resp.status_code == 413
        resp = httpx.post(live.url + "/rerank", content=b'{"query": "\\ud800", "texts": ["a"]}', timeout=30,
                          headers=JSON)
        assert resp.status_code == 422 and resp.json()["error_type"] == "Validation"
        deep = b'{"query": "q", "texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # 200 KB, under the limit
        resp = httpx.post(live.url + "/rerank", content=deep, timeout=30, headers=JSON)
        assert resp.status_code == 422 and resp.json()["error_type"] == "Validation"
        host, port = live.url.removeprefix("http://").split(":")
        stalled = []
        for _ in range(150):
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /rerank HTTP/1.1\r\nHost: x\r\n")
            stalled.append(s)
        try:
            for _ in range(3):
                assert httpx.get(live.url + "/health", timeout=10).status_code == 200
            ok = httpx.post(live.url + "/rerank", json={"query": "q", "texts": ["a", "b"]}, timeout=30)
            assert ok.status_code == 200
        finally:
            for s in stalled:
                s.close()


def test_sigterm_drains_within_the_grace_period(tmp_path, tiny_model_dir):
    """Graceful stop: SIGTERM with work in flight; the process exits within the grace period plus start-up slack."""
    import httpx

    port = _free_port()
    env = (f"AUTOTUNE_BATCH_SIZE=1\nAUTOTUNE_INTRA_OP_THREADS=1\nAUTOTUNE_LENGTH_SORT=false\nAUTOTUNE_PRECISION=fp32\n"
           f"AUTOTUNE_MODEL={tiny_model_dir}\n")
    (tmp_path / ".env").write_text(env)
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--env-file", str(tmp_path / ".env"),
                             "--port", str(port), "--graceful-timeout", "2"], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, 60)
        statuses: list[int] = []

        def send() -> None:
            try:
                statuses.append(httpx.post(url + "/rerank", json={"query": "q", "texts": ["word " * 100] * 200},
                                           timeout=30).status_code)
            except httpx.HTTPError:
                statuses.append(0)

        threads = [threading.Thread(target=send) for _ in range(12)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        stopped = time.monotonic()
        proc.terminate()
        proc.wait(timeout=20)
        assert time.monotonic() - stopped < 8
        for t in threads:
            t.join(timeout=30)
        assert all(s in (200, 503, 0) for s in statuses), str(statuses)
    finally:
        if proc.poll() is None:
            proc.kill()
