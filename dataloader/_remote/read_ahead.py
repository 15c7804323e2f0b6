"""Reading the next pieces while the current one is decoded: ordered, bounded by bytes.

On object storage each read waits a round trip (tens of milliseconds) before
the first byte comes. Reading pieces one after another pays every wait in
turn; reading the next few in background threads pays them together, behind
the work on the current piece. The pieces come back in their order, and the
reads in flight hold at most ``budget`` bytes (always at least one piece, so a
piece larger than the budget is still read).
"""

from __future__ import annotations

import collections
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Reads in flight at most: enough to hide a 50 ms round trip behind a few milliseconds of decoding each.
MAX_THREADS = 8


def read_ahead(
    items: Iterable[Item], read: Callable[[Item], Result], size: Callable[[Item], int], budget: int,
    threads: int = MAX_THREADS,
) -> Iterator[Result]:
    """``read(item)`` for each of ``items`` in order, up to ``budget`` bytes (by ``size``) and
    ``threads`` reads ahead. Closing the iterator cancels the reads not started and waits for
    the ones running, so no thread outlives it."""
    pending: collections.deque[tuple[Future[Result], int]] = collections.deque()
    queued = 0  # bytes of the reads in ``pending``
    source = iter(items)
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dataloader-read-ahead")
    try:
        exhausted = False
        while True:
            while not exhausted and len(pending) < threads and (not pending or queued < budget):
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                cost = max(1, size(item))  # type: ignore[arg-type]
                pending.append((pool.submit(read, item), cost))  # type: ignore[arg-type]
                queued += cost
            if not pending:
                return
            future, cost = pending.popleft()
            queued -= cost
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_END = object()
