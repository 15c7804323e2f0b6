"""Argument checks shared by the vision transforms.

Each check names the argument, the value it got and what is allowed, in the
shape of :mod:`dataloader._validate`, and returns the value normalised (tuples
of Python numbers) so that the transforms never re-check it at apply time.
"""

from __future__ import annotations

import numbers
from typing import Any

from ...errors import ArgumentTypeError, ArgumentValueError
from . import _numpy_resize as R

#: The interpolation flags a transform accepts: OpenCV's values, so ``cv2.INTER_*`` works too.
INTERPOLATIONS = {
    R.INTER_NEAREST: "INTER_NEAREST",
    R.INTER_LINEAR: "INTER_LINEAR",
    R.INTER_CUBIC: "INTER_CUBIC",
    R.INTER_AREA: "INTER_AREA",
    R.INTER_LANCZOS4: "INTER_LANCZOS4",
    R.INTER_LINEAR_EXACT: "INTER_LINEAR_EXACT",
    R.INTER_NEAREST_EXACT: "INTER_NEAREST_EXACT",
}


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_sequence(value: Any) -> bool:
    return isinstance(value, (tuple, list)) or (
        hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, str)
    )


def size_pair(name: str, value: Any) -> tuple[int, int]:
    """``n`` -> ``(n, n)``; ``(h, w)`` -> ``(h, w)``; positive integers only."""
    if is_int(value):
        value = (value, value)
    if not is_sequence(value) or len(value) != 2 or not all(is_int(v) for v in value):
        raise ArgumentTypeError(
            f"`{name}` must be a positive integer or a (height, width) pair of them; got {value!r}."
        )
    if min(value) < 1:
        raise ArgumentValueError(f"`{name}` must be positive; got {tuple(value)!r}.")
    return int(value[0]), int(value[1])


def number_pair(name: str, value: Any, low: float = -float("inf")) -> tuple[float, float]:
    """A ``(min, max)`` pair of numbers with ``low <= min <= max``."""
    if not is_sequence(value) or len(value) != 2 or not all(is_number(v) for v in value):
        raise ArgumentTypeError(f"`{name}` must be a (min, max) pair of numbers; got {value!r}.")
    lo, hi = float(value[0]), float(value[1])
    if not low <= lo <= hi:
        bound = "" if low == -float("inf") else f"{low:g} <= "
        raise ArgumentValueError(f"`{name}` must satisfy {bound}min <= max; got {tuple(value)!r}.")
    return lo, hi


def probability(name: str, value: Any) -> float:
    if not is_number(value):
        raise ArgumentTypeError(f"`{name}` must be a number in [0, 1]; got {value!r}.")
    if not 0.0 <= value <= 1.0:
        raise ArgumentValueError(f"`{name}` must be a number in [0, 1]; got {value!r}.")
    return float(value)


def interpolation(name: str, value: Any) -> tuple[int, ...]:
    """One ``INTER_*`` flag (OpenCV's values), or a sequence of them (one is drawn per sample)."""
    choices = tuple(value) if is_sequence(value) else (value,)
    if not choices or not all(is_int(v) and v in INTERPOLATIONS for v in choices):
        allowed = ", ".join(INTERPOLATIONS.values())
        raise ArgumentValueError(
            f"`{name}` must be one of {allowed}, or a non-empty sequence of them; got {value!r}."
        )
    return tuple(int(v) for v in choices)


def pad_sizes(name: str, value: Any) -> tuple[int, int, int, int]:
    """MegEngine's padding forms -> ``(top, bottom, left, right)``.

    ``n`` pads all four sides; ``(bottom, right)`` pads two; ``(top, bottom,
    left, right)`` is taken as is.
    """
    if is_int(value):
        sizes: tuple[int, ...] = (value,) * 4
    elif is_sequence(value) and len(value) in (2, 4) and all(is_int(v) for v in value):
        sizes = (0, value[0], 0, value[1]) if len(value) == 2 else tuple(value)
    else:
        raise ArgumentTypeError(
            f"`{name}` must be an integer, a (bottom, right) pair or a (top, bottom, left, right) "
            f"4-tuple of integers; got {value!r}."
        )
    if min(sizes) < 0:
        raise ArgumentValueError(f"`{name}` must not be negative; got {value!r}.")
    return tuple(int(v) for v in sizes)  # type: ignore[return-value]


def fill(name: str, value: Any) -> float | tuple[float, ...]:
    """A padding value: one number, or one per channel."""
    if is_number(value):
        number: float = value
        return number
    if is_sequence(value) and len(value) > 0 and all(is_number(v) for v in value):
        return tuple(value)
    raise ArgumentTypeError(
        f"`{name}` must be a number or a non-empty sequence of numbers (one per channel); "
        f"got {value!r}."
    )


def per_channel(name: str, value: Any, nonzero: bool = False) -> tuple[float, ...]:
    """A number or one number per channel (``Normalize``'s ``mean``/``std``)."""
    values = tuple(value) if is_sequence(value) else (value,)
    if not values or not all(is_number(v) for v in values):
        raise ArgumentTypeError(
            f"`{name}` must be a number or a sequence of numbers (one per channel); got {value!r}."
        )
    if nonzero and any(v == 0 for v in values):
        raise ArgumentValueError(f"`{name}` must not contain 0; got {value!r}.")
    return tuple(float(v) for v in values)


def jitter_range(name: str, value: Any) -> tuple[float, float] | None:
    """A colour factor: ``v >= 0`` means ``[max(0, 1 - v), 1 + v]``; or a ``[min, max]`` pair.

    Returns ``None`` when the factor cannot change the image (0, or ``[1, 1]``).
    """
    if is_number(value):
        if not value >= 0:
            raise ArgumentValueError(
                f"`{name}` must be a number >= 0 or a [min, max] pair with 0 <= min <= max; "
                f"got {value!r}."
            )
        lo, hi = max(0.0, 1.0 - value), 1.0 + value
    else:
        lo, hi = number_pair(name, value, low=0.0)
    return None if lo == hi == 1.0 else (lo, hi)


def hue_range(name: str, value: Any) -> tuple[float, float] | None:
    """A hue shift: ``0 <= v <= 0.5`` means ``[-v, v]``; or ``[min, max]`` in ``[-0.5, 0.5]``."""
    if is_number(value):
        if not 0.0 <= value <= 0.5:
            raise ArgumentValueError(
                f"`{name}` must be a number in [0, 0.5] or a [min, max] pair with "
                f"-0.5 <= min <= max <= 0.5; got {value!r}."
            )
        lo, hi = -float(value), float(value)
    else:
        lo, hi = number_pair(name, value, low=-0.5)
        if hi > 0.5:
            raise ArgumentValueError(
                f"`{name}` must satisfy -0.5 <= min <= max <= 0.5; got {tuple(value)!r}."
            )
    return None if lo == hi == 0.0 else (lo, hi)
