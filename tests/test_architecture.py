"""The floor plan holds (issue 34): import-linter's contracts from pyproject.toml, and a light `import autotune`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "onnx", "onnxruntime", "optuna", "tokenizers", "torch")


def test_the_import_contracts_are_kept():
    """Layers run one way (no cycle, no import of a higher layer) and autotune never imports tests."""
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.fail("import-linter is not installed: pip install -e '.[test]'")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("code", ["import autotune",
                                  "from autotune.cli import main; main(['--help'])",
                                  "from autotune.cli import main; main(['run', '--help'])"])
def test_the_package_and_its_help_load_no_heavy_library(code):
    """`autotune --help` answers without numpy, onnx, onnxruntime or optuna (it took 0.8 s with them)."""
    loaded = f"sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})"
    probe = f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\nprint({loaded})"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
