"""`autotune serve` as a command: a drop-in for TEI's image (its flags and environment), what it refuses, and
the warning about an open address."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.corpus import DOCS
from tests.support.serving import in_process


@pytest.mark.parametrize("model_id", ["default", "tiny"])
def test_a_drop_in_for_teis_image_takes_its_flags_and_env(tiny_model_dir, tmp_path, model_id):
    """As Hindsight's chart runs the reranker: `--model-id ... --hostname ... <args>`, PORT in the environment,
    the tuned configuration in AUTOTUNE_* keys. Other TEI flags are ignored with a warning each."""
    import os
    import socket
    import subprocess
    import sys

    from tests.support.http import wait_healthy

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PORT": str(port),
           "AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "1", "AUTOTUNE_LENGTH_SORT": "true",
           "AUTOTUNE_PRECISION": "fp32", "AUTOTUNE_MODEL": "not-this-one"}
    model = "default" if model_id == "default" else str(tiny_model_dir)
    proc = subprocess.Popen([sys.executable, "-m", "autotune", "serve", "--model-id", model,
                             "--hostname", "127.0.0.1", "--auto-truncate", "--max-client-batch-size", "64",
                             "--tokenization-workers", "2", "--json-output", "--dtype", "float32"],
                            env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        info = httpx.get(url + "/info").json()
        assert info["max_client_batch_size"] == 64 and info["auto_truncate"] is True
        resp = httpx.post(url + "/rerank", json={"query": "capital of France?", "texts": DOCS})
        assert resp.status_code == 200
        expected = in_process(None if model == "default" else tiny_model_dir, "capital of France?", DOCS).scores
        for item in resp.json():
            assert abs(item["score"] - expected[item["index"]]) < 1e-5
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert err.count("warning:") == 3 and "--tokenization-workers" in err and "--json-output" in err


@pytest.mark.parametrize("flag", [["--dtype", "float16"], ["--pooling", "mean"], ["--revision", "main"]])
def test_a_tei_flag_that_changes_scores_is_refused(flag):
    import io

    from autotune.cli import main
    from autotune.errors import ExitStatus

    err = io.StringIO()
    assert main(["serve", "--model-id", "default", *flag], stdout=io.StringIO(), stderr=err) == ExitStatus.BAD_OPTIONS
    assert flag[0] in err.getvalue() and len(err.getvalue().strip().splitlines()) == 1


def test_other_commands_still_refuse_unknown_flags():
    import io

    from autotune.cli import main
    from autotune.errors import ExitStatus

    err = io.StringIO()
    assert main(["probe", "--bogus"], stdout=io.StringIO(), stderr=err) == ExitStatus.BAD_OPTIONS
    assert "--bogus" in err.getvalue()


def test_listening_beyond_loopback_without_a_key_warns(tiny_model_dir, monkeypatch):
    import io
    import socket

    from autotune.cli import main
    from autotune.errors import ExitStatus

    for key, value in {"AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_INTRA_OP_THREADS": "1", "AUTOTUNE_LENGTH_SORT": "true",
                       "AUTOTUNE_PRECISION": "fp32"}.items():
        monkeypatch.setenv(key, value)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = io.StringIO()
        status = main(["serve", "--model-id", str(tiny_model_dir), "--host", "0.0.0.0", "--port", str(port)],
                      stdout=io.StringIO(), stderr=err)
        assert status == ExitStatus.BAD_OPTIONS  # the port is taken: it stops before serving, after the warning
        assert "warning: listening on 0.0.0.0" in err.getvalue() and "--api-key" in err.getvalue()
        err = io.StringIO()
        status = main(["serve", "--model-id", str(tiny_model_dir), "--host", "127.0.0.1", "--port", str(port)],
                      stdout=io.StringIO(), stderr=err)
        assert status == ExitStatus.BAD_OPTIONS and "warning" not in err.getvalue()
