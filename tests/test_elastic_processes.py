"""A run that changes its number of ranks, in real processes: 4 ranks hand out a few batches and
save their states, 2 ranks resume from the 4 states, hand out some more and save, and 3 ranks
finish the epoch from the 2 states (the same global batch throughout); and 4 ranks, then 3 with
another global batch. Each rank is a process of its own with RANK and WORLD_SIZE
in its environment (tests/_elastic_rank.py); under torchrun the states are gathered with
``gather_states`` (one ``all_gather_object`` over gloo).

What the epoch must be, checked on the ids every rank handed out:
- every id once, in the order of the global permutation (rank r of W takes positions r, r + W, ...
  of what is left), plus the padding that gives every rank of the last world the same number of
  batches: wrap-around copies of what was left when it resumed, only in the epoch's last batches;
- with the same global batch (W * batch_size) in every world, the global batches (the union of
  every rank's k-th batch) are those of an uninterrupted run of 4 ranks, the last one except for
  its padding.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, RandomSampler

SCRIPT = Path(__file__).with_name("_elastic_rank.py")
SAMPLER_SEED, LOADER_SEED = 11, 5  # tests/_elastic_rank.py's
WAIT = 120  # seconds a phase may take before its processes are killed: a hang, not slowness


def run_phase(out: Path, phase: str, world: int, n: int, batch_size: int, batches: int | str, *,
              workers: int = 0, load: Path | None = None, save: Path | None = None) -> list[list[list[int]]]:
    """Run ``world`` processes, one per rank, to the end; each rank's batches (lists of ids)."""
    args = [str(out), phase, str(n), str(batch_size), str(batches), str(workers),
            str(load or "-"), str(save or "-"), "files"]
    procs = []
    try:
        for rank in range(world):
            env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world)}
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), *args], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for rank, proc in enumerate(procs):
            _, err = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0, f"{phase}: rank {rank} of {world} failed:\n{err}"
    finally:
        _end(procs)
    return [json.loads((out / f"{phase}-rank-{rank}.json").read_text()) for rank in range(world)]


def _end(procs: list[subprocess.Popen]) -> None:
    """Kill whatever of ``procs`` still runs (a failed phase) and reap it."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def global_batches(ranks: list[list[list[int]]]) -> list[list[int]]:
    """The k-th global batch: every rank's k-th batch; every rank must hand out as many."""
    counts = {len(batches) for batches in ranks}
    assert len(counts) == 1, f"the ranks handed out different numbers of batches: {[len(b) for b in ranks]}"
    return [sum((batches[k] for batches in ranks), []) for k in range(counts.pop())]


def in_global_order(ranks: list[list[list[int]]]) -> list[int]:
    """The ids in the order of the positions they stand at: position r + W*j is rank r's j-th id."""
    flat = [sum(batches, []) for batches in ranks]
    width = max(map(len, flat))
    return [ids[j] for j in range(width) for ids in flat if j < len(ids)]


def permutation(n: int) -> list[int]:
    """The epoch's global permutation: what one rank alone hands out."""
    dataset = ArrayDataset(np.arange(n))
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=n, seed=SAMPLER_SEED, world_size=1, rank=0),
                        seed=LOADER_SEED)
    return [i for batch in loader for i in batch[0].tolist()]


def uninterrupted(n: int, world: int, batch_size: int) -> list[list[int]]:
    """The global batches of an epoch run by ``world`` ranks without a stop."""
    dataset = ArrayDataset(np.arange(n))
    ranks = []
    for rank in range(world):
        sampler = RandomSampler(dataset, batch_size=batch_size, seed=SAMPLER_SEED, world_size=world, rank=rank)
        ranks.append([batch[0].tolist() for batch in DataLoader(dataset, sampler, seed=LOADER_SEED)])
    return global_batches(ranks)


def check_epoch(n: int, phases: list[list[list[list[int]]]]) -> None:
    """Every id once, in the global permutation's order; the last world's padding (wrap-around
    copies of what was left when it resumed, fewer than its ranks) only in its last batches."""
    order = sum((in_global_order(ranks) for ranks in phases), [])
    perm = permutation(n)
    assert order[:n] == perm, "the ids handed out are not the global permutation's, in order"
    last = phases[-1]
    left = len(in_global_order(last)) - (len(order) - n)  # what the last world resumed with
    padding = order[n:]
    assert padding == (perm[n - left:] * len(last))[: len(padding)], "the padding is not wrap-around copies"
    assert len(padding) < len(last), f"{len(padding)} padding copies for {len(last)} ranks"
    counts = Counter(sum((sum(b, []) for ranks in phases for b in ranks), []))
    assert set(counts) == set(range(n)) and sum(counts.values()) == n + len(padding)
    final = global_batches(last)[-1]
    assert not set(padding) - set(final), "padding outside the epoch's last global batch"


def check_same_global_batches(n: int, phases: list[list[list[list[int]]]], world: int, batch_size: int) -> None:
    """The global batches after each resume are the uninterrupted run's; the last one too, but
    for its padding: the last world's (what it handed out past the epoch's n positions) instead
    of the uninterrupted run's (copies of the epoch's first ids)."""
    resumed = sum((global_batches(ranks) for ranks in phases), [])
    reference = uninterrupted(n, world, batch_size)
    assert len(resumed) == len(reference)
    assert [sorted(b) for b in resumed[:-1]] == [sorted(b) for b in reference[:-1]]
    padding = sum((in_global_order(ranks) for ranks in phases), [])[n:]
    reference_padding = permutation(n)[: sum(map(len, reference)) - n]
    last = Counter(resumed[-1]) - Counter(padding)
    assert last == Counter(reference[-1]) - Counter(reference_padding) and last
    assert sum(last.values()) + len(padding) == len(resumed[-1])


def test_four_ranks_then_two_then_three_same_global_batch(tmp_path: Path) -> None:
    n = 100  # global batch 12: 4 x 3, then 2 x 6 (two worker processes each), then 3 x 4
    first = run_phase(tmp_path, "four", 4, n, 3, 2, save=tmp_path / "ckpt-4")
    second = run_phase(tmp_path, "two", 2, n, 6, 3, workers=2, load=tmp_path / "ckpt-4", save=tmp_path / "ckpt-2")
    third = run_phase(tmp_path, "three", 3, n, 4, "all", load=tmp_path / "ckpt-2")
    phases = [first, second, third]
    assert [len(b) for b in first] == [2] * 4 and [len(b) for b in second] == [3] * 2
    check_epoch(n, phases)
    check_same_global_batches(n, phases, 4, 3)


def test_four_ranks_then_three_other_global_batch(tmp_path: Path) -> None:
    n = 97  # global batch 12, then 3 x 2 = 6: exactly once, in order, padded at the end
    first = run_phase(tmp_path, "four", 4, n, 3, 3, save=tmp_path / "ckpt-4")
    second = run_phase(tmp_path, "three", 3, n, 2, "all", load=tmp_path / "ckpt-4")
    assert len(sum((sum(b, []) for b in second), [])) == 63  # 97 - 36 = 61 left: 21 per rank, 2 padding
    check_epoch(n, [first, second])


# -- the same under torchrun, the states gathered with all_gather_object over gloo -------------


def run_torchrun(out: Path, phase: str, world: int, n: int, batch_size: int, batches: int | str,
                 load: Path | None = None, save: Path | None = None) -> list[list[list[int]]]:
    """One torchrun of ``world`` processes on this machine; each rank's batches."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world),
               str(SCRIPT), str(out), phase, str(n), str(batch_size), str(batches), "0",
               str(load or "-"), str(save or "-"), "torch"]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own group: a hang kills torchrun and its ranks
    try:
        output, _ = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, f"torchrun {phase} failed:\n{output[-4000:]}"
    return [json.loads((out / f"{phase}-rank-{rank}.json").read_text()) for rank in range(world)]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (the torch extra)")
@pytest.mark.timeout(2 * WAIT + 60)
def test_torchrun_four_ranks_then_two(tmp_path: Path) -> None:
    n = 90  # global batch 12: 4 x 3, then 2 x 6
    first = run_torchrun(tmp_path, "four", 4, n, 3, 3, save=tmp_path / "ckpt-4")
    states = json.loads((tmp_path / "ckpt-4" / "states.json").read_text())
    assert [s["config"]["rank"] for s in states] == [0, 1, 2, 3]  # gathered in rank order
    second = run_torchrun(tmp_path, "two", 2, n, 6, "all", load=tmp_path / "ckpt-4")
    check_epoch(n, [first, second])
    check_same_global_batches(n, [first, second], 4, 3)
