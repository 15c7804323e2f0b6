"""`python -m dataloader bench` hands its options to the installed dataloader.bench."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_help_is_the_benchs_own(capsys):
    from dataloader.__main__ import main

    try:
        main(["bench", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    assert "--workloads" in capsys.readouterr().out


def test_bench_help_works_outside_the_repository(tmp_path):
    """No tools/ folder is needed: the bench is part of the package."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "dataloader", "bench", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "--workloads" in done.stdout and "--from-json" in done.stdout


def test_importing_dataloader_leaves_the_bench_alone():
    code = "import sys, dataloader, dataloader.__main__; print('dataloader.bench' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "False", done.stderr


def _bench_fails_if_it_measures(monkeypatch):
    """The bench's measuring, replaced by a failure: a test that gets there checked too late."""
    from dataloader.bench import cli

    def measure(*args, **kwargs):
        raise AssertionError("the bench started measuring")

    monkeypatch.setattr(cli, "measure_all", measure)
    return cli


def test_a_library_error_while_the_bench_sets_up_is_one_line(monkeypatch, capsys):
    from dataloader.__main__ import main
    from dataloader.bench import cli
    from dataloader.errors import ArgumentValueError

    def refuse(*args, **kwargs):
        raise ArgumentValueError("`num_workers` must be at most 64 on this machine; got 100.\nMore.")

    monkeypatch.setattr(cli, "measure_all", refuse)
    assert main(["bench", "--quick", "--workloads", "tiny", "--no-torch"]) == 2
    err = capsys.readouterr().err
    assert err == "python -m dataloader bench: error: `num_workers` must be at most 64 on this machine; got 100.\n"


@pytest.mark.parametrize("content,what", [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    ("{}", "is not a report of --json"),
    ("[1, 2]", "holds a JSON list"),
    ('{"machine": {}, "config": {}, "torch": false, "checks": {}, "memcpy_bytes_per_s": 1.0, '
     '"runs": [{"rate": 1}], "discarded_runs": [], "wall_s": 1.0}', "holds runs this bench cannot read"),
])
def test_from_json_that_is_no_report_is_one_line_naming_the_file(content, what, tmp_path, capsys):
    from dataloader.__main__ import main

    path = tmp_path / "earlier.json"
    if content is not None:
        path.write_text(content)
    assert main(["bench", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err  # notes may come first (a workload left out for lack of torch)
    error = err.splitlines()[-1]
    assert "Traceback" not in err and error.startswith("python -m dataloader bench: error: --from-json: ")
    assert repr(str(path)) in error and what in error


@pytest.mark.parametrize("option", ["--json", "--plot"])
def test_output_files_are_tried_before_measuring(option, tmp_path, monkeypatch, capsys):
    from dataloader.__main__ import main

    _bench_fails_if_it_measures(monkeypatch)
    where = tmp_path / "missing" / "out.file"
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--quick", "--workloads", "tiny", "--no-torch", option, str(where)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (f"python -m dataloader bench: error: argument {option}: cannot write {str(where)!r}: "
                   f"its directory {str(where.parent)!r} does not exist")
    with pytest.raises(SystemExit):
        main(["bench", "--quick", option, str(tmp_path)])
    assert "is a directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["bench", "autotune", "--json"], ["bench", "columnar", "--json"], ["bench", "ray", "--json"],
    ["tune", "mod:make", "--json"], ["doctor", "--scan", ".", "--error-log"],
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
