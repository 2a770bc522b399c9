"""`apply` and `check` on a node that has only the committed profile (issue 46, items 2-4 and 13): the `.env`
names the model `apply` verified here, `check` verifies every file that `.env` names, and a profile's values
are checked against each key's type before anything is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from autotune.errors import ExitStatus
from autotune.outputs.envfile import managed_values
from tests.support.cli import one_line, run_cli, run_in, snapshot

MODEL_KEY = "HINDSIGHT_API_RERANKER_ONNX_MODEL_PATH"
TOKENIZER_KEY = "HINDSIGHT_API_RERANKER_ONNX_TOKENIZER_NAME_OR_PATH"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, tiny_model_dir):  # type: ignore[no-untyped-def]
    """One `run --target onnx` in a checkout of its own; only its profile travels."""
    work = tmp_path_factory.mktemp("tuning-host")
    status, _out, err = run_in(work, ["run", "--workload", "queries.jsonl", "--model", str(tiny_model_dir),
                                      "--trials", "2", "--repeats", "1", "--final-rounds", "1", "--refine-rounds", "0",
                                      "--name", "node"], chdir=True)
    assert status == ExitStatus.OK, err
    return work / "profiles" / "node.yaml"


@pytest.fixture
def fresh_node(tuned, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A new node: the profile alone in profiles/, and the tuning checkout's models/ out of reach."""
    (tmp_path / "profiles").mkdir()
    shutil.copy(tuned, tmp_path / "profiles" / "node.yaml")
    monkeypatch.chdir(tmp_path)
    hidden = tuned.parent.parent / "models"
    hidden.rename(tuned.parent.parent / "models.away")
    yield tmp_path
    (tuned.parent.parent / "models.away").rename(hidden)


def apply(*extra: str) -> tuple[int, str, str]:
    return run_cli(["apply", "--profile", "profiles/node.yaml", "--env-file", ".env", *extra])


def check() -> tuple[int, str, str]:
    return run_cli(["check", "--profile", "profiles/node.yaml", "--env-file", ".env"])


def test_apply_on_a_fresh_node_names_the_model_it_rebuilt_there(fresh_node):
    status, out, err = apply()
    assert status == ExitStatus.OK, err
    env = managed_values(fresh_node / ".env")
    model = Path(env[MODEL_KEY])
    assert model == (fresh_node / "models" / "node" / "model.onnx").resolve() and model.is_file(), out
    assert Path(env[TOKENIZER_KEY]) == model.parent
    assert "rebuilt" in out
    assert check()[0] == ExitStatus.OK


@pytest.mark.parametrize("damage", ["corrupt model", "delete model", "one byte of tokenizer.json", "vocab swap"])
def test_a_damaged_model_directory_is_drift_for_check_and_rebuilt_by_apply(fresh_node, damage):
    assert apply()[0] == ExitStatus.OK
    directory = fresh_node / "models" / "node"
    if damage == "corrupt model":
        (directory / "model.onnx").write_bytes(b"not a model")
    elif damage == "delete model":
        (directory / "model.onnx").unlink()
    elif damage == "one byte of tokenizer.json":
        data = bytearray((directory / "tokenizer.json").read_bytes())
        data[-2] = ord(" ") if data[-2] != ord(" ") else ord("\t")
        (directory / "tokenizer.json").write_bytes(bytes(data))
    else:
        tok = json.loads((directory / "tokenizer.json").read_text())
        vocab = tok["model"]["vocab"]
        a, b = list(vocab)[5], list(vocab)[6]
        vocab[a], vocab[b] = vocab[b], vocab[a]
        (directory / "tokenizer.json").write_text(json.dumps(tok))
    status, out, _ = check()
    assert status == ExitStatus.DRIFT and "the model Hindsight loads" in out, out
    status, out, err = apply()
    assert status == ExitStatus.OK and "was damaged" in out, err + out
    assert check()[0] == ExitStatus.OK


def test_check_verifies_the_files_the_env_names(fresh_node, tuned):
    """A `.env` that still names the tuning host's model, gone from here, is drift however sound models/ is."""
    assert apply()[0] == ExitStatus.OK
    recorded = yaml.safe_load(tuned.read_text())["env"][MODEL_KEY]
    text = (fresh_node / ".env").read_text()
    (fresh_node / ".env").write_text(text.replace(managed_values(fresh_node / ".env")[MODEL_KEY], recorded))
    status, out, _ = check()
    assert status == ExitStatus.DRIFT and "is missing" in out, out


def _tampered(fresh_node: Path, edit) -> None:  # type: ignore[no-untyped-def]
    path = fresh_node / "profiles" / "node.yaml"
    profile = yaml.safe_load(path.read_text())
    edit(profile)
    path.write_text(yaml.safe_dump(profile))


@pytest.mark.parametrize(("key", "value", "says"), [
    ("HINDSIGHT_API_RERANKER_ONNX_BATCH_SIZE", "$(touch pwned)", "ONNX_BATCH_SIZE must be an integer"),
    ("HINDSIGHT_API_RERANKER_ONNX_THREADS", "`touch pwned`", "ONNX_THREADS must be an integer"),
    ("HINDSIGHT_API_RERANKER_ONNX_BATCH_SIZE", "-1", "ONNX_BATCH_SIZE must be an integer from 1"),
    ("HINDSIGHT_API_RERANKER_ONNX_CPU_MEM_ARENA", "yes", "must be true or false"),
    ("HINDSIGHT_API_RERANKER_PROVIDER", "tei", "must be one of onnx"),
    ("HINDSIGHT_API_RERANKER_MAX_CANDIDATES_MID", "1e3", "MAX_CANDIDATES_MID must be an integer"),
    ("HINDSIGHT_API_RERANKER_ONNX_TIMEOUT", "300", "a key its target never writes"),
])
def test_a_profile_value_of_the_wrong_type_is_refused_and_nothing_is_written(fresh_node, key, value, says):
    _tampered(fresh_node, lambda p: p["env"].__setitem__(key, value))
    (fresh_node / ".env").write_text("MINE=1\n")
    before = snapshot(fresh_node)
    status, _out, err = apply()
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and says in err, err
    assert snapshot(fresh_node) == before and not (fresh_node / "pwned").exists()


@pytest.mark.parametrize(("field", "value", "says"), [
    ("dir", "../../outside", "holds a '.' or '..' step"),
    ("dir", "models/x/..", "holds a '.' or '..' step"),
    ("path_in_container", "/models/r:rw", "must be an absolute directory below /"),
    ("path_in_container", "/", "must be an absolute directory below /"),
])
def test_a_tampered_model_location_is_refused(fresh_node, field, value, says):
    _tampered(fresh_node, lambda p: p["model"].__setitem__(field, value))
    before = snapshot(fresh_node)
    status, _, err = apply("--compose-file", "compose.autotune.yaml")
    assert status == ExitStatus.BAD_OPTIONS and one_line(err) and says in err, err
    assert snapshot(fresh_node) == before and not (fresh_node.parent / "outside").exists()


def test_an_absolute_dir_from_the_tuning_host_is_not_where_this_node_builds(fresh_node, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "models" / "node"
    _tampered(fresh_node, lambda p: p["model"].__setitem__("dir", str(elsewhere)))
    status, _out, err = apply()
    assert status == ExitStatus.OK, err
    assert not elsewhere.exists() and (fresh_node / "models" / "node" / "model.onnx").is_file()


@pytest.mark.parametrize("recorded", [True, False])
def test_a_symlinked_models_directory_is_used_whether_or_not_the_profile_records_dir(fresh_node, tmp_path_factory,
                                                                                      recorded):
    """Issue 50, item 13: one rule for `models/` as a link the user made (to another disk, say)."""
    disk = tmp_path_factory.mktemp("disk")
    (fresh_node / "models").symlink_to(disk, target_is_directory=True)
    _tampered(fresh_node, lambda p: p["model"].__setitem__("dir", "models/node" if recorded else None))
    status, _out, err = apply()
    assert status == ExitStatus.OK, err
    assert (disk / "node" / "model.onnx").is_file()
