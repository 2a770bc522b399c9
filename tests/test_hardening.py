"""Regression tests from the hostile-input sweeps (issues 17 and 36) that need more than one command or a
process of their own. The one-command cases are rows of the table in `test_sweep.py`."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from autotune.errors import ExitStatus
from tests.support.cli import one_line, run_cli
from tests.support.http import wait_healthy

FAST = ["--trials", "3", "--repeats", "1", "--final-rounds", "2"]


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
    from autotune.gates.parity import ParityReport, Tolerance

    failing = ParityReport(1.0, 0.0, 0.0, 0, Tolerance(1e-4, 0.999, 1.0))
    monkeypatch.setattr(tuner, "compare", lambda *a, **k: failing)
    out = tmp_path / "out"
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
            str(out / ".env"), "--profile-dir", str(out / "p"), "--no-compose", "--target", "tei", *FAST]
    status, _, err = run_cli(args)
    errors = [ln for ln in err.splitlines() if ln.startswith("autotune: error:")]
    assert status == ExitStatus.NOTHING_PASSED and len(errors) == 1 and "--write-baseline" in errors[0]
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
    assert status == ExitStatus.DAMAGED_STATE and one_line(err) and "studies.journal" in err and "--fresh" in err, err
    assert run_cli([*args, "--fresh"])[0] == ExitStatus.OK
    assert list(state.glob("studies.journal.corrupt-*"))


# ---- record ----------------------------------------------------------------------------------------------------

def test_from_traces_skips_a_directory_named_like_a_trace(tmp_path):
    traces = tmp_path / "t"
    (traces / "d.json").mkdir(parents=True)
    status, out, err = run_cli(["record", "--from-traces", str(traces), "-o", str(tmp_path / "o.jsonl")])
    assert status in (ExitStatus.UPSTREAM,) and "d.json" in out + err and "internal error" not in err


@pytest.mark.parametrize("bank", ["../../../admin/delete?x=", "my bank#1"])
def test_bank_ids_stay_one_path_segment(bank):
    """D22."""
    from autotune.hindsight.client import recall_path

    path = recall_path(bank)
    assert path.startswith("/v1/default/banks/") and path.endswith("/memories/recall")
    assert path.count("/") == 6 and "#" not in path and "?" not in path and " " not in path


# ---- serve -----------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sigterm_drains_within_the_grace_period(tmp_path, tiny_model_dir):
    """Graceful stop: SIGTERM with 12 long requests queued. What is running finishes (200); past the grace
    period the rest are answered 503, not dropped, and the process exits 0. (The drain once took 49 s.)"""
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
        statuses: list[int | str] = []

        def send() -> None:
            try:
                statuses.append(httpx.post(url + "/rerank", json={"query": "q", "texts": ["word " * 100] * 200},
                                           timeout=60).status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)

        threads = [threading.Thread(target=send) for _ in range(12)]
        for t in threads:
            t.start()
        while not statuses and _queued(url) < len(threads):  # every request is in before the stop
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        for t in threads:
            t.join(timeout=60)
        assert sorted(set(statuses), key=str) == [200, 503], statuses
    finally:
        if proc.poll() is None:
            proc.kill()


def _queued(url: str) -> float:
    """Requests waiting or running, from the server's own metrics."""
    import httpx

    text = httpx.get(url + "/metrics", timeout=10).text
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("te_queue_size"))


def test_no_finalist_passing_the_result_gate_is_its_own_exit_status(tmp_path, tiny_model_dir, workload_file,
                                                                   monkeypatch):
    """Issue 53: "nothing passed" is a result of the measurement, not a bad option: exit 11, one line."""
    from autotune.gates import scope

    monkeypatch.setattr(scope.Agreement, "passes", lambda self, gate: False)
    out = tmp_path / "out"
    status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--env-file",
                              str(out / ".env"), "--profile-dir", str(out / "p"), "--no-compose", *FAST])
    errors = [ln for ln in err.splitlines() if ln.startswith("autotune: error:")]
    assert status == ExitStatus.NOTHING_PASSED == 11 and len(errors) == 1, err
    assert "result-quality gate" in errors[0] and not out.exists()
