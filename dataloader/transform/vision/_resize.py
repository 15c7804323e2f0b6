"""Transforms that resize: fixed, shortest-edge, random scale, random crop-and-resize.

Images are resized with OpenCV, or its NumPy twin where OpenCV is missing
(``interpolation``: one ``INTER_*`` flag,
or a sequence of them, one drawn per sample); masks with nearest neighbour
sampled at pixel centres, which keeps them aligned with the coordinates and
works for any mask dtype.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...errors import ArgumentTypeError, ArgumentValueError
from . import _args
from ._geometry import AxisAlignedTransform, Plan, image_size, pick
from ._numpy_resize import INTER_LINEAR


class _Resizing(AxisAlignedTransform):
    def __init__(self, interpolation: Any, order: Any) -> None:
        super().__init__(order)
        self._interpolations = _args.interpolation("interpolation", interpolation)
        self.interpolation = interpolation
        self._random = type(self)._random or len(self._interpolations) > 1

    def _plan(self, image: Any, rng: Any, height: int, width: int) -> Plan:
        return Plan(
            image.shape[0],
            image.shape[1],
            size=(height, width),
            interpolation=pick(self._interpolations, rng),
        )

    def plan_for_size(self, height: int, width: int, rng: Any) -> Plan:
        """The plan for an image of ``height`` x ``width``, drawn as ``_get_params`` draws it,
        without the pixels (a fused decode knows the size from the file's header)."""
        raise NotImplementedError(f"{type(self).__name__} plans from the image.")


class Resize(_Resizing):
    """Resize to a fixed size.

    Args:
        output_size: ``(height, width)``; or ``n``: the shorter side becomes ``n``
            and the other keeps the aspect ratio (rounded down).
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from per sample.
        order: see :class:`VisionTransform`.

    Image and mask: ``(height, width, C)``, dtype kept; unchanged (the same
    array) when already that size.
    """

    def __init__(
        self, output_size: Any, interpolation: Any = INTER_LINEAR, *, order: Sequence[str] | None = None
    ) -> None:
        super().__init__(interpolation, order)
        if _args.is_int(output_size):
            if output_size < 1:
                raise ArgumentValueError(f"`output_size` must be positive; got {output_size!r}.")
            self.output_size: Any = int(output_size)
        else:
            self.output_size = _args.size_pair("output_size", output_size)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        return self.plan_for_size(*image_size(image, self), rng)

    def plan_for_size(self, height: int, width: int, rng: Any) -> Plan:
        if not isinstance(self.output_size, int):
            size = self.output_size
        elif min(height, width) == self.output_size:
            return Plan(height, width)
        elif height < width:
            size = (self.output_size, int(self.output_size * width / height))
        else:
            size = (int(self.output_size * height / width), self.output_size)
        return Plan(height, width, size=size, interpolation=pick(self._interpolations, rng))


class ShortestEdgeResize(_Resizing):
    """Resize so that the shorter side is a random size, capping the longer side.

    Args:
        min_size: with ``sample_style="range"``, ``n`` or ``(low, high)``: the
            shorter side is drawn uniformly from the integers in ``[low, high]``;
            with ``"choice"``, a sequence of sizes to draw one from.
        max_size: the longer side never exceeds this.
        sample_style: ``"range"`` or ``"choice"``.
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from.
        order: see :class:`VisionTransform`.

    Image and mask: resized ``(H', W', C)``, dtype kept.
    """

    _random = True

    def __init__(
        self,
        min_size: Any,
        max_size: int,
        sample_style: str = "range",
        interpolation: Any = INTER_LINEAR,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(interpolation, order)
        if sample_style not in ("range", "choice"):
            raise ArgumentValueError(
                f"`sample_style` must be 'range' or 'choice'; got {sample_style!r}."
            )
        self.sample_style = sample_style
        sizes = (min_size,) * 2 if _args.is_int(min_size) else min_size
        if not _args.is_sequence(sizes) or not sizes or not all(_args.is_int(s) for s in sizes):
            raise ArgumentTypeError(
                f"`min_size` must be an integer or a sequence of integers; got {min_size!r}."
            )
        if min(sizes) < 1 or (sample_style == "range" and (len(sizes) != 2 or sizes[0] > sizes[1])):
            raise ArgumentValueError(
                "`min_size` must hold positive sizes, as a (low, high) pair with low <= high "
                f"when sample_style='range'; got {min_size!r}."
            )
        self.min_size = tuple(int(s) for s in sizes)
        if not _args.is_int(max_size) or max_size < 1:
            raise ArgumentValueError(f"`max_size` must be a positive integer; got {max_size!r}.")
        self.max_size = int(max_size)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        if self.sample_style == "range":
            size = int(rng.integers(self.min_size[0], self.min_size[1] + 1))
        else:
            size = self.min_size[int(rng.integers(len(self.min_size)))]
        scale = size / min(height, width)
        th, tw = height * scale, width * scale
        if max(th, tw) > self.max_size:
            cap = self.max_size / max(th, tw)
            th, tw = th * cap, tw * cap
        return self._plan(image, rng, max(1, int(round(th))), max(1, int(round(tw))))


class RandomResize(_Resizing):
    """Resize by a random factor drawn uniformly from ``scale_range``.

    Args:
        scale_range: ``(min, max)`` factors, ``0 < min <= max``.
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from.
        order: see :class:`VisionTransform`.

    Image and mask: ``(round(H * s), round(W * s), C)``, dtype kept.
    """

    _random = True

    def __init__(
        self, scale_range: Any, interpolation: Any = INTER_LINEAR, *, order: Sequence[str] | None = None
    ) -> None:
        super().__init__(interpolation, order)
        self.scale_range = _args.number_pair("scale_range", scale_range, low=0.0)
        if self.scale_range[0] <= 0:
            raise ArgumentValueError(f"`scale_range` must be positive; got {scale_range!r}.")

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        scale = rng.uniform(*self.scale_range)
        return self._plan(
            image, rng, max(1, int(round(height * scale))), max(1, int(round(width * scale)))
        )


class RandomResizedCrop(_Resizing):
    """Cut a window of random area and aspect ratio, then resize it to ``output_size``.

    Up to ten draws look for a window of ``scale_range`` times the image area
    whose width/height ratio is drawn log-uniformly from ``ratio_range``; if
    none fits, the largest central window with a ratio in range is used.

    Args:
        output_size: ``n`` or ``(height, width)``.
        scale_range: ``(min, max)`` fraction of the image area.
        ratio_range: ``(min, max)`` width / height.
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from.
        order: see :class:`VisionTransform`.

    Image and mask: ``(height, width, C)``, dtype kept.
    """

    _random = True

    def __init__(
        self,
        output_size: Any,
        scale_range: Any = (0.08, 1.0),
        ratio_range: Any = (3.0 / 4, 4.0 / 3),
        interpolation: Any = INTER_LINEAR,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(interpolation, order)
        self.output_size = _args.size_pair("output_size", output_size)
        self.scale_range = _args.number_pair("scale_range", scale_range, low=0.0)
        self.ratio_range = _args.number_pair("ratio_range", ratio_range, low=0.0)
        if self.scale_range[1] <= 0 or self.ratio_range[0] <= 0:
            raise ArgumentValueError(
                "`scale_range` needs max > 0 and `ratio_range` min > 0; "
                f"got {scale_range!r} and {ratio_range!r}."
            )

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        return self.plan_for_size(*image_size(image, self), rng)

    def plan_for_size(self, height: int, width: int, rng: Any) -> Plan:
        y, x, h, w = self._window(height, width, rng)
        return Plan(
            height,
            width,
            crop=(y, x, h, w),
            size=self.output_size,
            interpolation=pick(self._interpolations, rng),
        )

    def _window(self, height: int, width: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        area = height * width
        log_lo, log_hi = math.log(self.ratio_range[0]), math.log(self.ratio_range[1])
        for _ in range(10):
            target = rng.uniform(*self.scale_range) * area
            ratio = math.exp(rng.uniform(log_lo, log_hi))
            w = int(round(math.sqrt(target * ratio)))
            h = int(round(math.sqrt(target / ratio)))
            if 0 < w <= width and 0 < h <= height:
                return int(rng.integers(height - h + 1)), int(rng.integers(width - w + 1)), h, w
        ratio = width / height
        if ratio < self.ratio_range[0]:
            w, h = width, max(1, min(height, int(round(width / self.ratio_range[0]))))
        elif ratio > self.ratio_range[1]:
            w, h = max(1, min(width, int(round(height * self.ratio_range[1])))), height
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w
