"""What the executors and the pool need to know of one loader: :class:`PipelineSpec`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._device.adapters import Adapter
from .._options import LoaderOptions
from .._stages.bad_samples import ErrorPolicy


@dataclass(frozen=True)
class PipelineSpec:
    """The building blocks and options of one loader, checked and resolved."""

    dataset: Any
    sampler: Any
    # The per-sample part of the user's transform; trailing batch transforms are split off.
    transform: Any
    collator: Any
    options: LoaderOptions
    # The seed batches are derived from: the user's, or one drawn per loader,
    # so unseeded workers still never repeat each other's augmentations.
    base_seed: int
    adapter: Adapter
    batch_transforms: list = field(default_factory=list)

    def error_policy(self) -> ErrorPolicy:
        """What becomes of a failed sample; substitutes are drawn from the loader's seed."""
        return ErrorPolicy(self.options.on_error, self.base_seed)
