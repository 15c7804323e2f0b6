"""``VisionTransform``: one sample's fields, named by ``order``, moved together.

A sample is a tuple; ``order`` names its positions. ``apply`` draws the
sample's random parameters once (from :func:`dataloader.rng.batch_rng`) and
hands them to ``_apply_<name>(value, params)`` for every named field, so the
image, its boxes, mask and keypoints see the same crop, flip or resize. The
parameters travel as arguments and are never stored on ``self``: one instance
can serve many threads at once.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import ArgumentTypeError, ArgumentValueError
from ...rng import batch_rng
from .._base import Transform
from ._args import is_sequence

#: The field names every transform understands (besides ``*category``/``*info``).
FIELDS = ("image", "boxes", "mask", "keypoints", "polygons", "coords")

_DEFAULT_ORDER = ("image",)


def is_passthrough(name: str) -> bool:
    """Names ending in ``category`` or ``info`` are carried along unchanged."""
    return name.endswith("category") or name.endswith("info")


class VisionTransform(Transform):
    """Base class of the vision transforms.

    Args:
        order: the names of the sample's positions, default ``("image",)``.

            * ``"image"``: ``(H, W, C)`` array, uint8 or float32 in [0, 255], BGR for colour ops.
            * ``"boxes"``: ``(N, 4)`` float array of ``x0, y0, x1, y1`` corners.
            * ``"mask"``: ``(H, W, 1)`` segmentation map, any dtype (resized by nearest neighbour).
            * ``"keypoints"``: ``(N, K, 3)`` array of ``x, y, visibility``.
            * ``"polygons"``: a list (instances) of lists of ``(M, 2)`` ``x, y`` arrays.
            * ``"coords"``: ``(N, 2)`` array of ``x, y`` points.
            * names ending in ``"category"`` or ``"info"``: passed through unchanged.

            Positions after the last named one pass through unchanged, so
            ``(image, label)`` samples work with the default order. A plain
            array (not a tuple) is taken as the image and comes back as an array.

    Coordinates are continuous: pixel ``(row i, column j)`` covers
    ``[j, j + 1) x [i, i + 1)``, so its centre is ``(j + 0.5, i + 0.5)`` and an
    image of width ``W`` spans ``x`` in ``[0, W]``. Coordinate outputs are new
    arrays (float32 unless the input was already floating point); inputs are never
    modified in place.

    Subclasses implement ``_get_params(image, rng)`` (draw everything random
    from ``rng``; set ``_random = True`` so that ``rng`` is given) and
    ``_apply_image(image, params)``, ``_apply_coords(coords, params)``,
    ``_apply_mask(mask, params)``; boxes, keypoints and polygons are derived
    from ``_apply_coords`` unless overridden. A new field name ``foo`` is
    supported by defining ``_apply_foo(value, params)``.
    """

    #: Whether ``_get_params`` draws random numbers (and so needs ``batch_rng()``).
    _random = False

    def __init__(self, order: Sequence[str] | None = None) -> None:
        self.order = self._check_order(order)

    @classmethod
    def _check_order(cls, order: Any) -> tuple[str, ...]:
        """``order`` as a tuple of names, or an error naming the first unknown one."""
        if order is None:
            return _DEFAULT_ORDER
        if isinstance(order, str) or not is_sequence(order):
            raise ArgumentTypeError(
                "`order` must be a sequence of field names such as ('image', 'boxes'); "
                f"got {order!r}."
            )
        for name in order:
            if not isinstance(name, str):
                raise ArgumentTypeError(f"`order` must hold strings; got {name!r} in {order!r}.")
            if not is_passthrough(name) and getattr(cls, f"_apply_{name}", None) is None:
                raise ArgumentValueError(
                    f"`order` names {name!r}, which {cls.__name__} cannot transform; allowed: "
                    f"{', '.join(FIELDS)}, and names ending in 'category' or 'info' (passed "
                    f"through). Define `_apply_{name}` in a subclass to support it."
                )
        return tuple(order)

    def apply(self, input: Any) -> Any:
        return self._apply_in_order(input, self.order)

    def apply_batch(self, inputs: Sequence[Any]) -> list[Any]:
        return [self.apply(sample) for sample in inputs]

    def _apply_in_order(self, input: Any, order: tuple[str, ...]) -> Any:
        """Apply with the positions named by ``order`` (a containing Compose may pass its own)."""
        fields = split_fields(input, order, self)
        image = find_image(fields, order, self)
        params = self._get_params(image, batch_rng() if self._random else None)
        out = [
            value if is_passthrough(name) else getattr(self, f"_apply_{name}")(value, params)
            for name, value in zip(order, fields)
        ]
        out.extend(fields[len(order) :])
        return tuple(out) if isinstance(input, tuple) else out[0]

    def _get_params(self, image: np.ndarray | None, rng: Any) -> Any:
        """This sample's parameters, drawn from ``rng`` (a Generator if ``_random``, else None)."""
        return None

    def _apply_image(self, image: np.ndarray, params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform images.")

    def _apply_coords(self, coords: np.ndarray, params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform coordinates.")

    def _apply_mask(self, mask: np.ndarray, params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} does not transform masks.")

    def _apply_boxes(self, boxes: Any, params: Any) -> np.ndarray:
        """Each box's four corners through ``_apply_coords``, then their bounding box."""
        boxes = as_float(boxes, "boxes", 4)
        corners = boxes[:, [0, 1, 2, 1, 0, 3, 2, 3]].reshape(-1, 2)
        corners = self._apply_coords(corners, params).reshape(-1, 4, 2)
        return np.concatenate((corners.min(axis=1), corners.max(axis=1)), axis=1)

    def _apply_keypoints(self, keypoints: Any, params: Any) -> np.ndarray:
        keypoints = as_float(keypoints, "keypoints", None)
        out: np.ndarray = keypoints.copy()
        xy = self._apply_coords(keypoints[..., :2].reshape(-1, 2), params)
        out[..., :2] = xy.reshape(keypoints.shape[:-1] + (2,))
        return out

    def _apply_polygons(self, polygons: Any, params: Any) -> list[Any]:
        return [
            [self._apply_coords(as_float(points, "polygons", 2), params) for points in instance]
            for instance in polygons
        ]


class PhotometricTransform(VisionTransform):
    """A transform that changes pixel values only: every other field passes unchanged."""

    def _apply_coords(self, coords: Any, params: Any) -> Any:
        return coords

    def _apply_mask(self, mask: Any, params: Any) -> Any:
        return mask

    # Aliases: only the parameter names differ from the base methods'.
    _apply_boxes = _apply_keypoints = _apply_polygons = _apply_coords  # type: ignore[assignment]


def split_fields(input: Any, order: tuple[str, ...], who: VisionTransform) -> tuple[Any, ...]:
    if not isinstance(input, tuple):
        if len(order) != 1:
            raise ArgumentValueError(
                f"{type(who).__name__} got one {type(input).__name__} but its order names "
                f"{len(order)} fields {order!r}; pass the sample as a tuple in that order."
            )
        return (input,)
    if len(input) < len(order):
        raise ArgumentValueError(
            f"{type(who).__name__} got a sample of {len(input)} fields but its order names "
            f"{len(order)}: {order!r}; give `order` the sample's layout."
        )
    return input


def find_image(fields: tuple[Any, ...], order: tuple[str, ...], who: VisionTransform) -> np.ndarray | None:
    if "image" not in order:
        return None
    image = fields[order.index("image")]
    if isinstance(image, (bytes, bytearray, memoryview)):
        raise ArgumentValueError(
            f"{type(who).__name__} got the image still encoded ({len(image)} bytes: "
            "ImageFolder(decode=False) or a column of files); decode it first: put DecodeImage, "
            "DecodeRandomResizedCrop or DecodeResize before it."
        )
    if not isinstance(image, np.ndarray) or image.ndim != 3:
        got = f"shape {image.shape}" if isinstance(image, np.ndarray) else type(image).__name__
        raise ArgumentValueError(
            f"{type(who).__name__} needs the image as an (H, W, C) array; got {got}. "
            "Add a channel axis to a grayscale image with image[:, :, None]."
        )
    return image


def as_float(values: Any, name: str, last: int | None) -> np.ndarray:
    """``values`` as a floating-point array (float32 unless already floating), checked for shape."""
    array = np.asarray(values)
    if array.dtype.kind != "f":
        array = array.astype(np.float32)
    if last is not None:
        if array.size == 0:
            return array.reshape(0, last)
        if array.ndim != 2 or array.shape[1] != last:
            raise ArgumentValueError(f"`{name}` must have shape (N, {last}); got {array.shape}.")
    elif array.ndim < 1 or array.shape[-1] < 2:
        raise ArgumentValueError(f"`{name}` must have shape (N, K, 3); got {array.shape}.")
    return array


def require_image(image: np.ndarray | None, who: VisionTransform) -> np.ndarray:
    """The image, or an error saying the transform's order must include it."""
    if image is None:
        raise ArgumentValueError(
            f"{type(who).__name__} needs the image to draw its parameters, but its order has no "
            "'image'; include the image in the sample and name it in `order`."
        )
    return image
