"""MegEngine: ``megengine.Tensor(array, device=...)``. Imported only when asked for.

MegEngine publishes wheels for Python <= 3.10 (and numpy < 2) only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import warn_argument
from ..errors import ArgumentValueError
from .structure import map_arrays

try:
    import megengine
except ImportError as error:  # pragma: no cover - exercised where megengine is absent
    raise ArgumentValueError(
        "framework='megengine' needs MegEngine, which publishes wheels for Python <= 3.10 only: "
        "pip install megengine 'numpy<2' in a Python 3.10 environment."
    ) from error


def make_adapter(device: Any, pin_memory: bool) -> "MegEngineAdapter":
    if pin_memory:
        warn_argument("`pin_memory=True` is ignored: it is a PyTorch option; MegEngine does not use it.")
    if device is not None and device != "cpu" and str(device).startswith("gpu"):
        if not megengine.is_cuda_available():
            raise ArgumentValueError(
                f"{device} requested but megengine.is_cuda_available() is False. Use device='cpux'."
            )
    return MegEngineAdapter(None if device in (None, "cpu") else device)


class MegEngineAdapter:
    """Converts array leaves to ``megengine.Tensor`` on ``device`` (None: the default).

    MegEngine's runtime state is per thread (a tensor made in another thread
    fails an internal assertion), so the conversion runs in ``ready``, in the
    consumer's thread; with preload the batch itself is still made ahead.
    """

    name = "megengine"

    def __init__(self, device: Any) -> None:
        self.device = device

    def convert(self, batch: Any) -> Any:
        return batch

    def ready(self, batch: Any) -> Any:
        return map_arrays(batch, self._to_tensor)

    def _to_tensor(self, array: np.ndarray) -> Any:
        return megengine.Tensor(array, device=self.device)
