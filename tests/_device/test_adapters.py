import importlib.util

import numpy as np
import pytest

from dataloader import DataLoader, ArrayDataset, SequentialSampler
from dataloader._device.adapters import NumpyAdapter, resolve_adapter
from dataloader.errors import ArgumentTypeError, ArgumentValueError

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_MEGENGINE = importlib.util.find_spec("megengine") is not None


def test_default_is_numpy():
    assert isinstance(resolve_adapter(None, None, False), NumpyAdapter)
    assert isinstance(resolve_adapter("cpu", None, False), NumpyAdapter)


def test_bad_framework_and_device_are_named():
    with pytest.raises(ArgumentValueError, match="`framework`"):
        resolve_adapter(None, "jax", False)
    with pytest.raises(ArgumentTypeError, match="`device`"):
        resolve_adapter(42, None, False)
    with pytest.raises(ArgumentValueError, match="needs a framework"):
        resolve_adapter("tpu0", "numpy", False)


def test_pin_memory_without_a_gpu_warns_at_the_callers_line_and_is_ignored():
    # As PyTorch's loader does without an accelerator: a warning, not an error.
    with pytest.warns(UserWarning, match=r"`pin_memory=True` is ignored") as caught:
        loader = DataLoader(ArrayDataset(np.arange(4)), pin_memory=True)
    assert caught[0].filename == __file__
    assert [b[0].tolist() for b in loader] == [[0], [1], [2], [3]]
    if HAS_TORCH:
        import torch

        if not torch.cuda.is_available():
            with pytest.warns(UserWarning, match=r"torch.cuda.is_available\(\) is False"):
                batches = list(DataLoader(ArrayDataset(np.arange(4)), framework="torch", pin_memory=True))
            assert all(isinstance(b[0], torch.Tensor) and not b[0].is_pinned() for b in batches)


@pytest.mark.skipif(HAS_TORCH, reason="checks the message shown when torch is missing")
def test_missing_torch_is_a_clear_error():
    with pytest.raises(ArgumentValueError, match="PyTorch"):
        DataLoader(ArrayDataset(np.arange(4)), framework="torch")


@pytest.mark.skipif(HAS_MEGENGINE, reason="checks the message shown when megengine is missing")
def test_missing_megengine_is_a_clear_error():
    with pytest.raises(ArgumentValueError, match="Python <= 3.10"):
        DataLoader(ArrayDataset(np.arange(4)), framework="megengine")


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("preload", [False, True])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_torch_cpu_tensors_keep_structure(preload, num_workers):
    import torch

    dataset = ArrayDataset(np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6))
    loader = DataLoader(
        dataset, SequentialSampler(dataset, batch_size=4), num_workers=num_workers,
        framework="torch", preload=preload,
    )
    batches = list(loader)
    assert type(batches[0]) is tuple and isinstance(batches[0][0], torch.Tensor)
    assert batches[0][0].dtype == torch.float32 and batches[1][1].tolist() == [4, 5]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_cuda_without_a_gpu_fails_at_construction():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present; the error path cannot be reached")
    with pytest.raises(ArgumentValueError, match=r"cuda:0 requested but torch.cuda.is_available\(\) is False"):
        DataLoader(ArrayDataset(np.arange(4)), device="cuda:0")


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_cuda_copy_is_synchronised_with_the_consumer():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device on this machine; the GPU path runs where one exists")
    dataset = ArrayDataset(np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=16), device="cuda:0",
                        preload=True, num_workers=2, pin_memory=True)
    for k, (x,) in enumerate(loader):
        assert x.is_cuda
        expected = torch.arange(16 * 1024 * k, 16 * 1024 * (k + 1), dtype=torch.float32, device="cuda:0")
        assert torch.equal(x.reshape(-1), expected)


@pytest.mark.skipif(not HAS_MEGENGINE, reason="megengine is not installed (wheels exist for Python <= 3.10 only)")
@pytest.mark.parametrize("preload", [False, True])
def test_megengine_tensors(preload):
    import megengine

    dataset = ArrayDataset(np.arange(8, dtype=np.float32), np.array(["a"] * 8))
    loader = DataLoader(dataset, SequentialSampler(dataset, batch_size=4), framework="megengine", preload=preload)
    x, names = next(iter(loader))
    assert isinstance(x, megengine.Tensor) and x.numpy().tolist() == [0, 1, 2, 3]
    assert names == ["a"] * 4
