"""A JPEG's size from its header, and whether libjpeg can decode it scaled to today's pixels.

The fused decode transforms decode at 1/2, 1/4 or 1/8 scale only the JPEGs whose scaled
decode is the full decode made smaller: 8-bit, three-component (YCbCr) baseline or extended
sequential files with no EXIF rotation and no Adobe colour transform marker. Everything else
(PNG, WebP, grayscale, CMYK, progressive, arithmetic-coded, lossless, 12-bit, a rotating EXIF
orientation, a header that does not parse) is left to the full decode. Reading the markers up
to the first scan costs microseconds: a few segment lengths, never the entropy-coded data.
"""

from __future__ import annotations

import struct
from typing import Any

_SOI = b"\xff\xd8"
_SEQUENTIAL_FRAMES = (0xC0, 0xC1)  # baseline and extended sequential, Huffman-coded
_OTHER_FRAMES = frozenset((0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))
_STANDALONE = frozenset((0x01, *range(0xD0, 0xD8)))  # TEM and RSTn carry no length
_SOS, _EOI, _APP1, _APP14 = 0xDA, 0xD9, 0xE1, 0xEE
_ORIENTATION_TAG = 0x0112


def scalable_jpeg_size(data: Any) -> tuple[int, int] | None:
    """``(height, width)`` of a JPEG whose scaled decode equals its full decode made smaller,
    else None (not a JPEG, or one the full decode must handle)."""
    view = memoryview(data).cast("B")
    if bytes(view[:2]) != _SOI:
        return None
    size = None
    position, end = 2, len(view)
    while position + 4 <= end:
        if view[position] != 0xFF:
            return None
        marker = view[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker in _STANDALONE:
            position += 2
            continue
        if marker in (_SOS, _EOI):
            return size
        length = (view[position + 2] << 8) | view[position + 3]
        segment = view[position + 4 : position + 2 + length]
        if length < 2 or len(segment) != length - 2:
            return None
        if marker in _OTHER_FRAMES or (marker == _APP14 and bytes(segment[:5]) == b"Adobe"):
            return None
        if marker in _SEQUENTIAL_FRAMES:
            if size is not None or len(segment) < 6 or segment[0] != 8 or segment[5] != 3:
                return None
            height, width = struct.unpack(">HH", segment[1:5])
            if not height or not width:  # a height given later by a DNL marker
                return None
            size = (height, width)
        elif marker == _APP1 and bytes(segment[:6]) == b"Exif\x00\x00" and _rotates(segment[6:]):
            return None
        position += 2 + length
    return None


def _rotates(tiff: memoryview) -> bool:
    """Whether an EXIF block's orientation asks for anything but the stored pixels; a block
    that does not parse counts as rotating, so the full decode deals with it as it does today."""
    try:
        order = {b"II": "<", b"MM": ">"}[bytes(tiff[:2])]
        (first,) = struct.unpack(order + "I", tiff[4:8])
        (count,) = struct.unpack(order + "H", tiff[first : first + 2])
        for entry in range(first + 2, first + 2 + 12 * count, 12):
            tag, kind = struct.unpack(order + "HH", tiff[entry : entry + 4])
            if tag == _ORIENTATION_TAG:
                (value,) = struct.unpack(order + "H", tiff[entry + 8 : entry + 10])
                return kind != 3 or value not in (0, 1)
    except (KeyError, struct.error):
        return True
    return False
