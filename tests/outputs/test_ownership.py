"""What a run may write over: only what autotune wrote, never what the same run reads, checked before the search."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autotune.errors import OptionsError
from autotune.outputs.ownership import (
    GENERATED,
    MODEL_MARKER,
    PROFILE_HEADER,
    check_compose_out,
    check_model_out,
    check_profile_out,
    marker_text,
    refuse_collisions,
    same_path,
    scratch_prefix,
    sweep_leftovers,
)


def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path):
    wl = tmp_path / "q.jsonl"
    wl.write_text("{}\n")
    (tmp_path / "link").symlink_to(wl)
    with pytest.raises(OptionsError, match=r"--env-file .* is also --workload"):
        refuse_collisions({"--workload": wl}, {"--env-file": tmp_path / "link"})
    with pytest.raises(OptionsError, match="name the same file"):
        refuse_collisions({}, {"--env-file": tmp_path / "a", "--compose-file": tmp_path / "x" / ".." / "a"})
    with pytest.raises(OptionsError, match=r"--model-out .* would hold --workload"):
        refuse_collisions({"--workload": wl}, {}, model_out=tmp_path)
    refuse_collisions({"--workload": wl}, {"--env-file": tmp_path / ".env"}, model_out=tmp_path / "models" / "m")


def test_same_path_sees_through_links_and_dots(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "l").symlink_to(tmp_path / "d")
    assert same_path(tmp_path / "l" / "f", tmp_path / "d" / "f")  # neither exists yet
    assert not same_path(tmp_path / "d" / "f", tmp_path / "d" / "g")


def test_a_model_directory_is_replaced_only_when_autotune_marked_it(tmp_path):
    check_model_out(tmp_path / "new")  # absent: fine
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / MODEL_MARKER).write_text(marker_text("p", "abc"))
    check_model_out(mine)
    users = tmp_path / "users"
    users.mkdir()
    with pytest.raises(OptionsError, match="autotune did not write it"):
        check_model_out(users)
    (users / MODEL_MARKER).write_text('{"generator": "someone else"}')
    with pytest.raises(OptionsError, match="autotune did not write it"):
        check_model_out(users)
    (tmp_path / "link").symlink_to(mine)
    with pytest.raises(OptionsError, match="symbolic link"):
        check_model_out(tmp_path / "link")
    (tmp_path / "file").write_text("x")
    with pytest.raises(OptionsError, match="not a directory"):
        check_model_out(tmp_path / "file")


def test_generated_files_are_recognised_by_their_header(tmp_path):
    (tmp_path / "ours.yaml").write_text(GENERATED + " on a day\n")
    check_compose_out(tmp_path / "ours.yaml")
    (tmp_path / "p.yaml").write_text(PROFILE_HEADER + "\n")
    check_profile_out(tmp_path / "p.yaml")
    (tmp_path / "theirs.yaml").write_text("services: {}\n")
    with pytest.raises(OptionsError, match="did not write it"):
        check_compose_out(tmp_path / "theirs.yaml")
    with pytest.raises(OptionsError, match="base file"):
        check_compose_out(tmp_path / "compose.yaml")  # never, even absent: compose reads it on its own


def test_only_dead_runs_leftovers_are_swept(tmp_path):
    destination = tmp_path / "model"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".model.stage-{dead.stdout.strip()}-x"
    left.mkdir()
    live = tmp_path / f".model.stage-{os.getppid()}-y"  # the test runner's parent: alive
    live.mkdir()
    assert scratch_prefix(destination, "stage") == f".model.stage-{os.getpid()}-"
    assert sweep_leftovers(destination) == [left]
    assert live.is_dir() and not left.exists()
