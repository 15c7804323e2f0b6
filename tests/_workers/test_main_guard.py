"""A script without the ``if __name__ == "__main__":`` guard, run with spawn workers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests._workers._scripts import REPO_ROOT

BODY = """
    import numpy as np
    from dataloader import ArrayDataset, DataLoader, SequentialSampler

    {guard}
    data = ArrayDataset(np.arange(16))
    loader = DataLoader(data, SequentialSampler(data, batch_size=4), num_workers=2{context})
    print("sum", sum(int(batch[0].sum()) for batch in loader))
"""


def _run(tmp_path, method: str | None, guarded: bool) -> subprocess.CompletedProcess:
    """Run the script; ``method`` None leaves the start method to Python's default."""
    # Processes: on a free-threaded Python workers default to threads, which import nothing.
    context = ", worker_type='process'" if method is None else f", multiprocessing_context={method!r}"
    body = textwrap.dedent(BODY).format(guard='if __name__ == "__main__":' if guarded else "", context=context)
    if guarded:
        head, _, rest = body.partition('if __name__ == "__main__":\n')
        body = head + 'if __name__ == "__main__":\n' + textwrap.indent(rest, "    ")
    script = tmp_path / "train.py"
    script.write_text(body)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_an_unguarded_script_is_told_to_add_the_guard(tmp_path, method):
    result = _run(tmp_path, method, guarded=False)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("dataloader.errors.WorkerDiedError: DataLoader worker "), result.stderr
    script = tmp_path / "train.py"
    if method == "forkserver" and sys.version_info >= (3, 14):  # the server dies, not the worker
        assert f"exited while importing the script '{script}', which has no" in last
    else:
        assert f"exited with code 1 while starting: the script '{script}' has no" in last
    assert f"Under the '{method}' start method" in last and 'multiprocessing_context="fork"' in last
    assert "It had not answered these batches" not in last  # it died before any sample
    # The worker that ran the script's loader says why too, instead of multiprocessing's riddle.
    assert "the script has no main guard" in result.stderr
    assert "bootstrapping phase" not in result.stderr


def test_the_same_script_with_the_guard_runs(tmp_path):
    result = _run(tmp_path, "spawn", guarded=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sum", str(sum(range(16)))]


@pytest.mark.skipif(sys.platform != "linux", reason="Python's default start method is fork only on Linux")
def test_the_default_start_method_is_pythons_own(tmp_path):
    """Python's default, deliberately: fork on Linux before 3.14, forkserver from 3.14 (which forks
    no process that runs threads). There an unguarded script is told to add the guard; before, it runs."""
    default = "forkserver" if sys.version_info >= (3, 14) else "fork"
    result = _run(tmp_path, None, guarded=False)
    if default == "fork":
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["sum", str(sum(range(16)))]
    else:
        assert result.returncode == 1
        last = result.stderr.strip().splitlines()[-1]
        assert "Under the 'forkserver' start method" in last and "has no `if __name__" in last, result.stderr
    assert _run(tmp_path, None, guarded=True).stdout.split() == ["sum", str(sum(range(16)))]
