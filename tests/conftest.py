"""Shared fixtures: a tiny BERT cross-encoder and a small one with external data, built on the fly, and
isolated dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.models import build_tiny, write_workload
from tests.support.setting import setup  # noqa: F401  # the search, gates and measure tests share it


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def external_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small XLM-R cross-encoder whose weights lie in `model.onnx_data`, as a large model's must (issue 52)."""
    from tests.support.large import build_xlmr

    return build_xlmr(tmp_path_factory.mktemp("external") / "model")


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own state dir and measuring lock (a benchmark measuring beside the suite must not
    refuse its runs); the model cache is shared per session (builds are slow)."""
    cache = tmp_path_factory.getbasetemp() / "shared-cache"
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(cache))
    monkeypatch.setenv("AUTOTUNE_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    monkeypatch.setenv("AUTOTUNE_LOCK_DIR", str(tmp_path_factory.mktemp("lock")))


@pytest.fixture()
def workload_file(tmp_path: Path) -> Path:
    return write_workload(tmp_path / "queries.jsonl")


# ---- with CI=1, a skipped test is a failure -------------------------------------------------------------------
# .ci/run installs everything the suite needs, so a skip there means a dependency silently went missing (a failed
# pgvector build once let CI go green with every real-Hindsight test skipped). Only these may skip in CI:
CI_ALLOWED_SKIPS: set[str] = set()  # none: every tool the suite needs is installed by .ci/run


_skipped: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped[report.nodeid] = reason.removeprefix("Skipped: ")


def disallowed_skips(skipped: dict[str, str], allowed: set[str]) -> dict[str, str]:
    """The skips CI must not accept: any test not on the allow-list (parametrized ones by their function)."""
    return {node: why for node, why in skipped.items() if node.split("[")[0] not in allowed}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if os.environ.get("CI", "").lower() not in ("1", "true") or session.config.option.collectonly:
        return
    bad = disallowed_skips(_skipped, CI_ALLOWED_SKIPS)
    if not bad:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.section("skips that CI=1 does not allow", sep="=", red=True, bold=True)
        for node, why in sorted(bad.items()):
            reporter.line(f"{node}: {why}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
