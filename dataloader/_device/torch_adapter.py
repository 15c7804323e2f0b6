"""PyTorch: zero-copy CPU tensors; pinned staging and a side-stream copy for CUDA.

The copy into pinned memory is NumPy's, in the calling thread. PyTorch's own
(``Tensor.pin_memory()``, ``Tensor.copy_``) runs on its intra-op OpenMP pool,
whose threads spin after every parallel region: on a 16-core GPU machine they
took 12-15 cores from the workers and halved the loader's rate (measured with
benchmarks/gpu.py; docs/performance.md, "Feeding a GPU").

Imported only when a loader asks for torch.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .._validate import warn_argument
from ..errors import ArgumentValueError
from .structure import leaves, map_arrays

try:
    import torch
except ImportError as error:  # pragma: no cover - exercised where torch is absent
    raise ArgumentValueError(
        "framework='torch' (or a CUDA device) needs PyTorch: pip install 'dataloader[torch]'."
    ) from error


def make_adapter(device: Any, pin_memory: bool) -> "TorchAdapter":
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ArgumentValueError(
            f"{device} requested but torch.cuda.is_available() is False. Use device='cpu', or "
            "install a CUDA build of PyTorch on a machine with a GPU."
        )
    if pin_memory and not torch.cuda.is_available():  # PyTorch's loader warns and goes on too
        warn_argument(
            "`pin_memory=True` is ignored: torch.cuda.is_available() is False, and pinned memory "
            "only helps copies to a GPU.",
        )
        pin_memory = False
    return TorchAdapter(device, pin_memory or device.type == "cuda")


class TorchAdapter:
    """Converts array leaves to tensors on ``device``.

    For CUDA the copy is ``non_blocking`` on a side stream from pinned memory;
    :meth:`ready` makes the consumer's current stream wait on the copy's event
    and records the tensors on that stream, so the caching allocator never
    reuses their memory while the consumer may still read them.
    """

    name = "torch"

    def __init__(self, device: "torch.device", pin_memory: bool) -> None:
        self.device = device
        self.pin_memory = pin_memory
        self._stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def convert(self, batch: Any) -> Any:
        if self._stream is None:
            return map_arrays(batch, self._to_cpu_tensor)
        with torch.cuda.stream(self._stream):
            moved = map_arrays(batch, self._to_cuda)
            event = torch.cuda.Event()
            event.record(self._stream)
        return _Pending(moved, event)

    def ready(self, batch: Any) -> Any:
        if not isinstance(batch, _Pending):
            return batch
        current = torch.cuda.current_stream(self.device)
        current.wait_event(batch.event)
        for leaf in leaves(batch.batch):
            if isinstance(leaf, torch.Tensor):
                leaf.record_stream(current)
        return batch.batch

    def _to_cpu_tensor(self, array: np.ndarray) -> Any:
        if self.pin_memory:
            return _pinned_copy(array)
        return torch.from_numpy(_torch_compatible(array))

    def _to_cuda(self, array: np.ndarray) -> Any:
        # A CUDA adapter always pins (make_adapter): only a pinned source copies asynchronously.
        return _pinned_copy(array).to(self.device, non_blocking=True)


class _Pending:
    """A batch whose copy may still be running on the side stream."""

    __slots__ = ("batch", "event")

    def __init__(self, batch: Any, event: Any) -> None:
        self.batch = batch
        self.event = event


def _pinned_copy(array: np.ndarray) -> Any:
    """A new pinned tensor with ``array``'s values in native byte order, copied by NumPy."""
    pinned = torch.empty(array.shape, dtype=_torch_dtype(array.dtype.newbyteorder("=")), pin_memory=True)
    np.copyto(pinned.numpy(), array, casting="equiv")
    return pinned


@functools.lru_cache(maxsize=None)
def _torch_dtype(native: np.dtype) -> Any:
    """torch's dtype for a native-order NumPy dtype (torch's own mapping, read once per dtype)."""
    return torch.from_numpy(np.empty(0, native)).dtype


def _torch_compatible(array: np.ndarray) -> np.ndarray:
    if not array.flags.writeable:  # torch warns on read-only memory
        array = array.copy()
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("="))
    return array
