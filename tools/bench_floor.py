"""The floor of a process transport: how fast can worker processes hand batches over at all?

``tools/bench.py`` compares this loader with PyTorch's and with no loader. This tool asks
what is left between our loader and the machine: it runs, paired within each repetition,

- ``no-loader``: the plain loop in the main process (the denominator of every ratio);
- ``floor``: ``--workers`` forked processes, each stacking its batches into shared-memory
  segments it reuses (memfd, mapped before the fork) and naming the finished one in 5 bytes
  through a pipe; the main process hands batches out in order as views of the segments and
  frees each when it hands out the next. Nothing is pickled and nothing is checked: the least a zero-copy process
  transport costs on this machine;
- ``floor+main``: the same, with the main process spending ``--main-us`` of CPU per batch, as
  a loader's own bookkeeping in the main process would;
- ``ours``: ``DataLoader(num_workers=--workers)``.

For ``floor`` and ``ours`` it also reports the CPU time per batch of the main process and of
the workers, so the difference between them is the price of what the loader does besides
copying (messages, seeding, collating, bookkeeping). Workloads are the CPU bench's ``tiny``
and ``images`` (tools/_bench_workloads.py); the consumer is its ``touch``, followed with
``--step-us`` by that much CPU per batch: a training step slower than the loader, so that each
batch is made before it is asked for. The step's CPU is not counted in ``main us/batch``.

Usage: ``python tools/bench_floor.py [--workloads images,tiny] [--workers 2] [--reps 3]
[--seconds 1.5] [--main-us 200] [--step-us 0] [--loaders no-loader,floor,floor+main,ours]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import functools
import mmap
import os
import select
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np
import psutil

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from dataloader import DataLoader, Dataset, RandomSampler  # noqa: E402
from dataloader._transport.segment import align, create_fd, map_fd  # noqa: E402
from _bench_loaders import plain_batches, stack, touch  # noqa: E402
from _bench_summary import dump_runs, median  # noqa: E402
from _bench_workloads import WORKLOADS  # noqa: E402

NO_LOADER, FLOOR, FLOOR_MAIN, OURS = "no-loader", "floor", "floor+main", "ours"
RUNS = (NO_LOADER, FLOOR, FLOOR_MAIN, OURS)
SEGMENTS_PER_WORKER = 3  # as many as our workers keep in rotation at prefetch_factor=2
PREFETCH = 2
WARMUP_BATCHES = 10
_DONE = struct.Struct("<iB")  # batch number, segment


@dataclass
class Run:
    workload: str
    loader: str
    rep: int
    samples_per_s: float
    main_us_per_batch: float | None = None
    workers_us_per_batch: float | None = None


class FloorWorkers:
    """``workers`` forked processes making batch ``b`` from ``order[b*bs:(b+1)*bs]`` straight
    into shared segments. Iterating yields batches as views; each is freed at the next step."""

    def __init__(self, dataset: Any, order: list[int], batch_size: int, workers: int, main_us: float = 0.0):
        self._dataset, self._order, self._batch_size = dataset, order, batch_size
        self._main_s = main_us / 1e6
        first = stack([dataset[i] for i in order[:batch_size]])
        self._fields = [(a.shape, a.dtype) for a in first]
        offsets, end = [], 0
        for shape, dtype in self._fields:
            offsets.append(end)
            end = align(end + int(np.prod(shape)) * dtype.itemsize)
        self._offsets, size = offsets, end
        self._maps = [[self._segment(size) for _ in range(SEGMENTS_PER_WORKER)] for _ in range(workers)]
        self._views = [[self._layout(m) for m in row] for row in self._maps]
        self._pids, self._tasks, self._done = [], [], []
        for w in range(workers):
            task_r, task_w = os.pipe()
            done_r, done_w = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child
                # Its own parent-side ends, and those of the workers forked before it.
                for fd in (task_w, done_r, *self._tasks, *self._done):
                    os.close(fd)
                self._serve(w, task_r, done_w)
            os.close(task_r)
            os.close(done_w)
            self._pids.append(pid)
            self._tasks.append(task_w)
            self._done.append(done_r)

    @staticmethod
    def _segment(size: int) -> mmap.mmap:
        """A segment made as our workers make theirs (memfd, pages reserved up front)."""
        fd = create_fd(size, "bench-floor")
        try:
            return map_fd(fd, size)
        finally:
            os.close(fd)

    def _layout(self, segment: mmap.mmap) -> tuple[np.ndarray, ...]:
        return tuple(
            np.ndarray(shape, dtype, buffer=segment, offset=offset)
            for (shape, dtype), offset in zip(self._fields, self._offsets)
        )

    def _serve(self, worker: int, task_r: int, done_w: int) -> None:  # pragma: no cover - child
        code = 0
        try:
            views = self._views[worker]
            while True:
                message = os.read(task_r, _DONE.size)
                if len(message) < _DONE.size:
                    break
                number, segment = _DONE.unpack(message)
                start = number * self._batch_size
                samples = [self._dataset[i] for i in self._order[start : start + self._batch_size]]
                for k, out in enumerate(views[segment]):
                    column = [s[k] for s in samples]
                    if isinstance(column[0], np.ndarray):
                        np.stack(column, out=out)
                    else:
                        out[...] = column
                os.write(done_w, message)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        batches = len(self._order) // self._batch_size
        free = [list(range(SEGMENTS_PER_WORKER)) for _ in self._pids]
        outstanding = [0] * len(self._pids)
        sent = 0
        poller = select.poll()
        for fd in self._done:
            poller.register(fd, select.POLLIN)
        owner = {fd: w for w, fd in enumerate(self._done)}
        ready: dict[int, tuple[int, int]] = {}  # batch number -> (worker, segment)
        held: tuple[int, int] | None = None

        def dispatch(w: int) -> None:
            nonlocal sent
            while sent < batches and outstanding[w] < PREFETCH and free[w]:
                os.write(self._tasks[w], _DONE.pack(sent, free[w].pop()))
                outstanding[w] += 1
                sent += 1

        for w in range(len(self._pids)):
            dispatch(w)
        for number in range(batches):  # in order, as our loader delivers by default
            while number not in ready:
                for fd, _ in poller.poll():
                    w = owner[fd]
                    data = os.read(fd, _DONE.size * 64)
                    if not data:
                        raise RuntimeError(f"bench_floor: worker {w} exited (its traceback is above)")
                    for at in range(0, len(data), _DONE.size):
                        done, segment = _DONE.unpack_from(data, at)
                        ready[done] = (w, segment)
                        outstanding[w] -= 1
            w, segment = ready.pop(number)
            if held is not None:  # the consumer is done with the previous batch
                free[held[0]].append(held[1])
                dispatch(held[0])
            held = (w, segment)
            dispatch(w)
            if self._main_s:
                _spend(self._main_s)
            yield self._views[w][segment]

    def close(self) -> None:
        # No more tasks: each worker finishes what it has, reports it and exits; its
        # report pipe is closed only then, so no worker writes into a closed pipe.
        for fd in self._tasks:
            os.close(fd)
        for pid in self._pids:
            os.waitpid(pid, 0)
        for fd in self._done:
            os.close(fd)
        self._views = []
        for row in self._maps:
            for segment in row:
                segment.close()

    def __enter__(self) -> "FloorWorkers":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _spend(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU: stands in for a loader's work per batch."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _measure(batches: Iterator, batch_size: int, seconds: float, limit: int,
             step: float = 0.0) -> tuple[float, float, float]:
    """(samples/s, main CPU us per batch, workers' CPU us per batch) after a warm-up, over at
    most ``limit`` batches (so the workers are still there when the CPU times are read). The
    consumer spends ``step`` s of CPU on each batch, which the main CPU figure leaves out."""
    for _ in range(WARMUP_BATCHES):
        touch(next(batches))
    me = psutil.Process()
    children = me.children(recursive=True)
    # The workers' CPU comes from psutil, in clock ticks (10 ms); the main process's from
    # process_time, exact enough to subtract a step from it even in a short run.
    cpu = lambda procs: sum(sum(p.cpu_times()[:2]) for p in procs)  # noqa: E731
    main0, kids0, start, count = time.process_time(), cpu(children), time.perf_counter(), 0
    for batch in batches:
        touch(batch)
        if step:
            _spend(step)
        count += 1
        if count >= limit or time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    main1, kids1 = time.process_time(), cpu(children)
    return count * batch_size / elapsed, ((main1 - main0) / count - step) * 1e6, (kids1 - kids0) / count * 1e6


@functools.lru_cache(maxsize=None)
def _dataset(workload: str, small: bool) -> Dataset:
    """One dataset per workload for the whole run (the image pool takes a while to make)."""
    return WORKLOADS[workload].make(small)


def run_once(workload: str, loader: str, rep: int, workers: int, seconds: float, main_us: float,
             small: bool = False, step_us: float = 0.0) -> Run:
    spec = WORKLOADS[workload]
    dataset = _dataset(workload, small)
    order = np.random.default_rng(rep).permutation(len(dataset)).tolist()
    limit = len(order) // spec.batch_size - WARMUP_BATCHES - (PREFETCH + 1) * workers
    measure = functools.partial(_measure, batch_size=spec.batch_size, seconds=seconds, limit=limit,
                                step=step_us / 1e6)
    if loader == NO_LOADER:
        plain = plain_batches(dataset, order, spec.batch_size, forever=True)
        rate, _, _ = measure(plain)
        return Run(workload, loader, rep, rate)
    if loader == OURS:
        sampler = RandomSampler(dataset, batch_size=spec.batch_size, seed=rep)
        with iter(DataLoader(dataset, sampler, num_workers=workers, prefetch_factor=PREFETCH)) as batches:
            rate, main, kids = measure(batches)
        return Run(workload, loader, rep, rate, main, kids)
    with FloorWorkers(dataset, order, spec.batch_size, workers, main_us if loader == FLOOR_MAIN else 0.0) as floor:
        rate, main, kids = measure(iter(floor))
    return Run(workload, loader, rep, rate, main, kids)


def summarize(runs: Sequence[Run]) -> list[dict]:
    """One row per (workload, loader): median rate, median of the ratios to no-loader paired
    within each repetition, median CPU per batch."""
    rows = []
    for workload in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == workload]
        base = {r.rep: r.samples_per_s for r in mine if r.loader == NO_LOADER}
        for loader in RUNS:
            group = [r for r in mine if r.loader == loader]
            if not group:
                continue
            rows.append({
                "workload": workload, "loader": loader,
                "samples_per_s": median([r.samples_per_s for r in group]),
                "vs_no_loader": median([r.samples_per_s / base[r.rep] for r in group if r.rep in base]),
                "main_us_per_batch": median([r.main_us_per_batch for r in group]),
                "workers_us_per_batch": median([r.workers_us_per_batch for r in group]),
            })
    return rows


def format_table(rows: list[dict]) -> str:
    def cell(value: Any, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    lines = [f"{'workload':8}  {'loader':10}  {'samples/s':>10}  {'x no-loader':>11}  "
             f"{'main us/batch':>13}  {'workers us/batch':>16}"]
    for row in rows:
        lines.append(
            f"{row['workload']:8}  {row['loader']:10}  {cell(row['samples_per_s'], ',.0f'):>10}  "
            f"{cell(row['vs_no_loader'], '.2f'):>11}  {cell(row['main_us_per_batch'], '.0f'):>13}  "
            f"{cell(row['workers_us_per_batch'], '.0f'):>16}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="images,tiny", help="comma-separated, among images,tiny")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5, help="measured seconds per run")
    parser.add_argument("--main-us", type=float, default=200.0,
                        help="main-process CPU per batch in the floor+main run (default 200)")
    parser.add_argument("--step-us", type=float, default=0.0,
                        help="CPU the consumer spends on each batch, a training step (default 0)")
    parser.add_argument("--loaders", default=",".join(RUNS),
                        help=f"comma-separated, among {','.join(RUNS)} (ratios need no-loader); "
                        "no-loader,ours with PYTHONPATH set to another checkout compares two versions")
    parser.add_argument("--quick", action="store_true", help="small datasets, one short repetition")
    parser.add_argument("--json", metavar="PATH", help="also write the runs and rows here")
    args = parser.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in ("images", "tiny")]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}: choose among images,tiny")
    asked = [run for run in args.loaders.split(",") if run]
    unknown = sorted(set(asked) - set(RUNS))
    if unknown or not asked:
        parser.error(f"unknown or no loader(s) {unknown}: choose among {','.join(RUNS)}")
    args.loaders = tuple(run for run in RUNS if run in asked)
    if args.workers < 1 or args.reps < 1 or args.seconds <= 0 or args.main_us < 0 or args.step_us < 0:
        parser.error("--workers and --reps must be >= 1, --seconds > 0, --main-us and --step-us >= 0")
    if args.quick:
        args.reps, args.seconds = 1, min(args.seconds, 0.3)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs = []
    for rep in range(args.reps):
        for workload in args.workloads:
            turn = rep % len(args.loaders)
            order = args.loaders[turn:] + args.loaders[:turn]  # rotated: no run always goes first
            for loader in order:
                runs.append(run_once(workload, loader, rep, args.workers, args.seconds, args.main_us, args.quick,
                                     args.step_us))
    rows = summarize(runs)
    step = f", a {args.step_us:g} us step per batch (not in main us/batch)" if args.step_us else ""
    print(f"{args.workers} worker(s), {args.reps} rep(s), {args.seconds:g} s per run, "
          f"floor+main spends {args.main_us:g} us per batch{step}; medians, ratios paired within a rep")
    print(format_table(rows))
    if args.json:
        dump_runs(args.json, runs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
