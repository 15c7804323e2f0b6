"""A training run killed with SIGKILL resumes from its last checkpoint as if never stopped.

A training script (written to ``tmp_path``, run with ``sys.executable``) iterates a loader with
a random transform (``batch_rng()``) and two process workers over a few epochs, appends each
batch to a log, and every few batches replaces its checkpoint (the loader's ``state_dict()``
and the batch count) atomically. Under each start method, the test kills it with SIGKILL once
the log holds a number of batches drawn at random (with a fixed seed), then:

- within 2 s, none of the killed run's processes (its workers, and under spawn and forkserver
  multiprocessing's helpers) is still running, and none of our /dev/shm entries is left (batch
  memory is anonymous memfd where the kernel has it; the check covers the /dev/shm fallback);
- a restart from the checkpoint, with another worker count (0, 1 or 3), logs from the
  checkpoint on exactly the batches of an uninterrupted run, and the batches the killed run
  logged after its checkpoint are the same ones again (the lost work is redone identically).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests._workers._scripts import REPO_ROOT, descendants_of, wait_gone
from tests.harness import notice_within, our_shm_entries

EPOCHS = 3
EVERY = 4  # batches between checkpoints
RESUME_WORKERS = {"fork": 3, "spawn": 0, "forkserver": 1}  # each count once

SCRIPT = textwrap.dedent('''
    """Train over a loader, log each batch, checkpoint every EVERY batches; resume if asked."""
    import json
    import os
    import sys
    import time

    import numpy as np

    from dataloader import ArrayDataset, DataLoader, RandomSampler, batch_rng
    from dataloader.transform import Transform

    EPOCHS, EVERY = {epochs}, {every}


    class Noise(Transform):
        def apply(self, sample):
            return int(sample[0]) * 1000 + int(batch_rng().integers(0, 1000))


    def make_loader(num_workers, method):
        data = ArrayDataset(np.arange(90))
        return DataLoader(data, RandomSampler(data, batch_size=6, seed=11), transform=Noise(), seed=5,
                          num_workers=num_workers, multiprocessing_context=method, timeout=20)


    def append(fd, line):
        os.write(fd, (line + "\\n").encode())  # one write on an O_APPEND descriptor


    def main(log_path, checkpoint_path, num_workers, method, step_seconds):
        loader = make_loader(num_workers, method if num_workers else None)
        done = 0
        if os.path.exists(checkpoint_path):
            with open(checkpoint_path) as f:
                saved = json.load(f)
            loader.load_state_dict(saved["loader"])
            done = saved["batches"]
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        for epoch in range(loader.epoch, EPOCHS):
            for batch in loader:
                append(log, json.dumps([done, epoch, np.asarray(batch).ravel().tolist()]))
                done += 1
                if done % EVERY == 0:
                    with open(checkpoint_path + ".tmp", "w") as f:
                        json.dump({{"batches": done, "loader": loader.state_dict()}}, f)
                    os.replace(checkpoint_path + ".tmp", checkpoint_path)
                time.sleep(step_seconds)  # the training step
        os.close(log)


    if __name__ == "__main__":
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
''').format(epochs=EPOCHS, every=EVERY)


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def _start(script: Path, tmp_path: Path, num_workers: int, method: str, step: float) -> subprocess.Popen:
    """Run the training script in a session of its own, TMPDIR in ``tmp_path`` (a killed
    forkserver cannot remove its socket's directory)."""
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, str(script), str(tmp_path / "log"), str(tmp_path / "checkpoint.json"),
               str(num_workers), method, str(step)]
    return subprocess.Popen(command, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _log(path: Path) -> list:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("]")]


def _uninterrupted(script: Path) -> list:
    """The batches of a run never stopped, as the script logs them (made here, serially)."""
    spec = importlib.util.spec_from_file_location("_train_reference", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loader = module.make_loader(0, None)
    got = []
    for epoch in range(EPOCHS):
        for batch in loader:
            got.append([len(got), epoch, [int(value) for value in batch]])
    return got


def _kill_at(proc: subprocess.Popen, log: Path, lines: int) -> list[int]:
    """SIGKILL the script once its log holds ``lines`` batches; its descendants' pids, taken
    just before."""
    deadline = time.monotonic() + 60
    while len(_log(log)) < lines:
        assert proc.poll() is None, f"the script ended early: {proc.communicate()[1].decode()}"
        assert time.monotonic() < deadline, "the script logged too slowly"
        time.sleep(0.005)
    pids = descendants_of(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.communicate(timeout=10)
    return pids


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_killed_run_resumes_from_its_checkpoint_exactly_and_leaves_nothing(no_leaks, tmp_path, method):
    draw = random.Random(f"resume-crash-{method}")  # a fixed seed per start method
    script = _script(tmp_path)
    expected = _uninterrupted(script)
    assert len(expected) == EPOCHS * 15
    kill_after = draw.randint(EVERY + 1, len(expected) - 6)
    resume_workers = RESUME_WORKERS[method]
    shm_before = our_shm_entries()
    log = tmp_path / "log"

    proc = _start(script, tmp_path, 2, method, step=0.02)
    try:
        pids = _kill_at(proc, log, kill_after)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    killed_at = time.monotonic()
    assert len(pids) >= 2, f"expected the two workers among the script's descendants: {pids}"
    left = wait_gone(pids, notice_within(2.0))
    assert not left, f"still running {notice_within(2.0)} s after the run was killed: {left}"
    while our_shm_entries() - shm_before and time.monotonic() - killed_at < notice_within(2.0):
        time.sleep(0.02)
    assert our_shm_entries() - shm_before == set(), "the killed run left /dev/shm entries behind"

    killed = _log(log)
    assert len(killed) >= kill_after and len(killed) < len(expected), "the kill did not land mid-run"
    assert killed == expected[: len(killed)]
    checkpoint = json.loads((tmp_path / "checkpoint.json").read_text())
    resumed_from = checkpoint["batches"]
    assert resumed_from % EVERY == 0 and 0 < resumed_from <= len(killed)

    log.rename(tmp_path / "killed.log")
    again = _start(script, tmp_path, resume_workers, method, step=0)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err.decode()
    resumed = _log(log)
    assert resumed == expected[resumed_from:]
    assert killed[resumed_from:] == resumed[: len(killed) - resumed_from]  # the lost work, redone alike
    assert our_shm_entries() - shm_before == set()
