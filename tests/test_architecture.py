"""The floor plan holds (issue 34): import-linter's contracts from pyproject.toml, and a light `import autotune`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "onnx", "onnxruntime", "optuna", "tokenizers", "torch")


def test_the_import_contracts_are_kept():
    """Layers run one way (no import of a higher layer), no two modules of one package import each other in a
    circle (the layers contract cannot see inside a layer), and autotune never imports tests."""
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.fail("import-linter is not installed: pip install -e '.[test]'")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout and "No circle between the modules of one package KEPT" in result.stdout
    assert "Benchmarks use the tests' support package, never a test module KEPT" in result.stdout
    assert "The search over its gates over its measuring KEPT" in result.stdout  # issue 53


def _loaded(code: str, what: str) -> str:
    probe = f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint({what})"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("code", ["import autotune", "from autotune.cli import main; main(['--help'])"])
def test_the_package_and_its_help_load_no_heavy_library(code):
    """`autotune --help` answers without numpy, onnx, onnxruntime or optuna (it took 0.8 s with them)."""
    assert _loaded(code, f"sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})") == "[]"


@pytest.mark.parametrize(("argv", "modules"), [([], []), (["probe", "--help"], ["autotune.commands.probe"]),
                                                (["run", "--help"], ["autotune.commands.run"])])
def test_the_command_registry_imports_only_the_command_run(argv, modules):
    """Issue 45: a name maps to its module and summary, as pip's registry does; `--help` imports no command
    module, and a command's own help imports its module alone."""
    code = f"from autotune.cli import main; main({[*argv, '--help']!r})"
    shown = ("sorted(m for m in sys.modules if m.startswith('autotune.commands.') and m not in "
             "('autotune.commands.argtypes', 'autotune.commands.progress', 'autotune.commands.inputs', "
             "'autotune.commands.base'))")
    assert _loaded(code, shown) == repr(modules)


def test_the_registry_summaries_are_what_help_shows():
    from autotune.cli import build_parser
    from autotune.commands import COMMANDS

    helps = {a.dest: a.help for a in build_parser()._subparsers._group_actions[0]._choices_actions}  # type: ignore
    assert helps == {name: info.summary for name, info in COMMANDS.items()}


def test_every_command_is_a_command_class_the_registry_names():
    """Issue 53: commands are classes with a small base (as pip's `Command`), not modules read by `getattr`;
    what sets one apart is a declared class attribute."""
    from autotune.commands import COMMANDS, load_command
    from autotune.commands.base import Command

    for name in COMMANDS:
        command = load_command(name)
        assert isinstance(command, Command) and type(command).__name__ == COMMANDS[name].class_name
    assert [n for n in COMMANDS if load_command(n).accepts_unknown] == ["serve"]
    assert [n for n in COMMANDS if load_command(n).owns_signals] == ["serve"]


@pytest.mark.parametrize("argv", [["run", "--workload", "/nonexistent.jsonl"], ["check", "--profile", "/nonexistent"],
                                  ["apply", "--profile-dir", "/nonexistent"]])
def test_a_refusal_before_any_model_loads_no_onnx(argv):
    """onnx's import took 0.7 s of every start (its ml_dtypes): a one-line refusal, and every test that runs
    one, paid it; it is imported where a graph is read."""
    code = f"from autotune.cli import main; main({argv!r})"
    assert _loaded(code, "sorted({m.split('.')[0] for m in sys.modules} & {'onnx', 'ml_dtypes'})") == "[]"
