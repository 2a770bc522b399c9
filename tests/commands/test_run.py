"""`autotune run` in process: what it writes, exit statuses and one-line errors, files written only on success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from onnx import TensorProto, helper

from autotune.errors import ExitStatus
from autotune.outputs.envfile import BEGIN
from autotune.runtime.bert_onnx import build_bert_cross_encoder
from tests.support.cli import FAST, outputs, run_cli
from tests.support.models import TINY_CONFIG, tiny_weights, write_model_dir, write_workload


def test_run_tei_writes_env_profile_and_compose(tmp_path, tiny_model_dir, workload_file):
    (tmp_path / "out").mkdir()
    env = tmp_path / "out" / ".env"
    env.write_text("# mine\nHINDSIGHT_API_LLM_API_KEY=sk-very-secret\nAUTOTUNE_PRECISION=fp32\n"
                   "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_HIGH=500\n")
    status, out, err = run_cli(["run", "--target", "tei", "--workload", str(workload_file), "--model",
                                str(tiny_model_dir), *outputs(tmp_path), *FAST])
    assert status == ExitStatus.OK, err
    assert "Finalists" in out and "baseline" in out and "sk-very-secret" not in out + err
    assert "AUTOTUNE_PRECISION is already set outside the autotune block" in out
    text = env.read_text()
    assert text.startswith("# mine\nHINDSIGHT_API_LLM_API_KEY=sk-very-secret\nAUTOTUNE_PRECISION=fp32\n"
                           "HINDSIGHT_API_RERANKER_MAX_CANDIDATES_HIGH=500\n" + BEGIN)
    assert "HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE=500" in text  # one recall stays one request
    assert "AUTOTUNE_MAX_CLIENT_BATCH_SIZE=1024" in text
    assert "HINDSIGHT_API_RERANKER_PROVIDER=tei" in text
    profile_path = next((tmp_path / "out" / "profiles").glob("*.yaml"))
    profile = yaml.safe_load(profile_path.read_text())
    assert profile["schema"] == 1 and profile["parity"]["passed"]
    assert profile["metrics"]["p95_ms"] <= profile["metrics"]["baseline_p95_ms"]
    assert profile["metrics"]["speedup_p95"] >= 1.0
    assert set(profile["config"]) == {"batch_size", "intra_op_threads", "length_sort", "precision", "mem_arena",
                                      "graph", "spinning", "workers"}
    assert profile["target"] == "tei" and profile["model"]["dir"] is None
    assert profile["search"]["trials"] >= 5
    raw = profile_path.read_text()
    assert "capital of France" not in raw and "Paris" not in raw  # hashes only
    assert (tmp_path / "out" / "compose.autotune.yaml").exists()
    noise = profile["noise"]
    assert noise["trustworthy"] == (noise["warnings"] == []) and "loadavg" in noise
    baseline = profile["search"]["finalists"][0]  # not a trial: raced side by side with the finalists
    assert baseline["baseline"] and baseline["batch_size"] == 9 and len(baseline["round_p95_ms"]) == 2


def test_run_onnx_writes_a_model_dir_hindsight_loads(tmp_path, tiny_model_dir, workload_file):
    """The default target: a readable model directory, the onnx keys and no tei keys, a checked tokenizer."""
    import os
    import stat

    (tmp_path / "out").mkdir()
    env = tmp_path / "out" / ".env"
    env.write_text("HINDSIGHT_API_LLM_PROVIDER=none\n")
    models = tmp_path / "out" / "models" / "r"
    status, out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), "--model-out", str(models), "--name", "r",
                                "--model-path-in-container", "/models/r", *FAST])
    assert status == ExitStatus.OK, err
    assert "target: onnx" in out
    assert {p.name for p in models.iterdir()} >= {"model.onnx", "tokenizer.json", "config.json"}
    assert stat.S_IMODE(models.stat().st_mode) == 0o755 & ~_umask()
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 & ~_umask() for p in models.iterdir())
    assert not [p for p in models.parent.iterdir() if p.name.startswith(".")]  # no staging left behind
    from autotune.outputs.envfile import managed_values

    block = managed_values(env)
    assert block["HINDSIGHT_API_RERANKER_PROVIDER"] == "onnx"
    assert block["HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH"] == "/models/r/model.onnx"
    assert block["HINDSIGHT_API_RERANKER_ONNX_CPU_MEM_ARENA"] in ("true", "false")
    assert not any("TEI" in k or k.startswith("AUTOTUNE_") for k in block)
    profile = yaml.safe_load(next((tmp_path / "out" / "profiles").glob("*.yaml")).read_text())
    assert profile["target"] == "onnx" and profile["env"] == block
    assert profile["search"]["history"][0]["length_sort"] is True  # Hindsight always sorts
    assert profile["search"]["history"][0]["mem_arena"] is False  # its default
    compose = yaml.safe_load((tmp_path / "out" / "compose.autotune.yaml").read_text())
    assert set(compose["services"]) == {"hindsight"}
    assert compose["services"]["hindsight"]["volumes"][0].endswith(":/models/r:ro")
    if "tokenizer:" in out:
        assert profile["model"]["tokenizer_check"]["checked"] is True
    # a rerun for another target replaces the block whole
    status, _, err = run_cli(["run", "--target", "tei", "--workload", str(workload_file), "--model",
                              str(tiny_model_dir), *outputs(tmp_path), *FAST])
    assert status == ExitStatus.OK, err
    block = managed_values(env)
    assert block["HINDSIGHT_API_RERANKER_PROVIDER"] == "tei" and not any("ONNX" in k for k in block)
    assert env.read_text().startswith("HINDSIGHT_API_LLM_PROVIDER=none\n")
    os.sync()


def _umask() -> int:
    from autotune.fileio import umask

    return umask()


def test_onnx_target_refuses_a_workload_from_an_older_hindsight(tmp_path, tiny_model_dir):
    workload = tmp_path / "old.jsonl"
    workload.write_text(json.dumps({"query": "q", "documents": ["a", "b"], "hindsight_version": "0.9.3"}) + "\n")
    status, _, err = run_cli(["run", "--workload", str(workload), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), *FAST])
    assert status == ExitStatus.BAD_OPTIONS and "--target tei" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_rerun_resumes_the_study(tmp_path, tiny_model_dir, workload_file):
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), *outputs(tmp_path), *FAST]
    assert run_cli(args)[0] == ExitStatus.OK
    status, out, _ = run_cli(args)
    assert status == ExitStatus.OK and "(5 resumed" in out, out
    status, out, _ = run_cli([*args, "--fresh"])
    assert status == ExitStatus.OK and "(0 resumed" in out


def test_int8_that_fails_parity_is_checked_once_and_never_tried(tmp_path, tiny_model_dir, workload_file):
    """An int8 tolerance nothing can meet: the pre-check drops int8, with its reason, and no trial runs it."""
    status, out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), "--trials", "8", "--repeats", "1", "--final-rounds", "1",
                                "--precisions", "int8,fp32", "--int8-max-abs", "0", "--int8-min-spearman", "1",
                                "--seed", "3"])
    assert status == ExitStatus.OK, err
    profile = yaml.safe_load(next((tmp_path / "out" / "profiles").glob("*.yaml")).read_text())
    assert profile["config"]["precision"] == "fp32"
    dropped = profile["search"]["dropped"]
    assert [(d["knob"], d["value"]) for d in dropped] == [("graph", "fused"), ("precision", "int8")]
    assert "max |Δscore|" in dropped[1]["reason"] and "left out: precision=int8" in out
    assert all(t["precision"] == "fp32" for t in profile["search"]["history"])
    assert profile["search"]["space"]["precision"] == ["fp32"]
    assert profile["parity"]["int8_vs_fp32"] is not None  # the scatter shows why


def _bad_io_model(tmp_path: Path) -> Path:
    x = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["pixel_values"], ["y"])], "g", [x], [y]))
    return write_model_dir(tmp_path / "vision", model, TINY_CONFIG)


def _case(tmp_path: Path, tiny: Path, case: str) -> tuple[list[str], ExitStatus]:
    wl = str(write_workload(tmp_path / "wl.jsonl"))
    model = ["--model", str(tiny)]
    if case == "malformed":
        (tmp_path / "bad.jsonl").write_text('{"query": "q", "documents": ["a"]}\n{oops\n')
        return ["--workload", str(tmp_path / "bad.jsonl"), *model], ExitStatus.BAD_WORKLOAD
    if case in WORKLOAD_BYTES:
        (tmp_path / "bad.jsonl").write_bytes(WORKLOAD_BYTES[case])
        return ["--workload", str(tmp_path / "bad.jsonl"), *model], ExitStatus.BAD_WORKLOAD
    if case == "no-workload":
        return ["--workload", str(tmp_path / "none.jsonl"), *model], ExitStatus.BAD_WORKLOAD
    if case == "model-missing":
        return ["--workload", wl, "--model", str(tmp_path / "nope")], ExitStatus.BAD_MODEL
    if case == "tokenizer-missing":
        d = tmp_path / "notok"
        d.mkdir()
        (d / "model.onnx").write_bytes((tiny / "model.onnx").read_bytes())
        return ["--workload", wl, "--model", str(d)], ExitStatus.BAD_MODEL
    if case == "corrupt-onnx":
        d = write_model_dir(tmp_path / "corrupt", build_bert_cross_encoder(tiny_weights(TINY_CONFIG),
                                                                           TINY_CONFIG)[0], TINY_CONFIG)
        (d / "model.onnx").write_bytes(b"\x08\x07garbage" * 100)
        return ["--workload", wl, "--model", str(d)], ExitStatus.BAD_MODEL
    if case == "not-a-cross-encoder":
        return ["--workload", wl, "--model", str(_bad_io_model(tmp_path))], ExitStatus.BAD_MODEL
    if case == "vocab-mismatch":
        cfg = dict(TINY_CONFIG, vocab_size=500)
        d = write_model_dir(tmp_path / "v", build_bert_cross_encoder(tiny_weights(cfg), cfg)[0], cfg)
        return ["--workload", wl, "--model", str(d)], ExitStatus.BAD_MODEL
    if case == "bad-name":
        return ["--workload", wl, *model, "--name", "../escape"], ExitStatus.BAD_OPTIONS
    if case == "trials-0":
        return ["--workload", wl, *model, "--trials", "0"], ExitStatus.BAD_OPTIONS
    if case == "repeats-0":
        return ["--workload", wl, *model, "--repeats", "0"], ExitStatus.BAD_OPTIONS
    if case == "empty-batch-list":
        return ["--workload", wl, *model, "--batch-sizes", ","], ExitStatus.BAD_OPTIONS
    if case == "bad-precision":
        return ["--workload", wl, *model, "--precisions", "fp16"], ExitStatus.BAD_OPTIONS
    if case == "tolerance-out-of-range":
        return ["--workload", wl, *model, "--fp32-min-topk", "2"], ExitStatus.BAD_OPTIONS
    if case == "unknown-flag":
        return ["--workload", wl, "--frobnicate"], ExitStatus.BAD_OPTIONS
    if case in ("env-unwritable", "profile-dir-unwritable"):
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        flag = "--env-file" if case == "env-unwritable" else "--profile-dir"
        return ["--workload", wl, *model, flag, str(blocker / "sub")], ExitStatus.IO_ERROR
    raise AssertionError(case)


WORKLOAD_BYTES = {
    "missing-query": b'{"documents": ["a"]}\n',
    "empty-query": b'{"query": "", "documents": ["a"]}\n',
    "empty-documents": b'{"query": "q", "documents": []}\n',
    "missing-documents": b'{"query": "q"}\n',
    "non-string-document": b'{"query": "q", "documents": [{"text": 5}]}\n',
    "empty-file": b"",
    "not-utf8": b'{"query": "caf\xe9", "documents": ["a"]}\n',
    "nul-byte": b'{"query": "q", "documents": ["a\x00"]}\n',
}
CASES = [*WORKLOAD_BYTES, "malformed", "no-workload", "model-missing", "tokenizer-missing", "corrupt-onnx",
         "not-a-cross-encoder", "vocab-mismatch", "bad-name", "trials-0", "repeats-0", "empty-batch-list",
         "bad-precision", "tolerance-out-of-range", "unknown-flag", "env-unwritable", "profile-dir-unwritable"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_one_line_distinct_status_no_files(tmp_path, tiny_model_dir, case, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args, expected = _case(tmp_path, tiny_model_dir, case)
    status, _out, err = run_cli(["run", *FAST, *args])
    assert status == expected, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("autotune: error:"), err
    assert "Traceback" not in err
    assert list(work.iterdir()) == []  # no .env, no profiles/, no compose file


def test_malformed_workload_names_the_line(tmp_path, tiny_model_dir):
    (tmp_path / "bad.jsonl").write_text('{"query": "q", "documents": ["a"]}\n{"query": "q", "documents": [1]}\n')
    status, _, err = run_cli(["run", "--workload", str(tmp_path / "bad.jsonl")])
    assert status == 2 and "line 2: document 0 is not a string" in err


def test_sqlite_storage_url_and_timeout(tmp_path, tiny_model_dir, workload_file):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    args = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), *outputs(tmp_path), *FAST,
            "--storage", url, "--timeout", "60"]
    assert run_cli(args)[0] == ExitStatus.OK
    assert (tmp_path / "studies.db").exists()
    status, out, _ = run_cli(args)
    assert status == ExitStatus.OK and "(5 resumed" in out, out


def test_max_tokens_is_written_recorded_and_used_for_the_reference(tmp_path, tiny_model_dir, workload_file):
    (tmp_path / "out").mkdir()
    status, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), *FAST, "--max-tokens", "64"])
    assert status == ExitStatus.OK, err
    assert "HINDSIGHT_API_RERANKER_ONNX_MAX_TOKENS=64" in (tmp_path / "out" / ".env").read_text()
    profile = yaml.safe_load(next((tmp_path / "out" / "profiles").glob("*.yaml")).read_text())
    assert profile["model"]["max_tokens"] == 64 and "64 tokens" in err


@pytest.mark.parametrize(("extra", "status", "message"), [
    (["--max-tokens", "1000"], ExitStatus.BAD_OPTIONS, "between 1 and the model's 128 positions"),
    (["--max-tokens", "64", "--target", "tei"], ExitStatus.BAD_OPTIONS, "applies to --target onnx"),
    (["--max-memory", "nan"], ExitStatus.BAD_OPTIONS, "finite"),
    (["--trials", "0"], ExitStatus.BAD_OPTIONS, "at least 1"),
    (["--refine-rounds", "-1"], ExitStatus.BAD_OPTIONS, "--refine-rounds"),
])
def test_search_options_are_checked_before_anything_runs(tmp_path, tiny_model_dir, workload_file, extra, status,
                                                         message):
    (tmp_path / "out").mkdir()
    got, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                             *outputs(tmp_path), *extra])
    assert got == status and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / ".env").exists()


def test_a_budget_too_small_for_anything_is_one_line(tmp_path, tiny_model_dir, workload_file):
    (tmp_path / "out").mkdir()
    status, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), *FAST, "--max-memory", "1"])
    assert status != ExitStatus.OK and "--max-memory" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / ".env").exists()


def test_timeout_bounds_the_search_not_just_one_phase(tmp_path, tiny_model_dir, workload_file):
    (tmp_path / "out").mkdir()
    status, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                *outputs(tmp_path), "--trials", "100000", "--repeats", "1", "--timeout", "45"])
    assert status == ExitStatus.OK, err
    profile = yaml.safe_load(next((tmp_path / "out" / "profiles").glob("*.yaml")).read_text())
    assert profile["search"]["trials"] < 100000 and "plan: to fit the --timeout, the search runs" in err
    refinement = profile["search"]["refinement"]
    assert refinement is None or refinement["stopped"] in ("time budget", "local optimum")


def test_a_model_out_with_a_newline_is_refused_before_measuring(tmp_path, tiny_model_dir, workload_file):
    """Issue 46, item 13: it was refused only after the whole search."""
    status, _out, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                                "--model-out", str(tmp_path / "m\nx"), "--env-file", str(tmp_path / ".env")])
    assert status == ExitStatus.BAD_OPTIONS and "--model-out" in err and "line break" in err, err
    assert "searching" not in err and not (tmp_path / ".env").exists()


def test_a_container_path_of_slash_is_refused_before_measuring_for_what_it_is(tmp_path, tiny_model_dir,
                                                                               workload_file):
    status, _, err = run_cli(["run", "--workload", str(workload_file), "--model", str(tiny_model_dir),
                              "--model-path-in-container", "/", "--env-file", str(tmp_path / ".env")])
    assert status == ExitStatus.BAD_OPTIONS and "absolute directory below /" in err and "searching" not in err, err


def test_max_tokens_below_the_shortest_cut_is_refused_and_the_cut_is_part_of_the_studys_identity(
        tmp_path, tiny_model_dir, workload_file):
    """Issue 46, item 7: `--max-tokens 2` truncated nothing and exited 0; trials timed at 512 tokens were resumed
    for a run at another cut."""
    base = ["run", "--workload", str(workload_file), "--model", str(tiny_model_dir), "--no-compose",
            "--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"]
    status, _, err = run_cli([*base, "--max-tokens", "2", "--env-file", str(tmp_path / "a.env")])
    assert status == ExitStatus.BAD_OPTIONS and "shortest cut" in err and not (tmp_path / "a.env").exists(), err
    studies = []
    for n, cut in enumerate(("64", "32")):
        status, _, err = run_cli([*base, "--max-tokens", cut, "--env-file", str(tmp_path / f"{n}.env"),
                                  "--profile-dir", str(tmp_path / f"p{n}")])
        assert status == ExitStatus.OK, err
        studies.append(next(line for line in err.splitlines() if "(study " in line).split("(study ")[1])
    assert studies[0] != studies[1]


def test_a_lowered_top_k_floor_lowers_the_mean_floor_with_it():
    """`--int8-min-topk 0.5` left the mean's floor at 0.95: the flag loosened nothing a user could see."""
    import argparse

    from autotune.commands.run import RunCommand, tolerances_from
    from autotune.gates.parity import INT8_TOLERANCE

    parser = argparse.ArgumentParser()
    RunCommand().add_arguments(parser)
    lowered = tolerances_from(parser.parse_args(["--workload", "w", "--int8-min-topk", "0.5"]))["int8_tolerance"]
    assert lowered.min_topk == 0.5 and lowered.min_topk_mean == 0.5  # type: ignore[attr-defined]
    raised = tolerances_from(parser.parse_args(["--workload", "w", "--int8-min-topk", "0.99"]))["int8_tolerance"]
    assert raised.min_topk_mean == INT8_TOLERANCE.min_topk_mean  # type: ignore[attr-defined]


@pytest.mark.parametrize(("flag", "value"), [
    ("--repeats", "0"), ("--final-rounds", "0"), ("--trials", "0"), ("--refine-rounds", "-1"), ("--timeout", "0"),
    ("--timeout", "nan"), ("--max-memory", "0"), ("--max-memory", "nan"), ("--seed", "-1"), ("--seed", "4294967296"),
])
def test_each_bound_names_its_flag(flag, value, tmp_path):
    """The search's settings name their fields; `run` names the flag that set one, in one line, exit 4."""
    status, _, err = run_cli(["run", "--workload", str(write_workload(tmp_path / "q.jsonl")), flag, value])
    assert status == ExitStatus.BAD_OPTIONS and err.startswith("autotune: error: ") and flag in err, err
    assert len(err.strip().splitlines()) == 1
