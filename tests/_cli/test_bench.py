"""``python -m dataloader bench``: this loader timed on this machine, with its own synthetic data.

No speed is asserted (the machine is shared): what is checked is that a short run goes end to
end through the command line, a row per (workload, setting), numbers where they belong, and
that the advice line follows from the rows it is given.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataloader._cli import bench

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _cli(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    command = ["-c", code] if code else ["-m", "dataloader", *args]
    return subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=180,
                          env=ENV, cwd=ROOT.parent)


@pytest.mark.timeout(180)
def test_a_short_run_gives_a_row_per_setting_and_advice(tmp_path):
    out = tmp_path / "bench.json"
    done = _cli("bench", "--quick", "--seconds", "0.1", "--workloads", "tiny,images", "--workers", "0,1",
                "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("python -m dataloader bench: ") and "\nadvice: " in done.stdout
    runs = json.loads(out.read_text())["runs"]
    settings = ["plain loop", "num_workers=0", "num_workers=1", "num_workers=auto"]
    assert [(r["workload"], r["setting"]) for r in runs] == [(w, s) for w in ("tiny", "images") for s in settings]
    assert all(r["error"] is None and r["samples_per_s"] > 0 and r["peak_pss_mib"] > 0 for r in runs)
    assert all(isinstance(r["auto_chose"], int) == (r["num_workers"] == "auto") for r in runs)


def test_the_usage_line_names_the_command_as_typed():
    done = _cli("bench", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m dataloader bench ")
    assert "python -m dataloader tune" in done.stdout  # it points at the bench of your own data


@pytest.mark.parametrize("option,value", [("--workloads", "tiny,nope"), ("--workers", "x")])
def test_bad_options_are_refused_before_anything_runs(option, value, capsys):
    from dataloader.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", option, value])
    assert stop.value.code == 2
    assert f"argument {option}: " in capsys.readouterr().err


def test_without_pillow_decode_is_left_out_with_a_note():
    blocked = ("import sys; sys.modules['PIL'] = None; from dataloader.__main__ import main; "
               "sys.exit(main(['bench', '--workloads', 'decode']))")
    done = _cli(code=blocked)
    assert done.returncode == 2 and "--workloads" not in done.stderr
    assert "leaving decode out: it needs Pillow" in done.stderr and "no workload left" in done.stderr


def test_the_workloads_make_what_they_say():
    for name, shape in [("tiny", (8,)), ("images", (3, 224, 224)), ("decode", (160, 160, 3))]:
        make, _, _, small = bench.WORKLOADS[name]
        data = make(100)
        sample, label = data[99]
        assert len(data) == 100 and np.asarray(sample).shape == shape and 0 <= label < 1000


def _row(workload, setting, rate, workers="x"):
    workers = None if setting == bench.PLAIN else (workers if workers != "x" else setting.split("=")[1])
    return bench._row(workload, setting, workers, rate=rate, peak_pss=2**20)


def test_advice_recommends_auto_only_where_it_came_close_everywhere():
    close = [_row("tiny", bench.PLAIN, 100.0), _row("tiny", "num_workers=0", 80.0),
             _row("tiny", "num_workers=2", 200.0), _row("tiny", "num_workers=auto", 190.0)]
    assert bench.advice(close).startswith('advice: num_workers="auto" came within 10%')
    short = [*close, _row("images", bench.PLAIN, 10.0), _row("images", "num_workers=0", 30.0),
             _row("images", "num_workers=auto", 20.0)]
    line = bench.advice(short)
    assert "tiny: num_workers=2, images: num_workers=0" in line and "python -m dataloader tune" in line
    table = bench.format_table(short)
    assert "2.00" in table and "3.00" in table  # ratios against each workload's own plain loop


@pytest.mark.parametrize("argv", [
    ["bench", "--json"], ["tune", "mod:make", "--json"], ["doctor", "--scan", ".", "--error-log"],
])
def test_every_commands_output_file_is_tried_first(argv, tmp_path, capsys):
    from dataloader.__main__ import main

    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    with pytest.raises(SystemExit) as stop:
        main([*argv, str(blocked / "out.json")])
    assert stop.value.code == 2
    assert f"argument {argv[-1]}: cannot write" in capsys.readouterr().err


def test_a_writable_output_is_left_as_it_was(tmp_path):
    from dataloader.argtypes import unwritable

    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("kept")
    assert unwritable(str(new)) is None and not new.exists()  # tried, and removed again
    assert unwritable(str(old)) is None and old.read_text() == "kept"


@pytest.mark.timeout(30)
def test_a_relative_folder_is_judged_from_the_current_directory(tmp_path, monkeypatch):
    """``uncreatable`` walked up a relative path with dirname() to "", which never exists: a loop."""
    from dataloader.argtypes import uncreatable

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    assert uncreatable("new/inner") is None and not (tmp_path / "new").exists()  # tried, and removed again
    assert uncreatable("a-file/inner") == f"{str(tmp_path / 'a-file')!r} is not a directory"
