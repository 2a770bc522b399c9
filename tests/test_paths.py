"""Cache and state directories: the environment overrides the platform's defaults, an empty value does not."""

from __future__ import annotations

from autotune.paths import CACHE_ENV, STATE_ENV, cache_dir, state_dir


def test_the_environment_sets_each_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "s"))
    assert (cache_dir(), state_dir()) == (tmp_path / "c", tmp_path / "s")


def test_an_empty_value_means_the_platforms_directory(monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "")
    monkeypatch.setenv(STATE_ENV, "")
    assert cache_dir().name == "autotune" and state_dir().name == "autotune"
    assert cache_dir() != state_dir()


def test_cache_and_state_directories_are_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "new-cache"))
    assert cache_dir().stat().st_mode & 0o777 == 0o700


def test_a_directory_others_can_write_is_refused(tmp_path, monkeypatch):
    import pytest

    from autotune.errors import OutputError

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(STATE_ENV, str(shared))
    with pytest.raises(OutputError, match="others can write it"):
        state_dir()
