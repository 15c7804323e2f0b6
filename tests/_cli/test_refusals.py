"""Every command refuses bad options up front: one argparse-style line, exit code 2, no run.

Numbers must be finite (``--seconds nan`` used to pass a ``> 0`` test and hang), worker counts
have a ceiling, and every usage line names the command as it is typed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from dataloader import __version__
from dataloader.__main__ import main
from dataloader.memory import max_workers
from tests._cli.test_cli_doc import DOCUMENTED

ROOT = Path(__file__).resolve().parents[2]
# Every parser of the command line (the benchmarks' own: tests/benchmarks/test_refusals.py).
PARSERS: dict[str, Callable[[pytest.MonkeyPatch], argparse.ArgumentParser]] = dict(DOCUMENTED)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dataloader", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line ``python -m dataloader argv`` exits 2 with, before running anything."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def _reads(kind: Callable[[str], Any]) -> type | None:
    """``int`` or ``float`` where an option's type reads numbers (one, or a comma-separated
    list); None where it reads something else."""
    try:
        value = kind("1")
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return None
    values = value if isinstance(value, list) else [value]
    if values and all(isinstance(v, float) for v in values):
        return float
    return int if values and all(isinstance(v, int) for v in values) else None


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_no_numeric_option_takes_nan_or_infinity(name, monkeypatch, tmp_path):
    """The audit: a float option added later with ``type=float`` fails here."""
    monkeypatch.chdir(tmp_path)  # a path option tried on "1" writes nothing in the checkout
    parser = PARSERS[name](monkeypatch)
    typed = [a for a in parser._actions if a.option_strings and a.type is not None]
    numeric = [(a, _reads(a.type)) for a in typed if _reads(a.type) is not None]
    assert numeric
    for action, reads in numeric:
        assert action.type is not float, f"{name} {action.option_strings}: plain float lets nan through"
        for text in ("nan", "inf", "-inf", *(["-1", "1e308"] if reads is float else [])):
            with pytest.raises((argparse.ArgumentTypeError, ValueError)):
                action.type(text)


@pytest.mark.parametrize("argv", [
    ["bench", "--seconds"], ["tune", "mod:make", "--seconds"],
])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308", "3601"])
def test_float_options_refuse_non_finite_negative_and_endless_values(argv, value, capsys):
    """``1e308`` is finite and > 0, but a run timed that long never ends: the range is given."""
    line = refused([*argv, value], capsys)
    assert f"argument {argv[-1]}: expected a finite number > 0 and at most 3600; got {value!r}" in line


@pytest.mark.timeout(120)
def test_bench_seconds_nan_exits_at_once_instead_of_hanging():
    done = run_cli("bench", "--quick", "--workloads", "tiny", "--workers", "0", "--seconds", "nan")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "python -m dataloader bench: error: argument --seconds: expected a finite number > 0 and at most 3600; "
        "got 'nan'"
    )


@pytest.mark.parametrize("argv", [
    ["bench", "--workers", "0,100000"], ["demo", "--workers", "100000"], ["doctor", "--scan", ".", "--workers", "100000"],
    ["tune", "mod:make", "--workers", "0,100000"],
])
def test_absurd_worker_counts_are_refused_before_any_process_starts(argv, capsys):
    line = refused(argv, capsys)
    assert f"argument --workers: expected a number of workers from 0 to {max_workers()[0]}; got " in line


def test_the_ceiling_is_the_loaders():
    from dataloader import ArrayDataset, DataLoader
    from dataloader.argtypes import worker_count
    from dataloader.errors import ArgumentValueError

    most = max_workers()[0]
    data = ArrayDataset(np.arange(4))
    assert worker_count(str(most)) == most and DataLoader(data, num_workers=most) is not None  # built, not started
    with pytest.raises(ArgumentValueError):
        DataLoader(data, num_workers=most + 1)


@pytest.mark.parametrize("command", ["bench", "demo", "doctor", "convert", "tune"])
def test_usage_lines_name_the_command_as_typed(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([*command.split(), "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m dataloader {command} ")


def test_bench_usage_line_outside_pytest_too():
    done = run_cli("bench", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m dataloader bench ")


def test_version_prints_the_packages():
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dataloader {__version__}"
