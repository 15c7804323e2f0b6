"""Preload overlaps the next batch's conversion with the consumer's step."""

import threading
import time

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, SequentialSampler
from dataloader._device.preload import Preload
from dataloader._exec.serial import SerialExecutor
from dataloader._stages.stage import Stage
from dataloader._stages.task import BatchTask
from dataloader.transform import BatchTransform, Compose, Transform
from dataloader.errors import ArgumentValueError


class SlowCopy:
    """A test adapter whose "copy" takes a fixed time, like a host-to-device transfer."""

    name = "slow"

    def __init__(self, seconds):
        self.seconds = seconds
        self.threads = set()

    def convert(self, batch):
        self.threads.add(threading.current_thread().name)
        time.sleep(self.seconds)
        return ("copied", batch)

    def ready(self, batch):
        return batch


def _tasks(count):
    return iter([BatchTask(0, index) for index in range(count)])


class _batches(Stage):
    """The executor's batches without which tasks made them (what the Tally passes on)."""

    def __next__(self):
        return next(self.upstream)[0]


def run(adapter, preload, steps=8, step=0.05):
    upstream = _batches(SerialExecutor(_tasks(steps), lambda task: task.index))
    stage = Preload(upstream, adapter, depth=1) if preload else None
    start = time.perf_counter()
    got = []
    iterator = stage if preload else (adapter.convert(i) for i in upstream)
    for item in iterator:
        got.append(item)
        time.sleep(step)  # the training step
    elapsed = time.perf_counter() - start
    if stage is not None:
        stage.close()
    return got, elapsed


def test_total_time_is_about_max_of_step_and_copy_not_their_sum():
    steps, step, copy = 8, 0.05, 0.05
    got, overlapped = run(SlowCopy(copy), preload=True, steps=steps, step=step)
    assert got == [("copied", i) for i in range(steps)]
    _, sequential = run(SlowCopy(copy), preload=False, steps=steps, step=step)
    # Sequential: steps * (step + copy) = 0.8 s. Overlapped: copy + steps * max(step, copy) = 0.45 s.
    assert sequential > 0.75
    assert overlapped < 0.65, f"preload did not overlap: {overlapped:.2f}s vs {sequential:.2f}s sequential"


def test_conversion_runs_in_the_preload_thread():
    adapter = SlowCopy(0)
    run(adapter, preload=True, steps=2, step=0)
    assert adapter.threads == {"dataloader-preload"}


def test_preload_error_reaches_the_consumer_and_close_joins_the_thread():
    class Broken:
        name = "broken"

        def convert(self, batch):
            raise MemoryError("device full")

        def ready(self, batch):
            return batch

    stage = Preload(_batches(SerialExecutor(_tasks(3), lambda task: task.index)), Broken(), depth=1)
    with pytest.raises(MemoryError, match="device full"):
        next(stage)
    stage.close()
    assert not any(t.name == "dataloader-preload" for t in threading.enumerate())


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_preload_gives_the_same_batches(num_workers, no_leaks):
    dataset = ArrayDataset(np.arange(40).reshape(20, 2))
    make = lambda preload: [b[0].tolist() for b in DataLoader(  # noqa: E731
        dataset, SequentialSampler(dataset, batch_size=3), num_workers=num_workers, preload=preload, preload_depth=2)]
    assert make(True) == make(False)


class Twice(BatchTransform):
    def __init__(self):
        self.calls = 0

    def apply(self, batch):
        self.calls += 1
        return (batch[0] * 2,)


class Shift(Transform):
    def apply(self, sample):
        return (sample[0] + 1,)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_transform_runs_once_per_batch_in_every_mode(num_workers, no_leaks):
    dataset = ArrayDataset(np.arange(6))
    twice = Twice()
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), transform=Compose([Shift(), twice]),
                        num_workers=num_workers, preload=True)
    assert [b[0].tolist() for b in loader] == [[2, 4, 6, 8], [10, 12]]
    if num_workers == 0:
        assert twice.calls == 2  # it ran in this process, on whole batches


def test_batch_transform_errors_propagate_unwrapped():
    class Bad(BatchTransform):
        def apply(self, batch):
            raise ZeroDivisionError("on device")

    dataset = ArrayDataset(np.arange(4))
    with pytest.raises(ZeroDivisionError, match="on device") as caught:
        list(DataLoader(dataset, transform=Bad(), num_workers=1))
    assert type(caught.value) is ZeroDivisionError


def test_batch_transform_must_come_last():
    with pytest.raises(ArgumentValueError, match="must come last"):
        DataLoader(ArrayDataset(np.arange(4)), transform=Compose([Twice(), Shift()]))
