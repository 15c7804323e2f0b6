"""``python -m dataloader tune MODULE:FACTORY``: a short run on a factory in the current
directory (needs ``num_workers="auto"`` for its auto row), and the one-line errors (exit code 2)
of a spec it cannot use. No speed is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dataloader.__main__ import main
from dataloader._cli import tune

ROOT = Path(__file__).resolve().parents[2]

FACTORIES = '''
import numpy as np
from dataloader import Dataset


class Vectors(Dataset):
    def __len__(self):
        return 20_000

    def __getitem__(self, index):
        return np.full(8, index, np.float32), index


def make():
    return Vectors()


def pair():
    return Vectors(), lambda sample: sample


def options():
    return {"dataset": Vectors(), "batch_size": 16, "num_workers": 5}


def number():
    return 3


def no_dataset():
    return {"batch_size": 4}


def unknown_option():
    return {"dataset": Vectors(), "nope": 1}


not_a_function = 5


def raises():
    raise RuntimeError("the data is not there")


class NoLength(Vectors):
    def __len__(self):
        raise RuntimeError("cannot count the rows")


def no_length():
    return NoLength()
'''


def _write(directory: Path, name: str) -> None:
    (directory / f"{name}.py").write_text(FACTORIES)


def _tune(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dataloader", "tune", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def test_tune_times_each_setting_and_auto(tmp_path):
    _write(tmp_path, "mod")
    out = tmp_path / "tune.json"
    done = _tune(tmp_path, "mod:make", "--seconds", "0.3", "--workers", "0,1", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines if line.startswith("num_workers=")}
    assert list(rows) == ["num_workers=0", "num_workers=1", "num_workers=auto"]
    assert sum("<- best fixed" in line for line in rows.values()) == 1
    auto = rows["num_workers=auto"]
    assert "<- auto" in auto and "num_workers=" in auto.split("<- auto", 1)[1]  # what it chose
    runs = json.loads(out.read_text())["runs"]
    assert [r["num_workers"] for r in runs] == [0, 1, "auto"]
    assert all(r["error"] is None and r["samples_per_s"] > 0 and r["peak_pss_mib"] > 0 for r in runs)
    assert isinstance(runs[-1]["chosen_workers"], int) and isinstance(runs[-1]["tuning"], list)


def test_a_missing_factory_is_one_line_and_exit_code_2(tmp_path):
    _write(tmp_path, "mod")
    done = _tune(tmp_path, "mod:missing", "--seconds", "0.1")
    assert done.returncode == 2
    assert done.stderr.strip() == "python -m dataloader tune: error: module 'mod' has no attribute 'missing'"
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("spec,message", [
    ("no_colon", "expected MODULE:FACTORY (such as mydata:make); got 'no_colon'"),
    ("tune_absent_module:make", "no module named 'tune_absent_module'"),
    ("tune_factories:not_a_function", "is not callable (it is of type int)"),
    ("tune_factories:number", "returned int; expected a dataset"),
    ("tune_factories:no_dataset", "returned a dict without 'dataset'"),
    ("tune_factories:unknown_option", "DataLoader refused what tune_factories:unknown_option() returned"),
    ("tune_factories:raises", "tune_factories:raises() raised RuntimeError: the data is not there ("),
    ("tune_factories:raises", "tune_factories.py, line "),
    ("tune_factories:raises", "); fix it, or run python -c 'import tune_factories; tune_factories.raises()' to see "
                              "the whole traceback"),
    ("tune_factories:no_length", "building a DataLoader of what tune_factories:no_length() returned raised "
                                 "RuntimeError: cannot count the rows ("),
    ("tune_broken_import:make", "importing 'tune_broken_import' raised ModuleNotFoundError: No module named "
                                "'tune_absent_dependency' ("),
    ("tune_bad_syntax:make", "importing 'tune_bad_syntax' raised SyntaxError: "),
])
def test_a_bad_spec_is_one_line_and_exit_code_2(spec, message, tmp_path, monkeypatch, capsys):
    _write(tmp_path, "tune_factories")
    (tmp_path / "tune_broken_import.py").write_text("import tune_absent_dependency\n")
    (tmp_path / "tune_bad_syntax.py").write_text("def make(:\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    for module in ("tune_factories", "tune_broken_import", "tune_bad_syntax"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert main(["tune", spec, "--seconds", "0.1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("python -m dataloader tune: error: ")


def test_what_a_factory_returns_becomes_loader_options(tmp_path, monkeypatch):
    _write(tmp_path, "tune_returns")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "tune_returns", raising=False)
    made = {name: tune.load_factory(f"tune_returns:{name}")() for name in ("make", "pair", "options")}
    plain = tune.loader_options(made["make"], "m", 32)
    assert set(plain) == {"dataset", "batch_size"} and plain["batch_size"] == 32
    assert set(tune.loader_options(made["pair"], "m", 8)) == {"dataset", "transform", "batch_size"}
    given = tune.loader_options(made["options"], "m", 32)
    assert given["batch_size"] == 16 and "num_workers" not in given  # each setting sets its own


def test_default_workers_go_to_twice_the_cpus_and_at_most_8_values():
    assert tune.default_workers(1) == [0, 1, 2]
    assert tune.default_workers(2) == [0, 1, 2, 3, 4]
    assert tune.default_workers(16) == list(range(8))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (every write to it: ENOSPC)")
def test_a_json_file_that_cannot_be_written_after_the_run_is_one_line(tmp_path, monkeypatch, capsys):
    """--json is tried before the run, but the disk can fill during it: the write at the end used
    to end the command with a raw OSError traceback (bench shares the writer)."""
    _write(tmp_path, "tune_full_disk")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "tune_full_disk", raising=False)
    assert main(["tune", "tune_full_disk:make", "--seconds", "0.05", "--workers", "0", "--json", "/dev/full"]) == 1
    captured = capsys.readouterr()
    assert "num_workers=0" in captured.out  # the table was printed
    assert captured.err == ("python -m dataloader tune: error: cannot write --json '/dev/full' (ENOSPC: No space "
                            "left on device); the table above has the results. Free room there or name another "
                            "file.\n")
