"""CPU time per batch of this loader with ``num_workers=0`` on the small-sample workloads, where
the per-batch work of the serial path (seeding, collate) is most of the cost.

``--tree PATH`` loads ``dataloader`` from another checkout (a ``git worktree`` of an older
commit), so two versions are compared by running this twice, alternating::

    git worktree add /tmp/old 69b76f7
    python -m benchmarks.serial_cost --tree /tmp/old --seed 7
    python -m benchmarks.serial_cost --seed 7

Each line: the workload and the median CPU microseconds per batch of 256 over ``--reps`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

WORKLOADS = ("scalars", "record", "vector", "tiny")


def _per_batch_us(loader, batches: int) -> float:
    iterator = iter(loader)
    for _ in range(50):  # warm: workers none, but caches and the first batches' set-up
        next(iterator)
    start = time.process_time()
    for _ in range(batches):
        next(iterator)
    return 1e6 * (time.process_time() - start) / batches


def _tree_first(argv: list[str] | None) -> str | None:
    """``--tree``, read before the rest of the options."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--tree")
    return early.parse_known_args(argv)[0].tree


def main(argv: list[str] | None = None) -> None:
    tree = _tree_first(argv)
    if tree:  # before anything imports dataloader (the shared options do)
        sys.path.insert(0, tree)
    from .options import add_reps, add_workloads, new_parser, positive_int

    parser = new_parser(__doc__, prog="python -m benchmarks.serial_cost")
    parser.add_argument("--tree", help="a checkout to load dataloader from (default: this one)")
    parser.add_argument("--seed", type=int, default=None, help="the loader's seed (default: None)")
    add_workloads(parser, ",".join(WORKLOADS), WORKLOADS)
    parser.add_argument("--batches", type=positive_int, default=400, help="measured batches per run (default 400)")
    add_reps(parser, 3)
    args = parser.parse_args(argv)
    from dataloader import DataLoader, RandomSampler

    from .small import RecordDataset, ScalarsDataset, VectorDataset
    from .workloads import TinyDataset

    makers = {"scalars": ScalarsDataset, "record": RecordDataset, "vector": VectorDataset, "tiny": TinyDataset}
    for name in args.workloads:
        dataset = makers[name]()
        runs = []
        for _ in range(args.reps):
            sampler = RandomSampler(dataset, batch_size=256, seed=0)
            kwargs = {} if args.seed is None else {"seed": args.seed}
            runs.append(_per_batch_us(DataLoader(dataset, sampler, num_workers=0, **kwargs), args.batches))
        print(f"{name}: {statistics.median(runs):.1f} us a batch (CPU; median of {args.reps})")


if __name__ == "__main__":
    main()
