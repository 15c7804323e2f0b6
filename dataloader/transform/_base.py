"""The transform contract: ``apply(sample)`` and ``apply_batch(samples)``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable, Sequence

from .._validate import check_has_apply


class Transform(ABC):
    """Turns one sample into another.

    ``apply_batch`` maps ``apply`` over the samples of one batch; override it
    when a whole batch can be processed faster at once.
    """

    @abstractmethod
    def apply(self, input: Any) -> Any: ...

    def apply_batch(self, inputs: Sequence[Any]) -> list:
        return [self.apply(sample) for sample in inputs]


class PseudoTransform(Transform):
    """The identity transform (the default)."""

    def apply(self, input: Any) -> Any:
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list:
        return list(inputs)


class Compose(Transform):
    """Applies ``transforms`` in order."""

    def __init__(self, transforms: Iterable[Transform] = ()) -> None:
        self.transforms = list(transforms)
        for position, transform in enumerate(self.transforms):
            check_has_apply(f"transforms[{position}]", transform, "Transform")

    def apply(self, input: Any) -> Any:
        for transform in self.transforms:
            input = transform.apply(input)
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list:
        samples = list(inputs)
        for transform in self.transforms:
            apply_batch = getattr(transform, "apply_batch", None)
            if apply_batch is None:
                samples = [transform.apply(sample) for sample in samples]
            else:
                samples = list(apply_batch(samples))
        return samples
