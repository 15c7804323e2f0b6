"""OpenCV's colour conversions, lookup tables and ``addWeighted`` in NumPy, for where OpenCV is missing.

Each function takes and returns ``(H, W, C)`` arrays as its OpenCV namesake
does in :mod:`._functional`. uint8 BGR -> gray is OpenCV's fixed point, exact;
the HSV conversions follow ``color_hsv.simd.hpp`` (uint8 within one level of
OpenCV, float32 within float rounding); everything runs vectorised over the image.
"""

from __future__ import annotations

import numpy as np

_HSV_SHIFT = 12
#: OpenCV's tables for uint8 BGR -> HSV_FULL: 255 / v and 256 / (6 * diff) in 20.12 fixed point.
with np.errstate(divide="ignore"):
    _SDIV = np.rint(np.where(np.arange(256) > 0, (255 << _HSV_SHIFT) / np.arange(256.0), 0)).astype(np.int64)
    _HDIV = np.rint(np.where(np.arange(256) > 0, (256 << _HSV_SHIFT) / (6.0 * np.arange(256.0)), 0)).astype(
        np.int64
    )
#: For each hue sector 0..5, which of (v, p, q, t) are blue, green and red.
_SECTORS = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def bgr_to_gray(image: np.ndarray) -> np.ndarray:
    """``cv2.COLOR_BGR2GRAY``: uint8 in OpenCV's 14-bit fixed point, floats as 0.114 B + 0.587 G + 0.299 R."""
    b, g, r = image[:, :, 0], image[:, :, 1], image[:, :, 2]
    if image.dtype == np.uint8:
        luma = b * np.int32(1868) + g * np.int32(9617) + r * np.int32(4899) + np.int32(1 << 13)
        gray: np.ndarray = np.right_shift(luma, 14).astype(np.uint8)[:, :, None]
        return gray
    work = image.dtype if image.dtype.kind == "f" else np.dtype(np.float32)
    luma = b * work.type(0.114) + g * work.type(0.587) + r * work.type(0.299)
    return luma.astype(image.dtype)[:, :, None]


def lut(image: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``cv2.LUT``: a 256-entry table, shared (``(256,)``) or one per channel (``(256, 1, C)``)."""
    if table.ndim == 1:
        return np.take(table, image)
    mapped: np.ndarray = table.reshape(256, -1)[image, np.arange(image.shape[2])]
    return mapped


def add_weighted(a: np.ndarray, alpha: float, b: np.ndarray, beta: float, gamma: float) -> np.ndarray:
    """``cv2.addWeighted`` into uint8: ``a * alpha + b * beta + gamma`` in float32, rounded, saturated."""
    out = a.astype(np.float32) * np.float32(alpha)
    out += b * np.float32(beta)
    out += np.float32(gamma)
    np.rint(out, out=out)
    return np.clip(out, 0, 255, out=out).astype(np.uint8)


def bgr_to_hsv_full(image: np.ndarray) -> np.ndarray:
    """uint8 ``cv2.COLOR_BGR2HSV_FULL``: hue in [0, 256), saturation and value in [0, 255]."""
    bgr = image.astype(np.int64)
    b, g, r = bgr[:, :, 0], bgr[:, :, 1], bgr[:, :, 2]
    v = bgr.max(axis=2)
    diff = v - bgr.min(axis=2)
    half = 1 << (_HSV_SHIFT - 1)
    s = (diff * _SDIV[v] + half) >> _HSV_SHIFT
    h = np.where(v == r, g - b, np.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (h * _HDIV[diff] + half) >> _HSV_SHIFT
    h = np.where(h < 0, h + 256, h)
    return np.stack([np.minimum(h, 255), s, v], axis=2).astype(np.uint8)


def hsv_full_to_bgr(hsv: np.ndarray) -> np.ndarray:
    """uint8 ``cv2.COLOR_HSV2BGR_FULL``: hue in [0, 255] spans the circle."""
    h = hsv[:, :, 0].astype(np.float32) * np.float32(6.0 / 255)
    s = hsv[:, :, 1].astype(np.float32) * np.float32(1 / 255)
    v = hsv[:, :, 2].astype(np.float32) * np.float32(1 / 255)
    out = _hsv_sectors(h, s, v) * np.float32(255)
    np.rint(out, out=out)
    return np.clip(out, 0, 255, out=out).astype(np.uint8)


def bgr_to_hsv(image: np.ndarray) -> np.ndarray:
    """float32 ``cv2.COLOR_BGR2HSV`` of values in [0, 1]: hue in degrees [0, 360)."""
    b, g, r = image[:, :, 0], image[:, :, 1], image[:, :, 2]
    eps = np.float32(np.finfo(np.float32).eps)
    v = image.max(axis=2)
    diff = v - image.min(axis=2)
    s = diff / (np.abs(v) + eps)
    scale = np.float32(60.0) / (diff + eps)
    h = np.where(v == r, (g - b) * scale, np.where(v == g, (b - r) * scale + 120, (r - g) * scale + 240))
    h = np.where(h < 0, h + 360, h)
    return np.stack([h, s, v], axis=2).astype(np.float32)


def hsv_to_bgr(hsv: np.ndarray) -> np.ndarray:
    """float32 ``cv2.COLOR_HSV2BGR``: hue in degrees, saturation and value in [0, 1]."""
    return _hsv_sectors(hsv[:, :, 0] * np.float32(1 / 60), hsv[:, :, 1], hsv[:, :, 2])


def _hsv_sectors(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """BGR from hue in sixths of a turn, saturation and value: OpenCV's sector table."""
    h = np.mod(h, np.float32(6))
    sector = np.floor(h)
    fraction = (h - sector).astype(np.float32)
    sector = sector.astype(np.intp)
    bad = (sector < 0) | (sector >= 6)
    sector[bad], fraction[bad] = 0, 0
    tab = np.stack([v, v * (1 - s), v * (1 - s * fraction), v * (1 - s * (1 - fraction))], axis=2)
    pick = _SECTORS[sector]
    return np.take_along_axis(tab, pick, axis=2).astype(np.float32)
