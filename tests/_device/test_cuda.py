"""The CUDA path: batches copied from pinned memory on a side stream, handed to the consumer's stream.

Runs where PyTorch sees a GPU and is skipped, with the reason, everywhere else. What could go
wrong there and only there: a consumer reading a tensor before its copy finished (the stream
handshake), the caching allocator reusing a held batch's memory (``record_stream``), pinned
staging memory or CUDA memory outliving the loader, and workers forked from a process that
has already initialised CUDA.
"""

import importlib.util

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, Dataset, RandomSampler, SequentialSampler
from dataloader._device.structure import map_arrays
from tests.harness import assert_same, collect

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _cuda_available() -> bool:
    if not HAS_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


pytestmark = pytest.mark.skipif(
    not _cuda_available(), reason="no CUDA device (or no PyTorch) on this machine; the GPU path runs where one exists"
)


@pytest.fixture(scope="module", autouse=True)
def cuda_initialised():
    """Initialise CUDA, a side stream and the pinned-memory allocator before any leak snapshot:
    their driver threads and descriptors live as long as the process, not the loader."""
    import torch

    warm = DataLoader(ArrayDataset(np.zeros((4, 4), np.float32)), device="cuda:0", preload=True)
    for _ in warm:
        pass
    torch.cuda.synchronize()


class Records(Dataset):
    """A nested sample: an image, a big-endian vector, a float, a string and a dict of both."""

    def __init__(self, size: int = 40) -> None:
        rng = np.random.default_rng(7)
        self.images = rng.integers(0, 256, (size, 3, 32, 32), dtype=np.uint8)
        self.vectors = rng.standard_normal((size, 5)).astype(">f4")

    def __getitem__(self, index: int):
        return {
            "image": self.images[index],
            "meta": {"vector": self.vectors[index], "scale": float(index) / 3},
            "name": f"sample-{index}",
        }

    def __len__(self) -> int:
        return len(self.images)


def _to_numpy(batch):
    import torch

    if isinstance(batch, torch.Tensor):
        assert batch.is_cuda, f"a leaf stayed on {batch.device}"
        return batch.cpu().numpy()
    if isinstance(batch, dict):
        return {key: _to_numpy(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_numpy(value) for value in batch)
    return batch


def _native(batch):
    """Byte order made native, as the adapter does (torch has no big-endian dtypes)."""
    return map_arrays(batch, lambda array: array.astype(array.dtype.newbyteorder("=")))


@pytest.mark.parametrize("preload", [False, True])
@pytest.mark.parametrize("num_workers,start", [(0, None), (2, "fork"), (2, "spawn")])
def test_gpu_batches_equal_the_numpy_batches(no_leaks, num_workers, start, preload):
    """Every array leaf arrives on the GPU with the values, dtypes and structure NumPy gets;
    forked workers are fine although this process initialised CUDA before forking them."""
    dataset = Records()

    def loader(**options):
        return DataLoader(dataset, RandomSampler(dataset, batch_size=8, seed=3), seed=5, **options)

    expected = [_native(batch) for batch in collect(loader())]
    got = [
        _to_numpy(batch)
        for batch in loader(
            device="cuda:0", preload=preload, num_workers=num_workers, multiprocessing_context=start
        )
    ]
    assert len(got) == len(expected) == 5
    for k, (a, b) in enumerate(zip(got, expected)):
        assert_same(a, b, f"batch {k}")


def _busy(torch, rounds: int = 6):
    """Queue a few milliseconds of work on the current stream, so that anything not ordered
    after it (or before it) would race with it."""
    a = torch.randn(2048, 2048, device="cuda:0")
    for _ in range(rounds):
        a = a @ a
        a = a / a.norm()
    return a


def test_held_gpu_batches_keep_their_values_while_the_loader_runs_on(no_leaks):
    """The consumer keeps every batch while its stream is kept busy; the caching allocator
    must not hand a held batch's memory to a later copy (``record_stream``)."""
    import torch

    rows = 64
    dataset = ArrayDataset(np.arange(rows * 256 * 1024, dtype=np.int32).reshape(rows, -1))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), device="cuda:0", preload=True,
                        preload_depth=3, num_workers=2)
    held = []
    for (x,) in loader:
        _busy(torch)
        held.append(x)
        del x
    torch.cuda.synchronize()
    assert len(held) == rows // 2
    for k, x in enumerate(held):
        first = k * 2 * 256 * 1024
        assert int(x[0, 0]) == first and int(x[-1, -1]) == first + 2 * 256 * 1024 - 1
        expected = torch.arange(first, first + x.numel(), dtype=torch.int32, device="cuda:0")
        assert torch.equal(x.reshape(-1), expected), f"batch {k} was overwritten"


def test_a_consumer_on_its_own_stream_reads_only_finished_copies(no_leaks):
    """Iterating inside ``torch.cuda.stream(s)``: the copy's event is waited on by ``s``,
    the stream the consumer's kernels actually run on."""
    import torch

    dataset = ArrayDataset(np.arange(16 * 4 * 1024 * 1024, dtype=np.float32).reshape(16, -1))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=2), device="cuda:0", preload=True,
                        pin_memory=True)
    stream = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(stream):
        for (x,) in loader:
            _busy(torch, 2)
            sums.append(x.double().sum())
    torch.cuda.synchronize()
    values = np.arange(16 * 4 * 1024 * 1024, dtype=np.float64).reshape(8, -1).sum(axis=1)
    assert [float(s) for s in sums] == values.tolist()


def test_pinned_cpu_tensors():
    import torch

    dataset = ArrayDataset(np.arange(24, dtype=np.float32).reshape(12, 2))
    for preload in (False, True):
        batches = list(DataLoader(dataset, SequentialSampler(dataset, batch_size=4), framework="torch",
                                  pin_memory=True, preload=preload))
        assert all(x.is_pinned() and x.device.type == "cpu" for (x,) in batches)
        assert torch.equal(batches[1][0], torch.arange(8, 16, dtype=torch.float32).reshape(4, 2))


def test_closing_early_frees_the_gpu_memory(no_leaks):
    """Batches copied ahead but never handed out are freed with the iterator."""
    import torch

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    dataset = ArrayDataset(np.ones((64, 1024 * 1024), np.float32))
    iterator = iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=4), device="cuda:0", preload=True,
                               preload_depth=4, num_workers=2))
    (x,) = next(iterator)
    assert torch.cuda.memory_allocated() - before >= x.numel() * 4
    del x
    iterator.close()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before


def test_seeded_gpu_loader_repeats_with_torch_draws_in_forked_workers(no_leaks):
    """torch is imported and CUDA initialised here; workers seed torch's CPU generator only
    (seeding CUDA in a forked child would fail), and draws repeat for 0 and 2 workers."""
    import torch

    class Noisy(Dataset):
        def __getitem__(self, index):
            return torch.rand(3).numpy() + index

        def __len__(self):
            return 12

    def draws(num_workers):
        loader = DataLoader(Noisy(), SequentialSampler(Noisy(), batch_size=4), device="cuda:0", seed=11,
                            num_workers=num_workers, multiprocessing_context="fork")
        return [x.cpu().numpy() for x in loader]

    serial, parallel = draws(0), draws(2)
    assert len(serial) == 3
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(serial[0][0] - 0, serial[0][1] - 1), "every sample drew the same numbers"


def test_staging_copies_stay_off_torchs_thread_pool(monkeypatch):
    """The copy into pinned memory is NumPy's: torch's (``pin_memory()``, ``copy_``) runs on
    its OpenMP pool, whose spinning threads took most of the machine's cores from the workers."""
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("the adapter called torch's own copy into pinned memory")

    monkeypatch.setattr(torch.Tensor, "pin_memory", refuse)
    monkeypatch.setattr(torch.Tensor, "copy_", refuse)
    dataset = ArrayDataset(np.arange(64, dtype=">i8").reshape(16, 4))
    for options in ({"device": "cuda:0"}, {"framework": "torch", "pin_memory": True}):
        (x,) = next(iter(DataLoader(dataset, SequentialSampler(dataset, batch_size=8), **options)))
        assert x.dtype == torch.int64 and x.cpu().reshape(-1).tolist() == list(range(32))
