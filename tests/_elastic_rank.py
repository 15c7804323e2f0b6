"""One rank of tests/test_elastic_processes.py's runs: a process of a job whose RANK and
WORLD_SIZE are in its environment (set by the test, or by torchrun).

It builds a loader over the ids 0..N-1 (one shuffled epoch, drop_last=False), resumes it from
every old rank's state when told to, hands out some batches or the rest of the epoch, writes
the ids it handed out (one list per batch) to OUT/PHASE-rank-R.json, and saves its state:
with ``save_rank_state`` (files) or, under torchrun, ``gather_states`` (rank 0 writes the list).

    python tests/_elastic_rank.py OUT PHASE N BATCH_SIZE BATCHES|all WORKERS LOAD|- SAVE|- files|torch
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from dataloader import (
    ArrayDataset,
    DataLoader,
    RandomSampler,
    gather_states,
    load_rank_states,
    save_rank_state,
)

SAMPLER_SEED, LOADER_SEED = 11, 5


def main(out: str, phase: str, n: str, batch_size: str, batches: str, workers: str, load: str, save: str,
         mode: str) -> None:
    if mode == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    dataset = ArrayDataset(np.arange(int(n)))
    sampler = RandomSampler(dataset, batch_size=int(batch_size), drop_last=False, seed=SAMPLER_SEED)  # RANK, WORLD_SIZE
    loader = DataLoader(dataset, sampler, num_workers=int(workers), seed=LOADER_SEED, timeout=60)
    if load != "-":
        loader.load_state_dict(_read_states(load, mode))
    handed: list[list[int]] = []
    it = iter(loader)
    for batch in it:
        handed.append(batch[0].tolist())
        if batches != "all" and len(handed) == int(batches):
            break
    rank = int(os.environ["RANK"])
    if save != "-":
        _save_state(save, loader.state_dict(), rank, mode)
    del it  # ends the epoch's workers before the process exits
    loader.close()
    Path(out, f"{phase}-rank-{rank}.json").write_text(json.dumps(handed))
    if mode == "torch":
        dist.barrier()
        dist.destroy_process_group()


def _read_states(folder: str, mode: str) -> list[dict]:
    if mode == "torch":  # the list gathered by the saving run, as rank 0 wrote it
        return json.loads(Path(folder, "states.json").read_text())
    return load_rank_states(folder)


def _save_state(folder: str, state: dict, rank: int, mode: str) -> None:
    if mode == "files":
        save_rank_state(folder, state)
        return
    states = gather_states(state)  # a collective: every rank calls it
    if rank == 0:
        Path(folder).mkdir(parents=True, exist_ok=True)
        Path(folder, "states.json").write_text(json.dumps(states))


if __name__ == "__main__":
    main(*sys.argv[1:])
