import importlib.util
import os
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


class _Args:
    batch_bytes = 64 << 20


def _rows(out: str) -> dict[str, str]:
    """The report's rows, by name (the part before two spaces)."""
    return {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in out.splitlines() if "  " in line}


def _limits(monkeypatch, **limits):
    """resource.getrlimit with the given (soft, hard) for RLIMIT_NOFILE (``nofile``) and RLIMIT_AS
    (``address``), the real ones for the rest: independent of the machine's own limits."""
    import resource

    real = resource.getrlimit
    chosen = {resource.RLIMIT_NOFILE: limits.get("nofile"), resource.RLIMIT_AS: limits.get("address")}
    infinite = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    monkeypatch.setattr(resource, "getrlimit", lambda which: chosen.get(which) or (
        infinite if which in chosen else real(which)))


def test_without_proc_every_check_says_unknown_instead_of_a_traceback(monkeypatch, capsys):
    import builtins

    import psutil

    def refuse(path):
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if text.startswith(("/proc", "/sys")):
            raise FileNotFoundError(2, "No such file or directory", text)

    real_open, real_listdir = builtins.open, os.listdir
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: refuse(path) or real_open(path, *a, **k))
    monkeypatch.setattr(os, "listdir", lambda path=".": refuse(path) or real_listdir(path))
    monkeypatch.setattr(psutil, "PROCFS_PATH", "/nonexistent-proc")
    assert doctor.run(_Args()) in (0, 1)
    out = capsys.readouterr().out
    rows = _rows(out)
    assert "recommended: num_workers=" in out and "not capped by memory, which could not be read" in out
    assert rows["memory"].startswith("unknown (FileNotFoundError: ") and "meminfo" in rows["memory"]
    assert rows["CPU cores"].endswith("usable") and rows["worker start"] == "ok"  # the others still run


def test_a_low_open_files_limit_is_a_problem(monkeypatch, capsys):
    _limits(monkeypatch, nofile=(12, 12))
    assert doctor.run(_Args()) == 1
    out = capsys.readouterr().out
    assert _rows(out)["open files"].startswith("soft limit 12, hard 12 (ulimit -n)")
    problem = next(line for line in out.splitlines() if "open-files limit" in line)
    assert problem.startswith("PROBLEM: the open-files limit (ulimit -n) is 12") and "needs root" in problem


def test_a_limit_enough_for_the_workers_but_below_256_is_a_warning(monkeypatch, capsys):
    monkeypatch.setattr(doctor.memory, "available_cpus", lambda: 2)
    _limits(monkeypatch, nofile=(100, 4096))
    doctor.run(_Args())
    out = capsys.readouterr().out
    warning = next(line for line in out.splitlines() if "open-files limit" in line)
    assert warning.startswith("WARNING: the open-files limit (ulimit -n) is 100") and "ulimit -n 256" in warning
    _limits(monkeypatch, nofile=None)  # unlimited
    doctor.run(_Args())
    assert "open-files limit" not in capsys.readouterr().out


def test_ulimit_n_12_in_a_real_process_is_not_ok():
    import resource

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (12, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    result = subprocess.run([sys.executable, "-m", "dataloader", "doctor"], capture_output=True, text=True,
                            timeout=120, preexec_fn=low)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PROBLEM: the open-files limit (ulimit -n) is 12" in result.stdout


def test_the_budget_fits_the_address_space_ulimit_v_leaves(monkeypatch, capsys):
    from dataloader._cli import _limits as limits

    _limits(monkeypatch, address=(300_000 * 1024, 300_000 * 1024))  # ulimit -v 300000: 293 MiB
    monkeypatch.setattr(limits, "_mapped_now", lambda: 150 << 20)
    assert doctor.run(_Args()) == 1  # 3 x 4 batches of 64 MiB do not fit
    out = capsys.readouterr().out
    assert _rows(out)["address space"].startswith("limited to 293 MiB (ulimit -v 300000), 143 MiB of it left")
    budget = int(out.split("shm_budget=", 1)[1].split()[0])
    assert 0 < budget <= (300_000 * 1024 - (150 << 20)) // 2
    assert "PROBLEM: the address-space limit (ulimit -v) leaves 143 MiB" in out


def test_dev_shm_that_is_a_file_is_reported_as_such(monkeypatch, tmp_path, capsys):
    fake = tmp_path / "shm"
    fake.write_bytes(b"")
    monkeypatch.setattr(doctor, "_SHM", str(fake))
    assert doctor.run(_Args()) == 1
    out = capsys.readouterr().out
    assert _rows(out)["/dev/shm"] == "not a directory: shared memory cannot work"
    assert f"PROBLEM: {fake} is not a directory" in out
