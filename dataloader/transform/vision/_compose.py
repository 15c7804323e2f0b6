"""``Compose`` for vision transforms: a sample layout shared by its children.

It is a :class:`dataloader.transform.Compose` (so whatever handles a Compose,
such as the loader lifting out trailing batch transforms, handles this one)
and a :class:`VisionTransform` (so a containing vision Compose hands it its
``order``).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..._validate import check_bool
from ...errors import ArgumentTypeError, ArgumentValueError
from ...rng import batch_rng
from .._base import Compose as BaseCompose
from ._args import is_int, is_sequence
from ._base import VisionTransform, is_passthrough


class Compose(BaseCompose, VisionTransform):
    """Apply ``transforms`` one after another.

    Args:
        transforms: the transforms (vision ones or any object with ``apply``).
        batch_compose: if True, ``apply_batch`` runs each transform over the
            whole batch before the next one; otherwise each sample goes through
            all transforms in turn.
        shuffle_indices: groups of 1-based positions in ``transforms`` whose
            order is shuffled per sample, e.g. ``[(1, 3), (2, 4)]``. Not allowed
            with ``batch_compose``.
        order: the sample layout. When given, every vision child (nested
            Composes included) uses it at apply time, and so does a containing
            Compose's order; the children's own ``order`` attributes are never
            changed. When no Compose on the way gives one, each child uses its own.

    Output: whatever the last transform returns.

    Trailing :class:`~dataloader.transform.BatchTransform` children are lifted
    out by the loader, as from the base ``Compose``; the per-sample rest keeps
    ``batch_compose``, ``shuffle_indices`` and ``order``.
    """

    def __init__(
        self,
        transforms: Iterable[Any] = (),
        batch_compose: bool = False,
        shuffle_indices: Sequence[Sequence[int]] | None = None,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        VisionTransform.__init__(self, order)
        BaseCompose.__init__(self, transforms)
        self.batch_compose = check_bool("batch_compose", batch_compose)
        if batch_compose and shuffle_indices is not None:
            raise ArgumentValueError(
                "`shuffle_indices` cannot be used with `batch_compose=True`: a batch-wide pass "
                "applies each transform to every sample in one fixed order."
            )
        self.shuffle_indices = _check_groups(shuffle_indices, len(self.transforms))
        self._random = self.shuffle_indices is not None
        self._given_order = None if order is None else self.order
        if self._given_order is not None:
            self._check_children(self._given_order)

    def with_transforms(self, transforms: Iterable[Any]) -> Compose:
        """A copy with the same ``batch_compose``, ``shuffle_indices`` and ``order``."""
        transforms = list(transforms)
        for group in self.shuffle_indices or ():
            if any(position >= len(transforms) for position in group):
                raise ArgumentValueError(
                    f"`shuffle_indices` group {tuple(p + 1 for p in group)} refers to position "
                    f"{max(group) + 1}, but the new Compose has {len(transforms)} transforms; "
                    "build a new Compose with groups that fit."
                )
        clone = super().with_transforms(transforms)
        if self._given_order is not None:
            clone._check_children(self._given_order)
        return clone

    def _check_batch_child(self, position: int, path: str) -> None:
        for group in self.shuffle_indices or ():
            if position in group:
                raise ArgumentValueError(
                    f"{path} is a BatchTransform in the `shuffle_indices` group "
                    f"{tuple(p + 1 for p in group)}; a shuffled transform changes place among the "
                    "per-sample transforms from sample to sample, but batch transforms run after "
                    "collation. Take it out of the group and put it last in the Compose."
                )

    def _check_children(self, order: tuple[str, ...]) -> None:
        for transform in self.transforms:
            if isinstance(transform, Compose):
                transform._check_children(order)
            elif isinstance(transform, VisionTransform):
                type(transform)._check_order(order)
            elif getattr(transform, "moves_image_only", False):
                _check_image_only(transform, order)

    def apply(self, input: Any) -> Any:
        return self._apply_in_order(input, self._given_order)

    def _apply_in_order(self, input: Any, order: tuple[str, ...] | None) -> Any:
        order = order if order is not None else self._given_order
        rng = batch_rng() if self._random else None
        for transform in self._sequence(rng):
            input = _apply_child(transform, input, order)
        return input

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        if not self.batch_compose:
            return [self.apply(sample) for sample in inputs]
        samples = list(inputs)
        order = self._given_order
        for transform in self.transforms:
            if order is not None and isinstance(transform, VisionTransform):
                samples = [transform._apply_in_order(sample, order) for sample in samples]
            elif callable(getattr(transform, "apply_batch", None)):
                samples = list(transform.apply_batch(samples))
            else:
                samples = [transform.apply(sample) for sample in samples]
        return samples

    def _sequence(self, rng: Any) -> list[Any]:
        # rng: a Generator when shuffle_indices is set, else None
        if self.shuffle_indices is None:
            return self.transforms
        positions = list(range(len(self.transforms)))
        for group in self.shuffle_indices:
            for slot, source in zip(group, rng.permutation(group)):
                positions[slot] = int(source)
        return [self.transforms[i] for i in positions]


def _check_image_only(transform: Any, order: tuple[str, ...]) -> None:
    """A transform that crops or resizes the image alone refuses a layout with fields that would
    have to move with it (boxes, masks, points) rather than leave them where they were."""
    moving = [name for name in order if name != "image" and not is_passthrough(name)]
    if moving:
        name = type(transform).__name__
        raise ArgumentValueError(
            f"{name} crops and resizes the image only, but this Compose's order also names "
            f"{moving}, which would be left in the uncropped image's coordinates. Decode with "
            "DecodeImage and crop with RandomResizedCrop or Resize, which move every field."
        )


def _apply_child(transform: Any, sample: Any, order: tuple[str, ...] | None) -> Any:
    if order is not None and isinstance(transform, VisionTransform):
        return transform._apply_in_order(sample, order)
    return transform.apply(sample)


def _check_groups(groups: Any, count: int) -> tuple[tuple[int, ...], ...] | None:
    """1-based, disjoint groups of positions -> 0-based tuples."""
    if groups is None:
        return None
    if not is_sequence(groups) or not all(is_sequence(g) for g in groups):
        raise ArgumentTypeError(
            f"`shuffle_indices` must be a sequence of sequences of positions, e.g. [(1, 2)]; "
            f"got {groups!r}."
        )
    seen: set[int] = set()
    for group in groups:
        for position in group:
            if not is_int(position) or not 1 <= position <= count:
                raise ArgumentValueError(
                    f"`shuffle_indices` holds 1-based positions in [1, {count}]; got {position!r} "
                    f"in {groups!r}."
                )
            if position in seen:
                raise ArgumentValueError(
                    f"`shuffle_indices` groups must not share positions; {position} appears twice "
                    f"in {groups!r}."
                )
            seen.add(position)
    return tuple(tuple(int(p) - 1 for p in group) for group in groups)
