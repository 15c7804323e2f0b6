"""Vision transforms with MegEngine's names, arguments and conventions.

Samples are tuples whose positions are named by ``order`` (image, boxes, mask,
keypoints, polygons, ``*category``, ``*info``); one call draws its random
parameters once, from :func:`dataloader.rng.batch_rng`, and moves every field
with them. Images are HWC, BGR, uint8 or float32 in [0, 255].

Implementation choice: geometry bookkeeping and per-pixel arithmetic with one
scalar are NumPy; resizing, flipping, colour-space conversion, lookup tables
and per-channel affine maps are OpenCV (``cv2``), which matches MegEngine's
BGR HWC conventions, is several times faster than NumPy for these, and releases
the GIL so thread workers run transforms in parallel. Where OpenCV does not
import (free-threaded 3.14t has no wheel for it), the same operations run on
NumPy with OpenCV's geometry and rounding, within the tolerances of
docs/vision.md "Without OpenCV"; ``DATALOADER_IMAGE_BACKEND=opencv|pillow``
forces one, and :data:`IMAGE_BACKEND` says which is in use. Importing this
package imports ``cv2`` where it is used; ``import dataloader`` does not.
``INTER_*`` are OpenCV's interpolation flags, with OpenCV's values.

``Transform`` and ``PseudoTransform`` are here too, as in ``megengine.data.transform``, so
``import dataloader.transform.vision as T`` stands in for ``import megengine.data.transform as T``.

- ``_base.py``: :class:`VisionTransform`, one sample's fields named by ``order`` and moved together.
- ``_compose.py``: ``Compose``, a sample layout shared by its children.
- ``_geometry.py``: pad, crop and flip as plans that map every field; ``_resize.py`` the
  transforms that resize.
- ``_pixel.py``: layout change, normalisation, noise, PCA lighting; ``_color.py`` brightness,
  contrast, saturation, hue and ``ColorJitter``.
- ``_decode.py``: ``DecodeImage``, encoded image bytes in a sample decoded as ``ImageFolder`` does;
  ``_decode_crop.py``: ``DecodeRandomResizedCrop`` and ``DecodeResize``, which decode a JPEG at
  the scale their output needs, found by ``_jpeg_header.py`` from the file's header.
- ``_functional.py``: the image operations on HWC arrays the transforms share, on the backend
  chosen at import; ``_numpy_resize.py`` and ``_numpy_color.py`` their NumPy versions
  (OpenCV's resize, colour conversions, lookup tables and ``addWeighted``).
- ``_args.py``: the argument checks they share.
"""

from .._base import PseudoTransform, Transform
from ._base import VisionTransform
from ._color import (
    BrightnessTransform,
    ColorJitter,
    ContrastTransform,
    HueTransform,
    SaturationTransform,
)
from ._compose import Compose
from ._decode import DecodeImage
from ._decode_crop import DecodeRandomResizedCrop, DecodeResize
from ._functional import IMAGE_BACKEND
from ._geometry import CenterCrop, Pad, RandomCrop, RandomHorizontalFlip, RandomVerticalFlip
from ._numpy_resize import (
    INTER_AREA,
    INTER_CUBIC,
    INTER_LANCZOS4,
    INTER_LINEAR,
    INTER_LINEAR_EXACT,
    INTER_NEAREST,
    INTER_NEAREST_EXACT,
)
from ._pixel import GaussianNoise, Lighting, Normalize, ToMode
from ._resize import RandomResize, RandomResizedCrop, Resize, ShortestEdgeResize

__all__ = [
    "BrightnessTransform",
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "ContrastTransform",
    "DecodeImage",
    "DecodeRandomResizedCrop",
    "DecodeResize",
    "GaussianNoise",
    "HueTransform",
    "IMAGE_BACKEND",
    "INTER_AREA",
    "INTER_CUBIC",
    "INTER_LANCZOS4",
    "INTER_LINEAR",
    "INTER_LINEAR_EXACT",
    "INTER_NEAREST",
    "INTER_NEAREST_EXACT",
    "Lighting",
    "Normalize",
    "Pad",
    "PseudoTransform",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomResize",
    "RandomResizedCrop",
    "RandomVerticalFlip",
    "Resize",
    "SaturationTransform",
    "ShortestEdgeResize",
    "ToMode",
    "Transform",
    "VisionTransform",
]
