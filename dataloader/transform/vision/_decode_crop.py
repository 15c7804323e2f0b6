"""``DecodeRandomResizedCrop`` and ``DecodeResize``: decode a JPEG at the scale its output needs.

libjpeg decodes at 1/2, 1/4 or 1/8 of each side with a smaller inverse DCT and a quarter to a
64th of the colour conversion and upsampling. These transforms read the size from the file's
header, draw their parameters exactly as :class:`RandomResizedCrop` and :class:`Resize` draw
them for an image of that size, decode at the smallest scale at which the output still comes
from at least as many pixels as it has, and resize from there. Files the scaled decode cannot
stand in for (see ``_jpeg_header.py``) are decoded in full and cropped as the two-step path
does, with its output.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...image_folder import decode_image
from ...rng import batch_rng
from ._decode import DecodeImage, failure_context
from ._geometry import Plan
from ._jpeg_header import scalable_jpeg_size
from ._numpy_resize import INTER_LINEAR
from ._resize import RandomResizedCrop, Resize

_REDUCTIONS = (8, 4, 2)


class _ScaledDecode(DecodeImage):
    """Finds the image as :class:`DecodeImage` does; decodes it through ``self._resizing``'s plan."""

    _resizing: RandomResizedCrop | Resize
    #: The image alone is cropped: a vision Compose whose order names boxes or masks refuses it.
    moves_image_only = True

    def _decode(self, data: Any, where: str) -> np.ndarray:
        data = self._encoded(data, where)
        what, fix = failure_context(data, where)
        rng = batch_rng() if self._resizing._random else None
        size = scalable_jpeg_size(data)
        if size is None:  # not a JPEG the reduced decode stands in for
            image = decode_image(data, what, fix)
        else:
            state = rng.bit_generator.state if rng is not None else {}
            plan = self._resizing.plan_for_size(*size, rng)
            reduce = _reduction(plan)
            image = decode_image(data, what, fix, reduce)
            if image.shape[:2] == size:
                return plan.run(image, 0, plan.interpolation)
            if reduce > 1 and image.shape[:2] == (-(-size[0] // reduce), -(-size[1] // reduce)):
                return _scaled_plan(plan, image.shape[0], image.shape[1], reduce).run(image, 0, plan.interpolation)
            # The decoder disagrees with the header (it turned the image, or chose another scale):
            # the two-step path, with the draws it makes for the image it decodes.
            if rng is not None:
                rng.bit_generator.state = state  # the draws again, for the decoded size
            if reduce > 1:
                image = decode_image(data, what, fix)
        plan = self._resizing.plan_for_size(image.shape[0], image.shape[1], rng)
        return plan.run(image, 0, plan.interpolation)


def _reduction(plan: Plan) -> int:
    """The largest libjpeg reduction at which the region the plan resizes keeps at least as
    many rows and columns as the output (1 when there is no resize: the pixels are the output)."""
    if plan.size is None:
        return 1
    height, width = (plan.crop[2], plan.crop[3]) if plan.crop is not None else (plan.height, plan.width)
    out_h, out_w = plan.size
    for reduce in _REDUCTIONS:
        if height >= out_h * reduce and width >= out_w * reduce:
            return reduce
    return 1


def _scaled_plan(plan: Plan, height: int, width: int, reduce: int) -> Plan:
    """``plan`` on the image decoded at ``1/reduce`` (``height`` x ``width``): its window (the
    whole image when it has none) with edges divided by ``reduce`` and rounded to the nearest
    row and column, within half a reduced pixel. libjpeg's last row and column of blocks may
    stand for fewer than ``reduce`` pixels; rounding keeps them out of the window unless they
    are mostly in it."""
    y, x, h, w = plan.crop if plan.crop is not None else (0, 0, plan.height, plan.width)
    top, left = _nearest(y / reduce), _nearest(x / reduce)
    bottom, right = min(height, _nearest((y + h) / reduce)), min(width, _nearest((x + w) / reduce))
    return Plan(height, width, crop=(top, left, bottom - top, right - left), size=plan.size,
                interpolation=plan.interpolation)


def _nearest(value: float) -> int:
    """Half up, not to even: edges a whole output row apart stay at least one row apart."""
    return int(value + 0.5)


class DecodeRandomResizedCrop(_ScaledDecode):
    """Decode a JPEG and cut a :class:`RandomResizedCrop` from it, decoding only the scale needed.

    The same as ``DecodeImage`` followed by ``RandomResizedCrop(output_size, scale_range,
    ratio_range, interpolation)`` for the same :func:`~dataloader.rng.batch_rng` state: the
    same window of the image, drawn from the header's size before any pixel is decoded. The
    JPEG is then decoded at the smallest of 1/8, 1/4, 1/2 and full scale at which the window is
    still at least ``output_size``, and the window resized from there. Only the pixels differ:
    the reduced decode averages each block of pixels (a better low-pass than a bilinear resize
    of the full image) and the window's edges round to the reduced grid; docs/vision.md gives the
    PSNR. A window that needs the full scale, and every file that is not an 8-bit three-component
    sequential JPEG without EXIF rotation (PNG, WebP, grayscale, CMYK, progressive), gives exactly
    the two-step output.

    The image is found, and the sample returned, as :class:`DecodeImage` does (``key``,
    ``index``, ``path_key``, ``fields``); it comes back as ``(height, width, 3)`` uint8 BGR.
    Only the image moves: in a :class:`Compose` whose ``order`` names boxes, masks or points,
    which would stay in the uncropped image's coordinates, it is refused.

    Args:
        output_size: ``n`` or ``(height, width)``.
        scale_range: ``(min, max)`` fraction of the image area.
        ratio_range: ``(min, max)`` width / height.
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from per sample.
    """

    def __init__(
        self,
        output_size: Any,
        scale_range: Any = (0.08, 1.0),
        ratio_range: Any = (3.0 / 4, 4.0 / 3),
        interpolation: Any = INTER_LINEAR,
        *,
        key: str = "image",
        index: int = 0,
        path_key: str = "path",
        fields: Sequence[str] | None = None,
    ) -> None:
        super().__init__(key=key, index=index, path_key=path_key, fields=fields)
        self._resizing = RandomResizedCrop(output_size, scale_range, ratio_range, interpolation)
        self.output_size, self.interpolation = self._resizing.output_size, interpolation
        self.scale_range, self.ratio_range = self._resizing.scale_range, self._resizing.ratio_range


class DecodeResize(_ScaledDecode):
    """Decode a JPEG and :class:`Resize` it, decoding only the scale needed: for evaluation.

    The same as ``DecodeImage`` followed by ``Resize(output_size, interpolation)``, with the
    JPEG decoded at the smallest of 1/8, 1/4, 1/2 and full scale that still has at least
    ``output_size`` rows and columns; only the pixels differ, as for
    :class:`DecodeRandomResizedCrop`. Other files, and images the resize does not shrink by
    half or more, give exactly the two-step output. Only the image moves, as there.

    Args:
        output_size: ``(height, width)``; or ``n``: the shorter side becomes ``n`` and the
            other keeps the aspect ratio (rounded down).
        interpolation: an ``INTER_*`` flag (OpenCV's values), or a sequence to draw from per sample.
    """

    def __init__(
        self,
        output_size: Any,
        interpolation: Any = INTER_LINEAR,
        *,
        key: str = "image",
        index: int = 0,
        path_key: str = "path",
        fields: Sequence[str] | None = None,
    ) -> None:
        super().__init__(key=key, index=index, path_key=path_key, fields=fields)
        self._resizing = Resize(output_size, interpolation)
        self.output_size, self.interpolation = self._resizing.output_size, interpolation
