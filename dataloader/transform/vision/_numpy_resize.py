"""OpenCV's ``resize`` in NumPy, for where OpenCV is missing (free-threaded 3.14t).

Each axis is resampled on its own: an output pixel is a weighted sum of a few
input pixels (its taps). Where the taps sit and what they weigh follow OpenCV's
``resize.cpp``, so results match it within a level or two (docs/vision.md,
"Without OpenCV"): pixel centres map by ``src = (dst + 0.5) * in / out - 0.5``,
borders replicate, LINEAR (2 taps), CUBIC (4, a = -0.75) and LANCZOS4 (8) do
not antialias; AREA averages exact boxes when shrinking and is bilinear-like
when enlarging; NEAREST samples ``floor(dst * in / out)`` and NEAREST_EXACT
pixel centres (OpenCV 5's fixed point may pick the neighbour where a centre
falls exactly on a pixel border). Sums run in float32 (float64 for float64 images), one gather per
tap, then integers are rounded and saturated. For uint8, LINEAR and enlarging AREA copy
OpenCV's fixed-point arithmetic (equal to OpenCV on ~99.7% of pixels) and LANCZOS4 its
weights in 1/2048ths, summed exactly (equal).
"""

from __future__ import annotations

import math

import numpy as np

#: OpenCV's interpolation flags, with OpenCV's values, so ``cv2.INTER_*`` works as well.
INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTER_LINEAR_EXACT, INTER_NEAREST_EXACT = 5, 6

_Taps = tuple[np.ndarray, np.ndarray]  # (indices, weights), each (outputs, taps)


def resize(image: np.ndarray, height: int, width: int, interpolation: int) -> np.ndarray:
    """An ``(H, W, C)`` image resized to ``(height, width, C)``, as ``cv2.resize`` would."""
    in_h, in_w = image.shape[:2]
    if interpolation in (INTER_NEAREST, INTER_NEAREST_EXACT):
        exact = interpolation == INTER_NEAREST_EXACT
        rows, columns = _nearest(in_h, height, exact), _nearest(in_w, width, exact)
        return np.ascontiguousarray(image[rows[:, None], columns])
    if interpolation == INTER_AREA and in_h >= height and in_w >= width:
        row_taps, column_taps = _area(in_h, height), _area(in_w, width)
    else:
        row_taps, column_taps = _interpolating(in_h, height, interpolation), _interpolating(
            in_w, width, interpolation
        )
    channels = image.shape[2]
    flat = image.reshape(in_h, in_w * channels)  # columns as (pixel, channel) pairs: 2-d takes
    column_taps = _per_channel(column_taps, channels)
    two_taps = row_taps[0].shape[1] == column_taps[0].shape[1] == 2
    if image.dtype == np.uint8 and two_taps and interpolation != INTER_LINEAR_EXACT:
        return _linear_uint8(flat, row_taps, column_taps).reshape(height, width, channels)
    work = np.float64 if image.dtype == np.float64 else np.float32
    fixed = image.dtype == np.uint8 and interpolation == INTER_LANCZOS4
    if fixed:  # OpenCV's 1/2048ths weights, summed exactly (float64) and rounded half up: equal
        row_taps, column_taps, work = _in_2048ths(row_taps), _in_2048ths(column_taps), np.float64
    if height / in_h <= width / in_w:  # shrink the axis that shrinks most first: less to gather
        out = _gather(_gather(flat, row_taps, 0, work), column_taps, 1, work)
    else:
        out = _gather(_gather(flat, column_taps, 1, work), row_taps, 0, work)
    if fixed:
        out = np.floor(out + 0.5, out=out)
    return _saturate(out, image.dtype).reshape(height, width, channels)


def _per_channel(taps: _Taps, channels: int) -> _Taps:
    """Column taps of pixels -> of the flat ``(H, W * C)`` image's columns, channel by channel."""
    indices, weights = taps
    flat = indices[:, None, :] * channels + np.arange(channels)[None, :, None]
    return flat.reshape(-1, indices.shape[1]), np.repeat(weights, channels, axis=0)


def _in_2048ths(taps: _Taps) -> _Taps:
    return taps[0], np.rint(taps[1].astype(np.float64) * 2048) / 2048


def _gather(image: np.ndarray, taps: _Taps, axis: int, work: type) -> np.ndarray:
    """The weighted sum of a few taps along ``axis`` of a 2-d image, one vectorised take per tap."""
    indices, weights = taps
    weights, shape = weights.astype(work), ((-1, 1) if axis == 0 else (1, -1))
    out: np.ndarray = np.take(image, indices[:, 0], axis=axis) * weights[:, 0].reshape(shape)
    for k in range(1, indices.shape[1]):
        out += np.take(image, indices[:, k], axis=axis) * weights[:, k].reshape(shape)
    return out


def _linear_uint8(flat: np.ndarray, row_taps: _Taps, column_taps: _Taps) -> np.ndarray:
    """Two-tap uint8 resizing in OpenCV's fixed point: weights in 1/2048ths, columns summed
    exactly, then rows combined as its vector code does (``>> 4``, a high-half multiply, ``+ 2 >> 2``)."""
    (rows, row_weights), (columns, column_weights) = row_taps, column_taps
    alpha = np.rint(column_weights.astype(np.float64) * 2048).astype(np.int32)
    beta = np.rint(row_weights.astype(np.float64) * 2048).astype(np.int32)
    needed = np.unique(rows)  # only the source rows some output row reads
    source = flat[needed]
    rows = np.searchsorted(needed, rows)
    across = np.take(source, columns[:, 0], axis=1).astype(np.int32) * alpha[:, 0]
    across += np.take(source, columns[:, 1], axis=1) * alpha[:, 1]
    across >>= 4
    np.clip(across, -32768, 32767, out=across)
    out = (np.take(across, rows[:, 0], axis=0) * beta[:, 0, None]) >> 16
    out += (np.take(across, rows[:, 1], axis=0) * beta[:, 1, None]) >> 16
    out += 2
    out >>= 2
    return np.clip(out, 0, 255, out=out).astype(np.uint8)


def _saturate(out: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        np.rint(out, out=out)
        np.clip(out, info.min, info.max, out=out)
    return out.astype(dtype, copy=False)


def _nearest(source: int, count: int, exact: bool) -> np.ndarray:
    dst = np.arange(count, dtype=np.int64)
    if exact:  # the pixel whose span holds the output pixel's centre, in exact integers
        index = ((2 * dst + 1) * source) // (2 * count)
    else:
        index = np.floor(dst * (1.0 / (count / source))).astype(np.int64)
    return np.clip(index, 0, source - 1)


def _interpolating(source: int, count: int, interpolation: int) -> _Taps:
    """LINEAR, CUBIC, LANCZOS4 and enlarging AREA: OpenCV's ``resizeGeneric`` tables."""
    scale = 1.0 / (count / source)
    dst = np.arange(count, dtype=np.float64)
    if interpolation == INTER_AREA:  # enlarging: OpenCV's "area mode" of linear
        start = np.floor(dst * scale)
        fraction = ((dst + 1) - (start + 1) * (count / source)).astype(np.float32)  # float first, as OpenCV
        fraction = np.where(fraction <= 0, np.float32(0), fraction - np.floor(fraction))
    else:
        position = ((dst + 0.5) * scale - 0.5).astype(np.float32)
        start = np.floor(position)
        fraction = position - start
        whole = fraction >= 1  # -1e-17 in float32 floors to -1 and leaves 1.0: the next pixel, exactly
        start[whole], fraction[whole] = start[whole] + 1, 0
    start = start.astype(np.int64)
    if interpolation in (INTER_CUBIC, INTER_LANCZOS4):
        weights = _cubic(fraction) if interpolation == INTER_CUBIC else _lanczos4(fraction)
    else:  # LINEAR, LINEAR_EXACT, AREA: the source position is clamped into the image
        low, high = start < 0, start >= source - 1
        fraction[low | high] = 0.0
        start = np.where(low, 0, np.where(high, source - 1, start))
        weights = np.stack([1.0 - fraction, fraction], axis=1)
    first = start - (weights.shape[1] // 2 - 1)
    indices = first[:, None] + np.arange(weights.shape[1])
    return np.clip(indices, 0, source - 1), weights.astype(np.float32)


def _cubic(x: np.ndarray) -> np.ndarray:
    a = np.float32(-0.75)
    w0 = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
    w1 = ((a + 2) * x - (a + 3)) * x * x + 1
    w2 = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
    return np.stack([w0, w1, w2, 1 - w0 - w1 - w2], axis=1)


def _lanczos4(x: np.ndarray) -> np.ndarray:
    s45 = math.sqrt(0.5)
    cs = np.array([(1, 0), (-s45, -s45), (0, 1), (s45, -s45), (-1, 0), (s45, s45), (0, -1), (-s45, s45)])
    x64 = x.astype(np.float64)[:, None]
    y0 = -(x64 + 3) * math.pi / 4
    y = -(x64 + 3 - np.arange(8)) * math.pi / 4
    with np.errstate(divide="ignore", invalid="ignore"):
        weights: np.ndarray = ((cs[:, 0] * np.sin(y0) + cs[:, 1] * np.cos(y0)) / (y * y)).astype(np.float32)
        total = np.zeros(len(x), dtype=np.float32)
        for k in range(8):  # summed in order and scaled by the reciprocal, in float32, as OpenCV does
            total += weights[:, k]
        weights *= (np.float32(1) / total)[:, None]
    at_pixel = x < np.finfo(np.float32).eps  # exactly on a source pixel: that pixel alone
    weights[at_pixel] = np.eye(8, dtype=np.float32)[3]
    return weights


def _area(source: int, count: int) -> _Taps:
    """Shrinking AREA: each output averages the input box it covers (OpenCV's resizeArea table)."""
    scale = source / count
    start = np.arange(count, dtype=np.float64) * scale
    end = start + scale
    cell = np.minimum(scale, source - start)
    taps = int(math.ceil(scale)) + 1
    pixel = np.floor(start)[:, None] + np.arange(taps)  # the pixels a box can touch
    overlap = np.minimum(pixel + 1, end[:, None]) - np.maximum(pixel, start[:, None])
    overlap = np.where(overlap > 1e-3, overlap, 0.0)  # OpenCV ignores slivers under 1e-3
    indices = np.minimum(pixel, source - 1).astype(np.int64)
    weights = np.where(pixel < source, overlap, 0.0) / cell[:, None]
    return indices, weights.astype(np.float32)
