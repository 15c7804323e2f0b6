"""One timed run of one decode contender, in a child process of the interpreter it needs.

A run (:func:`timed_run`) asks the contender for a continuous stream of batches, takes
``WARMUP_BATCHES`` of them untimed (imports, thread pools, worker start and the first
decodes), then times one epoch's worth (``images // 32`` batches): from the arrival of the
last warm-up batch to the arrival of the last timed one. A stream rather than an iterator per
epoch, so that no contender is timed across an epoch boundary it handles differently; the
consumer only reads each batch's first pixel. The CPU time of the process and its children
over the same window is recorded too.

``python -c COMMAND NAME ROOT WORKERS IMAGES`` runs one and prints its result as a JSON line
starting ``RESULT``; ``python -c COMMAND --check JPEG NAME...`` prints (the same way) why each
contender named that cannot run here cannot. Each run is a fresh process, so that the peers'
thread pools and runtimes never share one with each other or with our forked workers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .decode_contenders import BATCH, BY_NAME, WARMUP_BATCHES, Contender, missing

RESULT = "RESULT "
#: What a child runs (``python -c COMMAND ARGS...``): :func:`main` with its arguments.
COMMAND = "import sys; from benchmarks.decode_child import main; sys.exit(main(sys.argv[1:]))"


def _first_image(batch: Any) -> Any:
    """The images of a batch: the first element of a (images, labels) pair."""
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def _cpu_seconds() -> float:
    """CPU time of this process and its living children (workers), user and system."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def timed_run(contender: Contender, root: Path, workers: int, images: int) -> dict:
    """One run: warm-up batches, then ``images // BATCH`` batches timed (see the docstring)."""
    timed = max(1, images // BATCH)
    with contender.open(root, workers, WARMUP_BATCHES + timed) as stream:
        for _ in range(WARMUP_BATCHES):
            first = next(stream)
        shape = tuple(int(n) for n in _first_image(first).shape)
        dtype = str(_first_image(first).dtype)
        cpu, start = _cpu_seconds(), time.perf_counter()
        for _ in range(timed):
            int(np.asarray(_first_image(next(stream))[0, 0, 0]).ravel()[0])  # the first pixel
        elapsed = time.perf_counter() - start
        cpu = _cpu_seconds() - cpu
    return {"images_per_s": timed * BATCH / elapsed, "seconds": elapsed, "timed_images": timed * BATCH,
            "cpu_ms_per_image": 1e3 * cpu / (timed * BATCH), "shape": shape, "dtype": dtype}


def main(argv: list[str]) -> int:
    """``NAME ROOT WORKERS IMAGES``: one run, its result printed as ``RESULT {json}``;
    ``--check JPEG NAME...``: ``{name: why it cannot run here}`` for those that cannot."""
    if argv[:1] == ["--check"]:
        reasons = {name: missing(BY_NAME[name], Path(argv[1])) for name in argv[2:]}
        print(RESULT + json.dumps({name: why for name, why in reasons.items() if why}), flush=True)
        return 0
    name, root, workers, images = argv
    contender = BY_NAME[name]
    try:
        result = timed_run(contender, Path(root), int(workers), int(images))
    except ImportError as error:  # installed but broken (a shared library missing, ...)
        result = {"skipped": f"{type(error).__name__}: {error}"}
    print(RESULT + json.dumps(result), flush=True)
    return 0
