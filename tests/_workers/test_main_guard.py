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
    loader = DataLoader(data, SequentialSampler(data, batch_size=4), num_workers=2,
                        multiprocessing_context="{method}")
    print("sum", sum(int(batch[0].sum()) for batch in loader))
"""


def _run(tmp_path, method: str, guarded: bool) -> subprocess.CompletedProcess:
    body = textwrap.dedent(BODY).format(guard='if __name__ == "__main__":' if guarded else "", method=method)
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
    assert f"exited with code 1 while starting: the script '{tmp_path / 'train.py'}' has no" in last
    assert f"Under the '{method}' start method" in last and 'multiprocessing_context="fork"' in last
    assert "It had not answered these batches" not in last  # it died before any sample
    # The worker that ran the script's loader says why too, instead of multiprocessing's riddle.
    assert "the script has no main guard" in result.stderr
    assert "bootstrapping phase" not in result.stderr


def test_the_same_script_with_the_guard_runs(tmp_path):
    result = _run(tmp_path, "spawn", guarded=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["sum", str(sum(range(16)))]
