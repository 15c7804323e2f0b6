"""The one-time hint that a PyTorch dataset is about to yield NumPy batches.

``dataloader.DataLoader`` hands out NumPy arrays unless ``framework=`` says otherwise; a
PyTorch script that only swapped its import then fails deep inside the model. When the
dataset is a ``torch.utils.data.Dataset`` and no framework was chosen, a
:class:`~dataloader.errors.FrameworkWarning` says so, once per process. torch is never
imported here: a dataset can only be torch's if the program imported torch already.
"""

from __future__ import annotations

import sys
from typing import Any

from ._validate import warn_argument
from .errors import FrameworkWarning

_TORCH_DATASET = ("torch.utils.data.dataset", "Dataset")  # where torch's base class lives
_shown = False  # once per process: a hint, not a nag


def hint_torch_framework(dataset: Any, framework: str | None) -> None:
    """Warn, the first time only, if ``dataset`` is torch's and ``framework`` was not given."""
    global _shown
    if _shown or framework is not None or "torch" not in sys.modules:
        return
    if not any((cls.__module__, cls.__qualname__) == _TORCH_DATASET for cls in type(dataset).__mro__):
        return
    _shown = True
    warn_argument(
        "this DataLoader was given a torch.utils.data.Dataset and no `framework`, so its batches "
        "are NumPy arrays, not tensors. Pass framework=\"torch\", or use "
        "dataloader.torch.DataLoader, which takes torch.utils.data.DataLoader's arguments and "
        "hands out tensors.",
        FrameworkWarning,
    )
