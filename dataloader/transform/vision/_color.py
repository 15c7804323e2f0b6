"""Colour jitter: brightness, contrast, saturation, hue, and all four in random order.

Images are BGR, ``(H, W, C)``, uint8 or float32 with values in [0, 255];
the output has the input's shape and dtype (integers rounded and saturated).
Brightness and contrast work on any channel count, saturation on 1 or 3
channels, hue on 3. Other fields (boxes, masks, ...) pass through unchanged.

Each factor is either ``v >= 0``, meaning a factor drawn uniformly from
``[max(0, 1 - v), 1 + v]``, or an explicit ``[min, max]`` pair; hue takes
``0 <= v <= 0.5`` (a shift in ``[-v, v]`` turns) or ``[min, max]`` within
``[-0.5, 0.5]``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _args
from . import _functional as F
from ._base import PhotometricTransform


class _Factor(PhotometricTransform):
    """A colour transform driven by one factor drawn per sample from ``value``."""

    _random = True

    def __init__(self, value: Any, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.value = value
        self._range = self._parse(value)

    @staticmethod
    def _parse(value: Any, name: str = "value") -> tuple[float, float] | None:
        return _args.jitter_range(name, value)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> float | None:
        return None if self._range is None else float(rng.uniform(*self._range))

    def _apply_image(self, image: np.ndarray, factor: float | None) -> np.ndarray:
        return image if factor is None else self._adjust(image, factor)

    @staticmethod
    def _adjust(image: np.ndarray, factor: float) -> np.ndarray:
        raise NotImplementedError


class BrightnessTransform(_Factor):
    """Multiply every pixel by a random factor (0 keeps the image).

    Args:
        value: ``v >= 0`` (factor in ``[max(0, 1 - v), 1 + v]``) or ``[min, max]``.
        order: see :class:`VisionTransform`.

    Image: same shape and dtype (uint8 or float32 in [0, 255]), saturated.
    """

    @staticmethod
    def _adjust(image: np.ndarray, factor: float) -> np.ndarray:
        return F.scale_shift(image, factor, 0.0)


class ContrastTransform(_Factor):
    """Blend with the mean gray level by a random factor (0 keeps the image).

    Args:
        value: ``v >= 0`` (factor in ``[max(0, 1 - v), 1 + v]``) or ``[min, max]``.
        order: see :class:`VisionTransform`.

    Image: same shape and dtype (uint8 or float32 in [0, 255]), saturated.
    """

    @staticmethod
    def _adjust(image: np.ndarray, factor: float) -> np.ndarray:
        mean = float(F.to_gray(image).mean())
        return F.scale_shift(image, factor, mean * (1.0 - factor))


class SaturationTransform(_Factor):
    """Blend with the pixel's own gray level by a random factor (0 keeps the image).

    Args:
        value: ``v >= 0`` (factor in ``[max(0, 1 - v), 1 + v]``) or ``[min, max]``.
        order: see :class:`VisionTransform`.

    Image: same shape and dtype (uint8 or float32 in [0, 255]), saturated.
    """

    @staticmethod
    def _adjust(image: np.ndarray, factor: float) -> np.ndarray:
        return F.blend_gray(image, factor)


class HueTransform(_Factor):
    """Rotate the hue by a random fraction of a turn (0 keeps the image).

    uint8 images go through OpenCV's 256-level ``HSV_FULL`` space and the shift
    wraps around (a negative shift is fine); float32 images use the
    continuous HSV space.

    Args:
        value: ``0 <= v <= 0.5`` (shift in ``[-v, v]``) or ``[min, max]`` within ``[-0.5, 0.5]``.
        order: see :class:`VisionTransform`.

    Image: 3-channel BGR, same shape and dtype.
    """

    @staticmethod
    def _parse(value: Any, name: str = "value") -> tuple[float, float] | None:
        return _args.hue_range(name, value)

    @staticmethod
    def _adjust(image: np.ndarray, factor: float) -> np.ndarray:
        return F.shift_hue(image, factor)


_JITTERS = (
    ("brightness", BrightnessTransform),
    ("contrast", ContrastTransform),
    ("saturation", SaturationTransform),
    ("hue", HueTransform),
)


class ColorJitter(PhotometricTransform):
    """Brightness, contrast, saturation and hue changes, applied in a random order.

    Args:
        brightness: ``v >= 0`` or ``[min, max]`` (0 turns it off).
        contrast: ``v >= 0`` or ``[min, max]``.
        saturation: ``v >= 0`` or ``[min, max]``.
        hue: ``0 <= v <= 0.5`` or ``[min, max]`` within ``[-0.5, 0.5]``.
        order: see :class:`VisionTransform`.

    Image: same shape and dtype. The order and all factors are drawn once per
    sample from ``batch_rng()``.
    """

    _random = True

    def __init__(
        self, brightness: Any = 0, contrast: Any = 0, saturation: Any = 0, hue: Any = 0, *,
        order: Sequence[str] | None = None,
    ) -> None:
        super().__init__(order)
        values = dict(brightness=brightness, contrast=contrast, saturation=saturation, hue=hue)
        for name, value in values.items():
            setattr(self, name, value)
        self._parts: list[tuple[Any, tuple[float, float]]] = []
        for name, kind in _JITTERS:
            value_range = kind._parse(values[name], name)
            if value_range is not None:
                self._parts.append((kind._adjust, value_range))

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> list[Any]:
        steps: np.ndarray | list[int] = rng.permutation(len(self._parts)) if self._parts else []
        return [(self._parts[i][0], float(rng.uniform(*self._parts[i][1]))) for i in steps]

    def _apply_image(self, image: np.ndarray, steps: list[Any]) -> np.ndarray:
        for adjust, factor in steps:
            image = adjust(image, factor)
        return image
