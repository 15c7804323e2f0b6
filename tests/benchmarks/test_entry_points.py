"""Every bench runs from a clone's root as ``python -m benchmarks.<name>`` (``--help`` here;
test_cli.py and the others run them end to end), ``python -m benchmarks`` lists them all, and
``benchmarks.resume``, a script of its own, measures ``state_dict()`` end to end."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchmarks

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_pytest_imports_the_benchmarks_from_this_clone():
    assert Path(benchmarks.__file__).resolve().parent == ROOT / "benchmarks"


@pytest.mark.parametrize("name,option", [
    ("compare", "--from-json"), ("floor", "--main-us"), ("gpu", "--step-ms"),
    pytest.param("vision", "--tune-malloc", marks=pytest.mark.skipif(
        importlib.util.find_spec("cv2") is None, reason="benchmarks.vision compares against OpenCV, not installed here")),
    ("columnar", "--rows"), ("raydata", "--cpus"), ("autotune", "--warmup"), ("resume", "--baseline-ref"),
    ("serial_cost", "--tree"), ("packing", "--buffers"), ("freethreading", "--python-ft"),
])
def test_each_bench_shows_its_options_under_its_module_name(name, option):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m benchmarks.{name} ")
    assert option in done.stdout and "--reps" in done.stdout


def test_the_package_lists_every_bench_it_holds():
    done = subprocess.run([sys.executable, "-m", "benchmarks"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=ENV)
    assert done.returncode == 0, done.stderr
    listed = [line.split()[2].removeprefix("benchmarks.") for line in done.stdout.splitlines()
              if line.strip().startswith("python -m benchmarks.")]
    assert listed == list(benchmarks.BENCHES)
    runnable = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in p.read_text()}
    assert runnable == set(benchmarks.BENCHES)


def test_the_resume_bench_measures_state_dict_cost_end_to_end(tmp_path):
    """Its state_dict() part runs here for real, on 8 process workers, and writes its rows."""
    out = tmp_path / "resume.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.resume", "--quick", "--parts", "cost", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=ENV,
    )
    assert done.returncode == 0, done.stderr
    assert "full reorder buffer" in done.stdout
    rows = json.loads(out.read_text())["cost"]
    assert [row["case"].split(",")[0] for row in rows] == ["in_order=True", "in_order=True", "in_order=False"]
    full = rows[0]
    assert full["held"] > 16 and full["calls"] > 0 and full["state_bytes"] < 4096  # a full buffer, a small state


def test_the_serial_cost_bench_measures_this_checkout_or_the_one_it_is_given(tmp_path):
    """A run on this checkout, and one with ``--tree`` a copy whose ``dataloader`` says it was loaded."""
    command = [sys.executable, "-m", "benchmarks.serial_cost", "--workloads", "scalars,record",
               "--reps", "1", "--batches", "5", "--seed", "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=ENV)
    assert done.returncode == 0, done.stderr
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["scalars", "record"]
    other = tmp_path / "tree" / "dataloader"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("raise ImportError('the other tree was loaded')\n")
    done = subprocess.run([*command, "--tree", str(tmp_path / "tree")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=ENV)
    assert done.returncode != 0 and "the other tree was loaded" in done.stderr
