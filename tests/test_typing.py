"""``py.typed`` is honest: the public API passes ``mypy --strict`` ([tool.mypy] in pyproject.toml
lists what is checked: tests/typing/public_api.py, a file that uses the API as users write it,
and the public modules). .ci/run installs mypy and runs the same command."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "mypy", "--strict"]


def test_public_api_passes_mypy_strict():
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy); .ci/run runs this check")
    result = subprocess.run(COMMAND, cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_same_mypy_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "mypy --strict" in ci


def test_mypy_catches_a_misuse_of_the_api(tmp_path):
    # The check has teeth: the annotations say what the options take.
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy); .ci/run runs this check")
    misuse = tmp_path / "misuse.py"
    misuse.write_text(
        "import numpy as np\n"
        "from dataloader import ArrayDataset, DataLoader\n"
        "DataLoader(ArrayDataset(np.zeros(4)), num_workers='2')\n"
    )
    result = subprocess.run([*COMMAND, str(misuse)], cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert result.returncode == 1 and '"num_workers"' in result.stdout, result.stdout + result.stderr
