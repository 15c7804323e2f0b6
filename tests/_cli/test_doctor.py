import importlib.util
import subprocess
import sys

import pytest

from dataloader._cli import doctor


def test_doctor_reports_the_machine_and_exits_zero_here():
    result = subprocess.run([sys.executable, "-m", "dataloader", "doctor"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for field in ("CPU cores", "memory", "cgroup", "/dev/shm", "shared memory", "start method", "worker threads", "versions", "recommended: num_workers="):
        assert field in result.stdout
    assert "OK: this machine can run parallel loading." in result.stdout


def test_doctor_fails_when_a_batch_cannot_fit(capsys):
    class Args:
        batch_bytes = 1 << 50  # a petabyte: no machine has room for that

    assert doctor.run(Args()) == 1
    out = capsys.readouterr().out
    assert "PROBLEM:" in out and "NOT OK" in out


@pytest.mark.parametrize("installed", [True, False])
def test_doctor_says_whether_workers_can_cap_blas(installed, monkeypatch, capsys):
    find_spec = importlib.util.find_spec

    def find_unless_hidden(name, *args):
        return None if name == "threadpoolctl" and not installed else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_unless_hidden)

    class Args:
        batch_bytes = 1 << 20

    doctor.run(Args())
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("worker threads"))
    if installed:
        assert "BLAS and OpenMP capped at 1 thread per worker" in line
    else:
        assert "BLAS and OpenMP not" in line and "pip install threadpoolctl" in line
