"""Per-pixel transforms: layout change, normalisation, noise, PCA lighting."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import ArgumentValueError
from . import _args
from . import _functional as F
from ._base import PhotometricTransform, VisionTransform

# AlexNet's PCA of ImageNet colours (intensities in [0, 1]); rows reordered for BGR.
_EIGVEC = np.array(
    [[-0.5836, -0.6948, 0.4203], [-0.5808, -0.0045, -0.8140], [-0.5675, 0.7192, 0.4009]]
)
_EIGVAL = np.array([0.2175, 0.0188, 0.0045])


class ToMode(VisionTransform):
    """Change the layout of the image and mask; ``"CHW"`` transposes HWC to CHW.

    Args:
        mode: ``"CHW"``.
        order: see :class:`VisionTransform`.

    Image and mask: ``(C, H, W)`` contiguous, dtype kept. Coordinates are
    unchanged. Put it last: the other transforms expect HWC.
    """

    def __init__(self, mode: str = "CHW", *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        if mode != "CHW":
            raise ArgumentValueError(f"`mode` must be 'CHW'; got {mode!r}.")
        self.mode = mode

    def _apply_image(self, image: np.ndarray, params: Any) -> np.ndarray:
        return F.to_chw(image)

    def _apply_mask(self, mask: Any, params: Any) -> np.ndarray:
        return F.to_chw(np.asarray(mask))

    def _apply_coords(self, coords: Any, params: Any) -> Any:
        return coords

    # Aliases: only the parameter names differ from the base methods'.
    _apply_boxes = _apply_keypoints = _apply_polygons = _apply_coords  # type: ignore[assignment]


class Normalize(PhotometricTransform):
    """``(image - mean) / std`` per channel.

    Args:
        mean: one number or one per channel.
        std: one non-zero number or one per channel.
        order: see :class:`VisionTransform`.

    Image: float32 ``(H, W, C)`` whatever the input dtype.
    """

    def __init__(self, mean: Any = 0.0, std: Any = 1.0, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.mean = np.array(_args.per_channel("mean", mean), dtype=np.float32)
        self.std = np.array(_args.per_channel("std", std, nonzero=True), dtype=np.float32)
        self._scale = 1.0 / self.std.astype(np.float64)
        self._shift = -self.mean.astype(np.float64) * self._scale

    def _apply_image(self, image: np.ndarray, params: Any) -> np.ndarray:
        return F.channel_affine(image, self._scale, self._shift)


class GaussianNoise(PhotometricTransform):
    """Add Gaussian noise of ``mean`` and ``std``, in units of 255 (so ``std=0.05`` is ~13 levels).

    Args:
        mean: one number or one per channel.
        std: one number ``>= 0`` or one per channel.
        order: see :class:`VisionTransform`.

    Image: same shape and dtype, saturated to [0, 255].
    """

    _random = True

    def __init__(self, mean: Any = 0.0, std: Any = 1.0, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        self.mean = np.array(_args.per_channel("mean", mean), dtype=np.float32)
        self.std = np.array(_args.per_channel("std", std), dtype=np.float32)
        if (self.std < 0).any():
            raise ArgumentValueError(f"`std` must not be negative; got {std!r}.")

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> np.ndarray | None:
        if image is None:
            return None
        return rng.standard_normal(image.shape, dtype=np.float32)

    def _apply_image(self, image: np.ndarray, noise: np.ndarray) -> np.ndarray:
        if self.mean.size == 1 and self.std.size == 1:
            return F.add_noise(image, noise, float(self.std[0]) * 255, float(self.mean[0]) * 255)
        noise = F.channel_affine(noise, self.std * 255.0, self.mean * 255.0)
        return F.add_noise(image, noise, 1.0, 0.0)


class Lighting(PhotometricTransform):
    """AlexNet-style PCA lighting noise: add ``eigvec @ (alpha * eigval)`` to every pixel.

    ``alpha`` is drawn from ``N(0, scale**2)`` per sample. The published
    eigenvalues are for intensities in [0, 1]; they are scaled by 255 here to
    suit [0, 255] images (MegEngine adds them unscaled, a change of under one
    gray level).

    Args:
        scale: standard deviation of ``alpha``, ``>= 0`` (0 keeps the image).
        order: see :class:`VisionTransform`.

    Image: 3-channel BGR, same shape and dtype, saturated to [0, 255].
    """

    _random = True

    def __init__(self, scale: float, *, order: Sequence[str] | None = None) -> None:
        super().__init__(order)
        if not _args.is_number(scale) or not scale >= 0:
            raise ArgumentValueError(f"`scale` must be a number >= 0; got {scale!r}.")
        self.scale = float(scale)

    def _get_params(self, image: np.ndarray | None, rng: np.random.Generator) -> np.ndarray | None:
        if self.scale == 0:
            return None
        alpha = rng.normal(scale=self.scale, size=3)
        shift: np.ndarray = _EIGVEC @ (alpha * _EIGVAL) * 255.0
        return shift

    def _apply_image(self, image: np.ndarray, offsets: np.ndarray | None) -> np.ndarray:
        if offsets is None:
            return image
        if image.shape[2] != 3:
            raise ArgumentValueError(
                f"Lighting needs a 3-channel BGR image; got shape {image.shape}."
            )
        return F.add_per_channel(image, offsets)
