from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autotune.errors import OptionsError, OutputError
from autotune.outputs.envfile import BEGIN, END, managed_values, merge_env, parse_env, write_env

KEYS = {"HINDSIGHT_API_RERANKER_PROVIDER": "tei", "AUTOTUNE_BATCH_SIZE": "4", "AUTOTUNE_MODEL": "/models/my model"}


def test_merge_into_empty_and_rerun_replaces_block():
    first = merge_env("", KEYS).text
    assert first.startswith(BEGIN) and first.rstrip().endswith(END)
    again = merge_env(first, {**KEYS, "AUTOTUNE_BATCH_SIZE": "8"}).text
    assert again.count(BEGIN) == 1 and "AUTOTUNE_BATCH_SIZE=8" in again and "=4" not in again


def test_user_lines_survive_byte_for_byte():
    user = "# my settings\r\nexport HINDSIGHT_DB_PASSWORD='s3cret'\r\nFOO=\"bar baz\"\r\nFOO=dup\r\nLAST=1"
    merged = merge_env(user, KEYS).text
    assert merged.startswith(user + "\r\n")
    assert BEGIN + "\r\n" in merged  # CRLF file gets CRLF block
    block_removed = merged.split(BEGIN)[0]
    assert block_removed == user + "\r\n"


def test_key_already_set_by_user_is_not_duplicated():
    user = "export AUTOTUNE_BATCH_SIZE=16\n"
    result = merge_env(user, KEYS)
    assert result.user_keys_kept == ["AUTOTUNE_BATCH_SIZE"]
    assert result.text.count("AUTOTUNE_BATCH_SIZE") == 1


def test_values_are_quoted_when_needed_and_never_empty():
    text = merge_env("", KEYS).text
    assert "AUTOTUNE_MODEL='/models/my model'" in text
    assert parse_env(text)["AUTOTUNE_MODEL"] == "/models/my model"
    with pytest.raises(OptionsError, match="empty"):  # a one-line exit 4, not an internal error
        merge_env("", {"AUTOTUNE_BATCH_SIZE": ""})


def test_damaged_block_is_refused():
    with pytest.raises(OutputError, match="damaged"):
        merge_env(f"{BEGIN}\nA=1\n", KEYS)


def test_write_env_is_atomic_and_preserves_non_utf8_bytes(tmp_path):
    path = tmp_path / ".env"
    path.write_bytes(b"LEGACY=caf\xe9\n")
    write_env(path, KEYS)
    assert path.read_bytes().startswith(b"LEGACY=caf\xe9\n")
    assert managed_values(path)["AUTOTUNE_BATCH_SIZE"] == "4"
    assert [p.name for p in tmp_path.iterdir()] == [".env"]


line = st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=30).filter(
    lambda s: s.strip() not in (BEGIN, END))


@given(st.lists(line, max_size=8), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_merge_is_idempotent_and_keeps_outside_lines(lines, newline, trailing):
    original = newline.join(lines) + (newline if trailing and lines else "")
    once = merge_env(original, KEYS).text
    assert merge_env(once, KEYS).text == once
    before_block = once.split(BEGIN)[0]
    assert before_block.startswith(original)


@pytest.mark.parametrize("value", ["$(touch pwned)", "`touch pwned`", "${HOME}/x", "a\\b", 'say "hi" $(id)'])
def test_a_shell_sourcing_the_env_expands_nothing(tmp_path, value):
    """`set -a; . ./.env` must give back each value as written, and run nothing (issue 46, item 2)."""
    import subprocess

    env = tmp_path / ".env"
    write_env(env, {"AUTOTUNE_MODEL": value})
    got = subprocess.run(["sh", "-c", 'set -a; . ./.env; printf %s "$AUTOTUNE_MODEL"'], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    assert got == value
    assert not (tmp_path / "pwned").exists()
    assert parse_env(env.read_text())["AUTOTUNE_MODEL"] == value


def test_a_value_no_quoting_keeps_literal_is_refused():
    with pytest.raises(OptionsError, match="single quote"):
        merge_env("", {"AUTOTUNE_MODEL": "/models/it's"})


def test_a_url_with_a_password_is_never_written():
    with pytest.raises(OptionsError, match="password"):
        merge_env("", {"HINDSIGHT_API_RERANKER_TEI_URL": "http://alice:S3cret@reranker:8080"})


def test_hindsights_own_reader_takes_the_single_quoted_value(tmp_path):
    """python-dotenv, which Hindsight's config loads the .env with, reads the quoted path as written."""
    dotenv = pytest.importorskip("dotenv")
    env = tmp_path / ".env"
    write_env(env, {"AUTOTUNE_MODEL": "/models/my model $(x)"})
    assert dotenv.dotenv_values(env)["AUTOTUNE_MODEL"] == "/models/my model $(x)"
