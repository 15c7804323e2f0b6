"""A sample that raises a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit``, one of your own): no bad sample, whatever ``on_error`` says,
and no dead worker. It reaches you as its own type, with a note that says where it came from, in
serial and parallel mode alike (issue 45, item 8: with workers it used to be skipped as a sample
that killed its worker, or reported as a WorkerDiedError), and the loader closes cleanly.
"""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import DataLoader, Dataset, SequentialSampler

STOPPER = 5  # in batch 1: [4, 5, 6, 7]


class _Halt(BaseException):
    """A BaseException of the user's own."""


class _RaisesAt(Dataset):
    """0..15; sample ``STOPPER`` raises ``kind`` (module level: spawn could unpickle it)."""

    def __init__(self, kind: type) -> None:
        self.kind = kind

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> np.ndarray:
        if index == STOPPER:
            raise self.kind(f"sample {index} asks to stop")
        return np.array([index])


def _exit_at_init(worker_id: int) -> None:
    raise SystemExit(4)


MODES = {
    "serial": dict(num_workers=0),
    "processes": dict(num_workers=2, multiprocessing_context="fork"),
    "threads": dict(num_workers=2, worker_type="thread"),
}
CASES = [
    (KeyboardInterrupt, "skip"),
    (KeyboardInterrupt, "replace"),
    (SystemExit, "skip"),
    (SystemExit, "raise"),
    (GeneratorExit, "replace"),
    (_Halt, "skip"),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("kind, on_error", CASES, ids=[f"{k.__name__}-{p}" for k, p in CASES])
def test_it_reaches_you_as_itself_with_where_it_came_from(no_leaks, mode, kind, on_error):
    dataset = _RaisesAt(kind)
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), on_error=on_error, **MODES[mode])
    delivered = []
    with pytest.raises(BaseException) as caught:
        for batch in loader:
            delivered.append(batch[:, 0].tolist())
    error = caught.value
    assert type(error) is kind and not isinstance(error, Exception), repr(error)
    assert str(error) == f"sample {STOPPER} asks to stop"
    assert delivered == [[0, 1, 2, 3]]  # the batch before; nothing after, nothing skipped
    (note,) = error.__notes__
    assert "while loading indices [4, 5, 6, 7] (stage: fetch)" in note
    assert f"on_error does not skip or replace a sample that raises {kind.__name__}" in note
    if mode == "serial":
        assert note.startswith("Raised in the main process (num_workers=0)")
    else:
        worker = f"DataLoader worker process {error.worker_id} (pid {error.pid})"
        assert note.startswith(f"Caught {kind.__name__} in {worker}")
        assert error.indices == [4, 5, 6, 7]
        assert f"raise self.kind(f\"sample {{index}} asks to stop\")" in note  # the worker's traceback
    assert loader.stats().failed_samples == 0  # not counted as a bad sample
    loader.close()


def test_a_worker_init_fn_that_raises_system_exit_reaches_you_as_itself(no_leaks):
    dataset = _RaisesAt(KeyboardInterrupt)
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4), num_workers=2, multiprocessing_context="fork",
        worker_init_fn=_exit_at_init, on_error="skip",
    )
    with pytest.raises(SystemExit) as caught:
        next(iter(loader))
    assert caught.value.code == 4
    assert "(stage: worker_init_fn)" in caught.value.__notes__[0]
    loader.close()
