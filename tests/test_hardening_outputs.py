"""Issue 36, data loss: no output flag deletes, overwrites or hides a file the user made, and an interrupt says
truthfully what it left written. Each case sets up files a user would have, runs the CLI, and compares them byte
for byte afterwards."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.envfile import BEGIN
from autotune.outputs.ownership import MODEL_MARKER
from tests.support.cli import run_cli, snapshot

FAST = ["--trials", "3", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0"]
USER_COMPOSE = "services:\n  db:\n    image: postgres:15\n  hindsight:\n    image: hindsight:1.1.0\n"






@dataclass
class Case:
    """Files a user has in `work` (the working directory), the flags given, the exit expected."""

    setup: Callable[[Path, Path], list[str]]  # (work, tiny model) -> extra flags
    status: ExitStatus
    says: str


def _user_models(work: Path, model: Path) -> list[str]:
    shutil.copytree(model, work / "mymodels" / "other")
    (work / "mymodels" / "inventory.txt").write_text("other: in use by prod\n")
    return ["--model-out", str(work / "mymodels")]


def _model_out_is_input(work: Path, model: Path) -> list[str]:
    mine = work / "mine"
    shutil.copytree(model, mine)
    (mine / "README.md").write_text("my notes\n")
    return ["--model", str(mine), "--model-out", str(mine)]


def _model_out_is_cwd(work: Path, model: Path) -> list[str]:
    (work / "profiles").mkdir()
    (work / "profiles" / "keep.yaml").write_text("mine: true\n")
    (work / "src.py").write_text("print('mine')\n")
    return ["--model-out", str(work)]


def _model_out_is_file(work: Path, model: Path) -> list[str]:
    (work / "model-file").write_text("not a directory\n")
    return ["--model-out", str(work / "model-file")]


def _model_out_is_link(work: Path, model: Path) -> list[str]:
    (work / "real").mkdir()
    (work / "real" / "keep.txt").write_text("mine\n")
    (work / "linked").symlink_to(work / "real")
    return ["--model-out", str(work / "linked")]


def _compose_is_the_base_file(work: Path, model: Path) -> list[str]:
    (work / "docker-compose.yaml").write_text(USER_COMPOSE)
    return ["--target", "tei", "--compose-file", str(work / "docker-compose.yaml")]


def _compose_base_name_new(work: Path, model: Path) -> list[str]:
    return ["--target", "tei", "--compose-file", str(work / "compose.yaml")]


def _compose_not_ours(work: Path, model: Path) -> list[str]:
    (work / "override.yaml").write_text(USER_COMPOSE)
    return ["--target", "tei", "--compose-file", str(work / "override.yaml")]


def _env_is_the_workload(work: Path, model: Path) -> list[str]:
    return ["--env-file", str(work / "queries.jsonl")]


def _profile_not_ours(work: Path, model: Path) -> list[str]:
    (work / "profiles").mkdir()
    (work / "profiles" / "node.yaml").write_text("my: own yaml\n")
    return ["--name", "node"]


def _compose_is_a_directory(work: Path, model: Path) -> list[str]:
    (work / "compose-dir").mkdir()
    return ["--target", "tei", "--compose-file", str(work / "compose-dir")]


DATA_LOSS = {
    "model-out-holds-user-models": Case(_user_models, ExitStatus.BAD_OPTIONS, "autotune did not write it"),
    "model-out-is-the-input-model": Case(_model_out_is_input, ExitStatus.BAD_OPTIONS, "is also --model"),
    "model-out-is-the-project": Case(_model_out_is_cwd, ExitStatus.BAD_OPTIONS, "would hold"),
    "model-out-is-a-file": Case(_model_out_is_file, ExitStatus.BAD_OPTIONS, "not a directory"),
    "model-out-is-a-symlink": Case(_model_out_is_link, ExitStatus.BAD_OPTIONS, "symbolic link"),
    "compose-is-the-users-base-file": Case(_compose_is_the_base_file, ExitStatus.BAD_OPTIONS, "base file"),
    "compose-named-like-a-base-file": Case(_compose_base_name_new, ExitStatus.BAD_OPTIONS, "base file"),
    "compose-exists-not-autotunes": Case(_compose_not_ours, ExitStatus.BAD_OPTIONS, "autotune did not write it"),
    "compose-is-a-directory": Case(_compose_is_a_directory, ExitStatus.BAD_OPTIONS, "not a regular file"),
    "env-file-is-the-workload": Case(_env_is_the_workload, ExitStatus.BAD_OPTIONS, "is also --workload"),
    "profile-exists-not-autotunes": Case(_profile_not_ours, ExitStatus.BAD_OPTIONS, "autotune did not write it"),
}


@pytest.mark.parametrize("case", sorted(DATA_LOSS))
def test_output_flags_never_touch_user_files(tmp_path, tiny_model_dir, monkeypatch, case):
    """Refused in one line before anything is measured; every file the user had is as it was, and nothing new."""
    from tests.conftest import write_workload

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    write_workload(work / "queries.jsonl")
    (work / ".env").write_text("HINDSIGHT_API_LLM_PROVIDER=none\n")
    flags = DATA_LOSS[case].setup(work, tiny_model_dir)
    defaults = {"--model": str(tiny_model_dir), "--env-file": ".env", "--profile-dir": "profiles"}
    for flag, value in defaults.items():
        if flag not in flags:
            flags += [flag, value]
    before = snapshot(work)
    status, _, err = run_cli(["run", "--workload", str(work / "queries.jsonl"), *flags, *FAST])
    assert status == DATA_LOSS[case].status, err
    assert DATA_LOSS[case].says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert snapshot(work) == before


def _outputs(work: Path, model: Path) -> list[str]:
    return ["run", "--workload", str(work / "queries.jsonl"), "--model", str(model), "--env-file", str(work / ".env"),
            "--profile-dir", str(work / "profiles"), "--name", "node", *FAST]


@pytest.fixture()
def work(tmp_path: Path) -> Path:
    from tests.conftest import write_workload

    work = tmp_path / "work"
    work.mkdir()
    write_workload(work / "queries.jsonl")
    return work


def test_a_rerun_replaces_the_model_directory_autotune_wrote(work, tiny_model_dir):
    status, _, err = run_cli(_outputs(work, tiny_model_dir))
    assert status == ExitStatus.OK, err
    model_dir = work / "models" / "node"
    marker = yaml.safe_load((model_dir / MODEL_MARKER).read_text())
    assert marker["generator"] == "autotune" and marker["profile"] == "node" and len(marker["model_sha256"]) == 64
    status, _, err = run_cli(_outputs(work, tiny_model_dir))
    assert status == ExitStatus.OK, err
    assert sorted(p.name for p in (work / "models").iterdir()) == ["node"]  # nothing set aside or staged is left


def test_symlinked_env_and_compose_are_written_through(work, tiny_model_dir):
    """The link stays a link; its target gets the new bytes, atomically, with the user's lines kept."""
    real = work / "config"
    real.mkdir()
    (real / "hindsight.env").write_text("# mine\nHINDSIGHT_API_LLM_PROVIDER=none\n")
    (work / ".env").symlink_to(real / "hindsight.env")
    (real / "compose.autotune.yaml").write_text("# Generated by autotune. earlier run\n")
    (work / "compose.autotune.yaml").symlink_to(real / "compose.autotune.yaml")
    status, _, err = run_cli([*_outputs(work, tiny_model_dir), "--target", "tei",
                              "--compose-file", str(work / "compose.autotune.yaml")])
    assert status == ExitStatus.OK, err
    assert (work / ".env").is_symlink() and (work / "compose.autotune.yaml").is_symlink()
    text = (real / "hindsight.env").read_text()
    assert text.startswith("# mine\nHINDSIGHT_API_LLM_PROVIDER=none\n") and BEGIN in text
    assert "reranker" in yaml.safe_load((real / "compose.autotune.yaml").read_text())["services"]
    assert sorted(p.name for p in real.iterdir()) == ["compose.autotune.yaml", "hindsight.env"]  # no temp left


def test_staging_left_by_a_killed_run_is_removed_by_the_next(work, tiny_model_dir):
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    leftover = work / "models" / f".node.stage-{dead}-abc123"
    leftover.mkdir(parents=True)
    (leftover / "model.onnx").write_bytes(b"\0" * 1024)  # half a model
    set_aside = work / "models" / f".node.old-{dead}-def456"
    set_aside.mkdir()
    status, _, err = run_cli(_outputs(work, tiny_model_dir))
    assert status == ExitStatus.OK, err
    assert sorted(p.name for p in (work / "models").iterdir()) == ["node"]


def test_an_interrupt_while_staging_the_model_leaves_nothing_beside_it(work, tiny_model_dir, monkeypatch):
    import autotune.outputs.model_dir as model_dir

    copies = []

    def copy_then_interrupt(src, dst, *a, **k):
        copies.append(dst)
        if len(copies) == 2:  # model.onnx is in place, the tokenizer files are not
            raise KeyboardInterrupt
        return shutil.copyfile(src, dst, *a, **k)

    monkeypatch.setattr(model_dir.shutil, "copyfile", copy_then_interrupt)
    (work / ".env").write_text("HINDSIGHT_API_LLM_PROVIDER=none\n")
    status, _, err = run_cli(_outputs(work, tiny_model_dir))
    assert status == ExitStatus.INTERRUPTED and "nothing was written" in err
    assert not (work / "models").exists() or not list((work / "models").iterdir())
    assert (work / ".env").read_text() == "HINDSIGHT_API_LLM_PROVIDER=none\n"


def test_an_interrupt_during_the_commit_says_what_was_written(work, tiny_model_dir, monkeypatch):
    """A signal held while the outputs land is raised after them: the message names them, not 'nothing'."""
    from autotune.fileio import StagedFiles

    commit = StagedFiles.commit

    def commit_with_a_signal(self):
        os.kill(os.getpid(), signal.SIGINT)  # held by deferred_interrupts until the files are in place
        commit(self)

    monkeypatch.setattr(StagedFiles, "commit", commit_with_a_signal)
    status, _, err = run_cli(_outputs(work, tiny_model_dir))
    assert status == ExitStatus.INTERRUPTED
    assert "nothing was written" not in err and "written and complete" in err
    assert str(work / "profiles" / "node.yaml") in err and str(work / "models" / "node") in err
    assert BEGIN in (work / ".env").read_text()


def test_an_absolute_model_out_stays_absolute_in_the_compose_file(work, tiny_model_dir, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere" / "model"
    other_cwd = tmp_path / "cwd"
    other_cwd.mkdir()
    monkeypatch.chdir(other_cwd)
    status, _, err = run_cli([*_outputs(work, tiny_model_dir), "--model-out", str(elsewhere),
                              "--model-path-in-container", "/models/r",
                              "--compose-file", str(work / "compose.autotune.yaml")])
    assert status == ExitStatus.OK, err
    service = yaml.safe_load((work / "compose.autotune.yaml").read_text())["services"]["hindsight"]
    assert service["volumes"] == [f"{elsewhere}:/models/r:ro"]
    assert service["env_file"] == [str(work / ".env")]


@pytest.mark.parametrize("command", ["compose", "apply"])
def test_other_commands_never_write_over_a_users_compose_file(work, tiny_model_dir, monkeypatch, command):
    monkeypatch.chdir(work)
    (work / "docker-compose.yaml").write_text(USER_COMPOSE)
    if command == "compose":
        args = ["compose", "--out", "docker-compose.yaml"]
    else:
        status, _, err = run_cli([*_outputs(work, tiny_model_dir), "--target", "tei", "--no-compose"])
        assert status == ExitStatus.OK, err
        args = ["apply", "--profile", str(work / "profiles" / "node.yaml"), "--env-file", str(work / ".env"),
                "--compose-file", "docker-compose.yaml"]
    before = snapshot(work)
    status, _, err = run_cli(args)
    assert status == ExitStatus.BAD_OPTIONS and "base file" in err, err
    assert snapshot(work) == before


# Issue 36, item 8: a profile is input. `apply` writes exactly the keys its target writes, one safe line each.
INJECTED = {
    "newline-in-key": {"EVIL\nLD_PRELOAD": "/tmp/x.so"},
    "path": {"PATH": "/tmp/evil"},
    "llm-api-key": {"HINDSIGHT_API_LLM_API_KEY": "sk-stolen"},
    "end-marker-in-key": {"# <<< autotune managed block <<<": "1"},
    "empty-value": {"HINDSIGHT_API_RERANKER_TEI_BATCH_SIZE": ""},
    "newline-in-value": {"HINDSIGHT_API_RERANKER_TEI_URL": "http://r:8080\nLD_PRELOAD=/tmp/x.so"},
    "marker-in-value": {"HINDSIGHT_API_RERANKER_TEI_URL": "# <<< autotune managed block <<<"},
}


@pytest.fixture(scope="module")
def tei_profile(tmp_path_factory, tiny_model_dir) -> Path:
    from tests.conftest import write_workload

    work = tmp_path_factory.mktemp("tei-profile")
    write_workload(work / "queries.jsonl")
    status, _, err = run_cli([*_outputs(work, tiny_model_dir), "--target", "tei", "--no-compose"])
    assert status == ExitStatus.OK, err
    return work / "profiles" / "node.yaml"


@pytest.mark.parametrize("case", sorted(INJECTED))
def test_apply_writes_only_the_keys_its_target_writes(tmp_path, tei_profile, case):
    profile = yaml.safe_load(tei_profile.read_text())
    profile["env"].update(INJECTED[case])
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text("# autotune profile\n" + yaml.safe_dump(profile))
    env = tmp_path / ".env"
    env.write_text("HINDSIGHT_API_LLM_PROVIDER=none\n")
    status, _, err = run_cli(["apply", "--profile", str(hostile), "--env-file", str(env), "--compose-file",
                              str(tmp_path / "compose.autotune.yaml")])
    assert status == ExitStatus.BAD_OPTIONS, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert env.read_text() == "HINDSIGHT_API_LLM_PROVIDER=none\n"
    assert not (tmp_path / "compose.autotune.yaml").exists()


@pytest.mark.parametrize("flag", ["--tei-url", "--model-path-in-container"])
def test_a_flag_value_with_a_newline_is_refused_before_the_search(work, tiny_model_dir, flag):
    value = "/models/r\nLD_PRELOAD=/tmp/x.so" if flag.startswith("--model") else "http://r:8080\nPATH=/tmp"
    before = snapshot(work)
    status, _, err = run_cli([*_outputs(work, tiny_model_dir), flag, value])
    assert status == ExitStatus.BAD_OPTIONS and "line break" in err, err
    assert snapshot(work) == before
