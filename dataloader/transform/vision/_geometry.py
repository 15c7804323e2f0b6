"""Axis-aligned geometry: every transform here is a :class:`Plan` (pad, crop, resize, flip).

A transform only draws its plan (``_get_params``); one executor applies the
plan to the image and mask and maps coordinates with the matching
``x' = x * sx + dx``, ``y' = y * sy + dy``. Boxes are clipped to the output
image, so a box cropped away entirely becomes an empty (zero-area) box; none
is dropped, which keeps boxes aligned with their ``*category`` fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, cast

import numpy as np

from . import _args
from . import _functional as F
from ...errors import ArgumentTypeError, ArgumentValueError
from ._base import VisionTransform, as_float, require_image
from ._numpy_resize import INTER_LINEAR

_NO_PAD = (0, 0, 0, 0)


@dataclass(frozen=True)
class Plan:
    """What one sample goes through, in this order: pad, crop, resize, flip.

    ``crop`` is ``(y, x, height, width)`` in the padded image; ``size`` the
    resize target ``(height, width)``.
    """

    height: int
    width: int
    pad: tuple[int, int, int, int] = _NO_PAD
    crop: tuple[int, int, int, int] | None = None
    size: tuple[int, int] | None = None
    interpolation: int = INTER_LINEAR
    flip_horizontal: bool = False
    flip_vertical: bool = False

    def run(self, array: np.ndarray, fill: Any, interpolation: int | None) -> np.ndarray:
        """Apply the plan; ``interpolation=None`` resizes by nearest neighbour (masks)."""
        if self.pad != _NO_PAD:
            array = F.pad(array, self.pad, fill)
        if self.crop is not None:
            y, x, h, w = self.crop
            array = array[y : y + h, x : x + w]
        if self.size is not None:
            if interpolation is None:
                array = F.resize_nearest(array, *self.size)
            else:
                array = F.resize(array, self.size[0], self.size[1], interpolation)
        return F.flip(array, self.flip_horizontal, self.flip_vertical)

    def output_size(self) -> tuple[int, int]:
        return self.size if self.size is not None else self._size_before_resize()

    def _size_before_resize(self) -> tuple[int, int]:
        if self.crop is not None:
            return self.crop[2], self.crop[3]
        top, bottom, left, right = self.pad
        return self.height + top + bottom, self.width + left + right

    def coordinate_map(self) -> tuple[np.ndarray, np.ndarray]:
        """``(scale, offset)``, each ``[x, y]``: output = input * scale + offset."""
        top, _, left, _ = self.pad
        cy, cx = self.crop[:2] if self.crop is not None else (0, 0)
        out_h, out_w = self.output_size()
        in_h, in_w = self._size_before_resize()
        sx, sy = out_w / in_w, out_h / in_h
        dx, dy = (left - cx) * sx, (top - cy) * sy
        if self.flip_horizontal:
            sx, dx = -sx, out_w - dx
        if self.flip_vertical:
            sy, dy = -sy, out_h - dy
        return np.array([sx, sy]), np.array([dx, dy])


class AxisAlignedTransform(VisionTransform):
    """Base of the geometric transforms: subclasses return a :class:`Plan` from ``_get_params``."""

    _fill: Any = 0
    _mask_fill: Any = 0

    def _apply_image(self, image: np.ndarray, plan: Plan) -> np.ndarray:
        return plan.run(image, self._fill, plan.interpolation)

    def _apply_mask(self, mask: np.ndarray, plan: Plan) -> np.ndarray:
        return plan.run(np.asarray(mask), self._mask_fill, None)

    def _apply_coords(self, coords: Any, plan: Plan) -> np.ndarray:
        coords = as_float(coords, "coords", 2)
        scale, offset = plan.coordinate_map()
        mapped: np.ndarray = (coords * scale + offset).astype(coords.dtype, copy=False)
        return mapped

    def _apply_boxes(self, boxes: Any, plan: Plan) -> np.ndarray:
        boxes = as_float(boxes, "boxes", 4)
        (sx, sy), (dx, dy) = plan.coordinate_map()
        xs, ys = boxes[:, 0::2] * sx + dx, boxes[:, 1::2] * sy + dy
        out_h, out_w = plan.output_size()
        out = np.stack(
            (xs.min(axis=1), ys.min(axis=1), xs.max(axis=1), ys.max(axis=1)), axis=1
        )
        np.clip(out[:, 0::2], 0, out_w, out=out[:, 0::2])
        np.clip(out[:, 1::2], 0, out_h, out=out[:, 1::2])
        return out.astype(boxes.dtype, copy=False)


def pick(choices: Sequence[int], rng: np.random.Generator | None) -> int:
    """One interpolation flag: the only one, or one drawn from ``rng``."""
    if len(choices) == 1:
        return choices[0]
    return choices[int(cast(np.random.Generator, rng).integers(len(choices)))]


class Pad(AxisAlignedTransform):
    """Pad every side by a fixed amount.

    Args:
        size: ``n`` (all four sides), ``(bottom, right)``, or ``(top, bottom, left, right)``.
        value: image fill, one number or one per channel. A float value makes the
            output float32 (as in MegEngine); otherwise the dtype is kept.
        mask_value: mask fill (an integer).
        order: see :class:`VisionTransform`.

    Image and mask: ``(H + top + bottom, W + left + right, C)``; coordinates shift
    by ``(left, top)``.
    """

    def __init__(
        self, size: Any = 0, value: Any = 0, mask_value: int = 0, *, order: Sequence[str] | None = None
    ) -> None:
        super().__init__(order)
        self.size = _args.pad_sizes("size", size)
        self.value = self._fill = _args.fill("value", value)
        if not _args.is_int(mask_value):
            raise ArgumentTypeError(f"`mask_value` must be an integer; got {mask_value!r}.")
        self.mask_value = self._mask_fill = int(mask_value)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        return Plan(height, width, pad=self.size)


class CenterCrop(AxisAlignedTransform):
    """Cut the central ``output_size`` window; it must fit in the image.

    Args:
        output_size: ``n`` or ``(height, width)``.
        order: see :class:`VisionTransform`.

    Image and mask: a view of the input, ``(height, width, C)``, dtype kept.
    """

    def __init__(self, output_size: Any, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.output_size = _args.size_pair("output_size", output_size)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        th, tw = self.output_size
        if th > height or tw > width:
            raise ArgumentValueError(
                f"CenterCrop: `output_size` {self.output_size} is larger than the image "
                f"({height}, {width}); pad or resize before cropping (Pad, Resize, RandomCrop)."
            )
        y, x = int(round((height - th) / 2)), int(round((width - tw) / 2))
        return Plan(height, width, crop=(y, x, th, tw))


class RandomCrop(AxisAlignedTransform):
    """Pad, then cut a random ``output_size`` window.

    The image is padded by ``padding_size`` first and then, on the bottom and
    right, up to ``output_size`` if it is still smaller. The mask is padded by
    the same amounts (with ``padding_maskvalue``), whatever ``order`` a
    containing :class:`Compose` gives.

    Args:
        output_size: ``n`` or ``(height, width)``.
        padding_size: as ``Pad``'s ``size``.
        padding_value: image fill (see ``Pad``'s ``value``).
        padding_maskvalue: mask fill.
        order: see :class:`VisionTransform`.

    Image and mask: ``(height, width, C)``, dtype kept (float32 for a float fill).
    """

    _random = True

    def __init__(
        self,
        output_size: Any,
        padding_size: Any = 0,
        padding_value: Any = (0, 0, 0),
        padding_maskvalue: int = 0,
        *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        self.output_size = _args.size_pair("output_size", output_size)
        self.padding_size = _args.pad_sizes("padding_size", padding_size)
        self.padding_value = self._fill = _args.fill("padding_value", padding_value)
        if not _args.is_int(padding_maskvalue):
            raise ArgumentTypeError(
                f"`padding_maskvalue` must be an integer; got {padding_maskvalue!r}."
            )
        self.padding_maskvalue = self._mask_fill = int(padding_maskvalue)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        top, bottom, left, right = self.padding_size
        th, tw = self.output_size
        bottom += max(0, th - (height + top + bottom))
        right += max(0, tw - (width + left + right))
        y = int(rng.integers(height + top + bottom - th + 1))
        x = int(rng.integers(width + left + right - tw + 1))
        return Plan(height, width, pad=(top, bottom, left, right), crop=(y, x, th, tw))


class _RandomFlip(AxisAlignedTransform):
    """Mirror along ``_axis`` with probability ``prob``."""

    _random = True
    _axis = ""

    def __init__(self, prob: float = 0.5, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.prob = _args.probability("prob", prob)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> Plan:
        height, width = image_size(image, self)
        flip: dict[str, Any] = {f"flip_{self._axis}": bool(rng.random() < self.prob)}
        return Plan(height, width, **flip)


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``prob``; ``x`` becomes ``W - x``.

    Args:
        prob: the probability of flipping.
        order: see :class:`VisionTransform`.

    Image and mask: same shape and dtype, contiguous.
    """

    _axis = "horizontal"


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``prob``; ``y`` becomes ``H - y``.

    Args:
        prob: the probability of flipping.
        order: see :class:`VisionTransform`.

    Image and mask: same shape and dtype, contiguous.
    """

    _axis = "vertical"


def image_size(image: np.ndarray | None, who: VisionTransform) -> tuple[int, int]:
    image = require_image(image, who)
    return image.shape[0], image.shape[1]
