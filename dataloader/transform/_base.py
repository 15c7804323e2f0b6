"""The transform contract: ``apply(sample)`` and ``apply_batch(samples)``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable, Sequence

from .._validate import check_has_apply
from ..errors import ArgumentValueError


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


class BatchTransform(Transform):
    """A transform of whole collated batches, run in the consumer's process after preload.

    ``apply(batch)`` gets each batch as the loader hands it out (tensors on
    the device when preloading to a GPU), so augmentation can run there. It
    runs the same way whatever ``num_workers`` is, and its exceptions
    propagate unwrapped. Put it last in a :class:`Compose`, or pass it as the
    loader's ``transform``. ``CudaTransform`` is MegEngine's name for it.
    """

    def apply_batch(self, inputs: Sequence[Any]) -> list:
        return [self.apply(batch) for batch in inputs]


CudaTransform = BatchTransform


def split_batch_transforms(transform: Any) -> tuple[Any, list]:
    """(the per-sample part, the trailing batch transforms) of a loader's ``transform``."""
    if isinstance(transform, BatchTransform):
        return PseudoTransform(), [transform]
    if not isinstance(transform, Compose):
        return transform, []
    children = transform.transforms
    cut = len(children)
    while cut and isinstance(children[cut - 1], BatchTransform):
        cut -= 1
    for position, child in enumerate(children[:cut]):
        if isinstance(child, BatchTransform):
            raise ArgumentValueError(
                f"transforms[{position}] is a BatchTransform followed by per-sample transforms; "
                "batch transforms run after collation, so they must come last in the Compose."
            )
    if cut == len(children):
        return transform, []
    return Compose(children[:cut]), list(children[cut:])


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
