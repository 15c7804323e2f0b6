"""Argument checks shared by every public constructor.

Each check raises an error that names the argument, the value it got and
what is allowed, in one shape: "`batch_size` must be a positive integer; got 0."
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from typing import Any

import numpy as np

from .errors import ArgumentTypeError, ArgumentValueError


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive_int(name: str, value: Any, hint: str = "") -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    if not _is_int(value):
        raise ArgumentTypeError(f"`{name}` must be a positive integer; got {value!r}.{_sep(hint)}")
    if value < 1:
        raise ArgumentValueError(f"`{name}` must be a positive integer; got {value!r}.{_sep(hint)}")
    return int(value)


def check_non_negative_int(name: str, value: Any, hint: str = "") -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 0."""
    if not _is_int(value):
        raise ArgumentTypeError(
            f"`{name}` must be a non-negative integer; got {value!r}.{_sep(hint)}"
        )
    if value < 0:
        raise ArgumentValueError(
            f"`{name}` must be a non-negative integer; got {value!r}.{_sep(hint)}"
        )
    return int(value)


def check_non_negative_number(name: str, value: Any, hint: str = "") -> float:
    """Return ``value`` as a float, or raise if it is not a real number >= 0 (NaN is not)."""
    _check_non_negative_real(name, value, hint)
    try:
        return float(value)
    except OverflowError:  # an int beyond the largest float
        raise ArgumentValueError(
            f"`{name}` must be a number >= 0 that fits a float; got an integer of "
            f"{int(value).bit_length()} bits.{_sep(hint)}"
        ) from None


def _check_non_negative_real(name: str, value: Any, hint: str) -> None:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ArgumentTypeError(f"`{name}` must be a number >= 0; got {value!r}.{_sep(hint)}")
    if not value >= 0:  # also rejects NaN
        raise ArgumentValueError(f"`{name}` must be a number >= 0; got {value!r}.{_sep(hint)}")


# The longest finite wait, in seconds: the executor waits with ``poll()``, which takes a C int
# of milliseconds (2**31 - 1 ms is about 24.8 days). Longer waits are "forever" in practice.
MAX_TIMEOUT = 2**31 // 1000


def check_timeout(name: str, value: Any, hint: str = "Use 0 (or float('inf')) to wait forever.") -> float:
    """Return ``value`` in seconds, 0.0 meaning "wait forever"; infinity is taken as 0.0.

    A finite value above :data:`MAX_TIMEOUT` (an int too large for a float too) is refused here
    rather than overflowing the first wait that uses it.
    """
    _check_non_negative_real(name, value, hint)
    if value == math.inf:
        return 0.0
    if value > MAX_TIMEOUT:
        huge = isinstance(value, numbers.Integral) and value >= 2**64  # repr: too long to read
        shown = f"an integer of {int(value).bit_length()} bits" if huge else repr(value)
        raise ArgumentValueError(
            f"`{name}` must be at most {MAX_TIMEOUT} seconds (about 24 days); got {shown}.{_sep(hint)}"
        )
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    """Return ``value``, or raise if it is not a bool."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"`{name}` must be True or False; got {value!r}.")
    return value


def check_optional_seed(name: str, value: Any) -> int | None:
    """Return ``value`` (None or an integer in [0, 2**64)), or raise."""
    if value is None:
        return None
    if not _is_int(value):
        raise ArgumentTypeError(f"`{name}` must be None or a non-negative integer; got {value!r}.")
    if not 0 <= value < 2**64:
        raise ArgumentValueError(f"`{name}` must be in [0, 2**64); got {value!r}.")
    return int(value)


def check_has_apply(name: str, value: Any, kind: str) -> Any:
    """Raise unless ``value`` has a callable ``apply`` (a Transform or a Collator instance)."""
    check_not_a_class(name, value, kind)
    if not callable(getattr(value, "apply", None)):
        raise ArgumentTypeError(
            f"`{name}` must be a {kind} (an object with an `apply` method); "
            f"got {type(value).__name__}. Subclass dataloader.{kind} or give it an `apply` method."
        )
    return value


def check_apply_or_function(name: str, value: Any, kind: str, wrap: Any) -> Any:
    """``value`` if it has a callable ``apply`` (a KIND instance); a plain function given as
    PyTorch and torchvision take one, wrapped by ``wrap``; a class or anything else a clear error."""
    check_not_a_class(name, value, kind)
    if not callable(getattr(value, "apply", None)) and callable(value):
        return wrap(value)
    return check_has_apply(name, value, kind)


def check_not_a_class(name: str, value: Any, kind: str) -> None:
    """Raise if ``value`` is a class: the user passed ``T`` where ``T()`` was meant, which
    otherwise fails only at the first batch (``apply()`` missing its ``self``)."""
    if isinstance(value, type):
        raise ArgumentTypeError(
            f"`{name}` must be a {kind} instance; got the class {value.__name__}. Pass an "
            f"instance, {value.__name__}(...), not the class itself."
        )


def check_len(name: str, value: Any) -> int | None:
    """``len(value)``, or None when it has none (no ``__len__``, or one raising ``TypeError``,
    as a stream's has). Raise when ``__len__`` returns anything but an integer >= 0, which
    ``len()`` would refuse only later, with a bare ``ValueError`` or ``TypeError``."""
    length = getattr(type(value), "__len__", None)
    if length is None:
        return None
    try:
        size = length(value)
    except TypeError:
        return None
    if not _is_int(size):
        raise ArgumentTypeError(
            f"`len({name})` must be a non-negative integer; {type(value).__name__}.__len__ "
            f"returned {size!r}."
        )
    if size < 0:
        raise ArgumentValueError(
            f"`len({name})` must be a non-negative integer; {type(value).__name__}.__len__ "
            f"returned {size!r}."
        )
    return int(size)


def check_choice(name: str, value: Any, choices: tuple) -> Any:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ArgumentValueError(f"`{name}` must be one of {allowed}; got {value!r}.")
    return value


def _sep(hint: str) -> str:
    return f" {hint}" if hint else ""


def warn_argument(message: str, category: type[Warning] = UserWarning) -> None:
    """A warning (a ``UserWarning`` unless ``category`` says otherwise) about an argument that
    is accepted but has no effect, or not all of it, shown at the user's line: the first
    caller outside this package."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "dataloader":
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def fits_dtype(pad: Any, dtype: np.dtype) -> bool:
    """Whether an array of ``dtype`` holds the number ``pad`` (a float's rounding aside; never a
    change of kind: a fraction in integers, an overflow to inf, an integer rounded in a float).
    For the pad values of PadCollator and PackedStream."""
    if isinstance(pad, (complex, np.complexfloating)):
        if dtype.kind == "c":
            return fits_dtype(pad.real, np.dtype(np.float64)) and fits_dtype(pad.imag, np.dtype(np.float64))
        if pad.imag:
            return False
        pad = pad.real
    if dtype.kind == "b":
        return bool(pad == 0 or pad == 1)
    if dtype.kind in "iu":
        if not float(pad).is_integer() and not isinstance(pad, (int, np.integer)):
            return False
        info = np.iinfo(dtype)
        return bool(info.min <= int(pad) <= info.max)
    if dtype.kind in "fc":
        with np.errstate(over="ignore"):
            cast = np.array(pad).astype(dtype)
        if np.isfinite(pad) and not np.all(np.isfinite(cast)):
            return False
        return not isinstance(pad, (int, np.integer)) or int(cast.real) == int(pad)
    return False  # strings, dates: a number is no pad for them
