"""Which adapter turns NumPy batches into the consumer's arrays, chosen and checked up front.

An adapter has ``convert(batch)`` (runs in the preload thread, or inline
without preload) and ``ready(batch)`` (runs in the consumer's thread just
before the batch is handed out; for CUDA it makes the consumer's stream wait
for the copy).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from .._validate import check_choice, warn_argument
from ..errors import ArgumentTypeError, ArgumentValueError

FRAMEWORKS = ("numpy", "torch", "megengine")


class Adapter(Protocol):
    name: str

    def convert(self, batch: Any) -> Any: ...

    def ready(self, batch: Any) -> Any: ...


class NumpyAdapter:
    """Arrays stay NumPy; only the device string "cpu" is allowed."""

    name = "numpy"

    def convert(self, batch: Any) -> Any:
        return batch

    def ready(self, batch: Any) -> Any:
        return batch


def resolve_adapter(device: Any, framework: str | None, pin_memory: bool) -> Adapter:
    """The adapter for ``device``/``framework``; raises if that device cannot be used here."""
    if framework is not None:
        check_choice("framework", framework, FRAMEWORKS)
    framework = framework or _infer_framework(device)
    if framework == "numpy":
        if device not in (None, "cpu"):
            raise ArgumentValueError(
                f"`device={device!r}` needs a framework; NumPy arrays live on the CPU. "
                "Pass framework='torch' or framework='megengine'."
            )
        if pin_memory:  # as PyTorch does without an accelerator: say so, and go on
            warn_argument(
                "`pin_memory=True` is ignored: pinned memory needs framework='torch' and a CUDA "
                "device, and these batches are NumPy arrays. Drop pin_memory, or pass "
                "framework='torch' on a machine with a GPU.",
            )
        return NumpyAdapter()
    module = _import_adapter(framework)
    return module.make_adapter(device, pin_memory)


def _infer_framework(device: Any) -> str:
    if device is None or device == "cpu":
        return "numpy"
    if type(device).__module__.startswith("torch"):
        return "torch"
    if isinstance(device, str):
        if device.startswith("cuda"):
            return "torch"
        if device.startswith(("gpu", "xpu", "cpu")) or device == "cpux":
            return "megengine"
    error = ArgumentValueError if isinstance(device, str) else ArgumentTypeError
    raise error(
        f"`device` must be 'cpu', a CUDA device such as 'cuda:0', a torch.device or a MegEngine "
        f"device string such as 'gpu0'; got {device!r}."
    )


def _import_adapter(framework: str) -> Any:
    return importlib.import_module(f"{__package__}.{framework}_adapter")
