"""The transform contract: ``apply(sample)`` and ``apply_batch(samples)``."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .._validate import check_apply_or_function
from ..errors import ArgumentValueError

if TYPE_CHECKING:
    from typing_extensions import Self


class Transform(ABC):
    """Turns one sample into another.

    ``apply_batch`` maps ``apply`` over the samples of one batch; override it
    when a whole batch can be processed faster at once.
    """

    @abstractmethod
    def apply(self, input: Any) -> Any: ...

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        return [self.apply(sample) for sample in inputs]

    def __repr__(self) -> str:
        return type(self).__name__  # as MegEngine's: the class name


class PseudoTransform(Transform):
    """The identity transform (the default)."""

    def apply(self, input: Any) -> Any:
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        return list(inputs)


class _FunctionTransform(Transform):
    """A plain function of one sample as a transform (``transform=fn``, torchvision style)."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def apply(self, input: Any) -> Any:
        return self.function(input)

    def __repr__(self) -> str:
        return f"FunctionTransform({self.function!r})"


def as_transform(value: Any, name: str = "transform") -> Transform:
    """A Transform as it is, a plain function of one sample wrapped, None the identity; anything
    else (a class given for an instance, say) a clear error naming ``name``."""
    if value is None:
        return PseudoTransform()
    transform: Transform = check_apply_or_function(name, value, "Transform", _FunctionTransform)
    return transform


class BatchTransform(Transform):
    """A transform of whole collated batches, run in the consumer's process after preload.

    ``apply(batch)`` gets each batch as the loader hands it out (tensors on
    the device when preloading to a GPU), so augmentation can run there. It
    runs the same way whatever ``num_workers`` is, and its exceptions
    propagate unwrapped. Put it last in a :class:`Compose`, or pass it as the
    loader's ``transform``. ``CudaTransform`` is MegEngine's name for it.
    Instantiated as it is, it is the identity, as MegEngine's is; subclasses
    override :meth:`apply`.
    """

    def apply(self, input: Any) -> Any:
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        return [self.apply(batch) for batch in inputs]


CudaTransform = BatchTransform


def split_batch_transforms(transform: Any) -> tuple[Any, list[Any]]:
    """(the per-sample part, the trailing batch transforms) of a loader's ``transform``.

    Batch transforms that end a :class:`Compose` (of any kind, or a Compose
    nested last in one) are lifted out; the rest is rebuilt with
    :meth:`Compose.with_transforms`, so it keeps the Compose's kind and settings.
    """
    if isinstance(transform, BatchTransform):
        return PseudoTransform(), [transform]
    part, lifted = _split(transform, "")
    return (transform.with_transforms([]) if part is None else part), lifted


def _split(transform: Any, where: str) -> tuple[Any, list[Any]]:
    """Like :func:`split_batch_transforms` for the transform at path ``where`` ("" for the
    loader's own); a part of None means all of it was lifted."""
    if isinstance(transform, BatchTransform):
        return None, [transform]
    if not isinstance(transform, Compose):
        return transform, []
    found = [_first_batch(child, _child(where, p)) for p, child in enumerate(transform.transforms)]
    for position, path in enumerate(found):
        if path is not None:
            transform._check_batch_child(position, path)
    kept = list(transform.transforms)
    lifted: list[Any] = []
    while kept:
        part, tail = _split(kept[-1], _child(where, len(kept) - 1))
        lifted[:0] = tail
        if part is not None:
            kept[-1] = part
            break
        kept.pop()
    for path in found[: len(kept) - 1] if kept else ():
        if path is not None:
            raise ArgumentValueError(
                f"{path} is a BatchTransform followed by per-sample transforms; "
                "batch transforms run after collation, so they must come last in the Compose."
            )
    if not lifted:
        return transform, []
    return (transform.with_transforms(kept) if kept else None), lifted


def _first_batch(transform: Any, where: str) -> str | None:
    """The path of the first BatchTransform in ``transform`` (nested Composes too), or None."""
    if isinstance(transform, BatchTransform):
        return where
    if isinstance(transform, Compose):
        for position, child in enumerate(transform.transforms):
            found = _first_batch(child, _child(where, position))
            if found is not None:
                return found
    return None


def _child(where: str, position: int) -> str:
    """The path of a Compose's child, e.g. ``transforms[2].transforms[0]``."""
    return f"{where}.transforms[{position}]" if where else f"transforms[{position}]"


class Compose(Transform):
    """Applies ``transforms`` in order.

    Subclasses (``dataloader.transform.vision.Compose``) add settings;
    :meth:`with_transforms` keeps them.
    """

    def __init__(self, transforms: Iterable[Transform] = ()) -> None:
        self.transforms = _checked_children(transforms)

    def with_transforms(self, transforms: Iterable[Any]) -> Self:
        """A copy of this Compose, with the same settings, that applies ``transforms`` instead."""
        clone = copy.copy(self)
        clone.transforms = _checked_children(transforms)
        return clone

    def _check_batch_child(self, position: int, path: str) -> None:
        """Raise if this Compose's settings forbid lifting batch transforms out of it.

        Called for each child that holds a BatchTransform (the first one at
        ``path``, such as ``transforms[2]``); the base Compose allows it everywhere.
        """

    def apply(self, input: Any) -> Any:
        for transform in self.transforms:
            input = transform.apply(input)
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        samples = list(inputs)
        for transform in self.transforms:
            apply_batch = getattr(transform, "apply_batch", None)
            if apply_batch is None:
                samples = [transform.apply(sample) for sample in samples]
            else:
                samples = list(apply_batch(samples))
        return samples


def _checked_children(transforms: Iterable[Any]) -> list[Any]:
    """The transforms of a Compose, plain functions among them wrapped (as torchvision takes them)."""
    return [
        check_apply_or_function(f"transforms[{position}]", t, "Transform", _FunctionTransform)
        for position, t in enumerate(transforms)
    ]
