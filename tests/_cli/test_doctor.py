import subprocess
import sys

from dataloader._cli import doctor


def test_doctor_reports_the_machine_and_exits_zero_here():
    result = subprocess.run([sys.executable, "-m", "dataloader", "doctor"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for field in ("CPU cores", "memory", "cgroup", "/dev/shm", "shared memory", "start method", "versions", "recommended: num_workers="):
        assert field in result.stdout
    assert "OK: this machine can run parallel loading." in result.stdout


def test_doctor_fails_when_a_batch_cannot_fit(capsys):
    class Args:
        batch_bytes = 1 << 50  # a petabyte: no machine has room for that

    assert doctor.run(Args()) == 1
    out = capsys.readouterr().out
    assert "PROBLEM:" in out and "NOT OK" in out

