"""A transform that draws from torch's generator (imports torch: only load it when torch exists).

Importing this module is what makes torch part of a spawn/forkserver worker,
so the loader seeds torch there too (it seeds torch only once imported).
"""

from __future__ import annotations

import numpy as np
import torch

from dataloader.transform import Transform


class TorchAugment(Transform):
    """Adds ``torch.rand(4)`` as a NumPy array."""

    def apply(self, sample: dict) -> dict:
        return {**sample, "torch": torch.rand(4).numpy().astype(np.float64)}
