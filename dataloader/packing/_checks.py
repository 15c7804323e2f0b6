"""The checks of a packer's arguments, and of a state given to resume it."""

from __future__ import annotations

import numbers
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .._order_state import check_order
from .._validate import check_apply_or_function, check_non_negative_int, fits_dtype
from ..errors import ArgumentTypeError, ArgumentValueError

METHODS = ("best_fit", "first_fit", "concat")
STATE_KEYS = ("epoch", "window", "source", "carry", "emitted", "layout", "stats", "order")
# Why each part of a packer's order_fingerprint() must match for a state to resume it.
_WHY = {
    "kind": "a state of another kind of stream places nothing here",
    "source": "the packer would read other samples, or the same samples in another order",
    "seq_len": "the rows would be cut otherwise",
    "method": "the rows would be packed otherwise",
    "buffer_size": "it decides which samples share a window, so the rows",
    "fields": "it decides what a row holds",
    "too_long": "it decides what becomes of a long sample",
    "pad_value": "it decides what a row holds",
    "seed": "it decides the order of a window's rows",
    "transform": "it makes the samples that are packed",
    "world_size": "each process's share of the source depends on it",
    "rank": "each process's share of the source depends on it",
}


def fields_of(fields: Any) -> tuple[str, ...] | None:
    """None (every field), or the names as a tuple of distinct non-empty strings."""
    if fields is None:
        return None
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise ArgumentTypeError(
            f"`fields` must be None (pack every field) or a list of field names; got {fields!r}."
            + (f" For one field write fields=[{fields!r}]." if isinstance(fields, str) else "")
        )
    names = tuple(fields)
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad or not names:
        raise ArgumentValueError(f"`fields` must name fields by non-empty strings; got {list(names)!r}.")
    if len(set(names)) < len(names):
        raise ArgumentValueError(f"`fields` names a field twice: {list(names)!r}.")
    return names


def pads_of(pad_value: Any, fields: tuple[str, ...] | None) -> Any:
    """A number, or ``{field: number}`` (a field it does not name pads with 0)."""
    if isinstance(pad_value, Mapping):
        unknown = [name for name in pad_value if fields is not None and name not in fields]
        if unknown:
            raise ArgumentValueError(
                f"`pad_value` names the field {unknown[0]!r}, which is not packed (fields={list(fields or ())}). "
                "Give a pad value only to packed fields."
            )
        return {str(name): _number(f"pad_value[{name!r}]", value) for name, value in pad_value.items()}
    return _number("pad_value", pad_value)


def _number(name: str, value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Number):
        raise ArgumentTypeError(f"`{name}` must be a number (or a dict of field -> number); got {value!r}.")
    return value


def pad_for(name: str, pad: Any, dtype: np.dtype) -> Any:
    """``pad`` as a value of a numeric field's ``dtype`` (fixed by the first sample), or an error
    where the dtype cannot hold it (-1 in uint8, 0.5 in int32): NumPy would raise a bare
    OverflowError mid-epoch, or pad with another value than the one asked for."""
    if dtype.kind not in "biufc":
        return pad
    if not fits_dtype(pad, dtype):
        raise ArgumentValueError(
            f"PackedStream: pad_value {pad!r} for the field {name!r} does not fit its dtype {dtype} "
            "(the first sample with tokens fixed it). Give a pad value that dtype holds "
            f"(pad_value={{{name!r}: ...}}), or cast the field in a `transform=`."
        )
    fitted = np.array(pad, dtype=dtype)
    return fitted[()]


def transform_of(transform: Any) -> Callable[[Any], Any] | None:
    """A function of a sample: ``transform`` itself, or a Transform's ``apply`` (checked as the
    loader checks its own ``transform``)."""
    if transform is None:
        return None
    checked = check_apply_or_function("transform", transform, "Transform", lambda function: function)
    apply: Callable[[Any], Any] = getattr(checked, "apply", checked)
    return apply


def checked_state(state: Any, order: dict[str, Any]) -> dict[str, Any]:
    """``state`` if it is a ``state_dict()`` of a packer whose ``order_fingerprint()`` is ``order``,
    else an error naming what differs."""
    if not (isinstance(state, Mapping) and set(STATE_KEYS) <= set(state)):
        raise ArgumentValueError(
            "PackedStream.load_state_dict: the state must be what a PackedStream's state_dict() "
            f"returned, a dict of {', '.join(repr(k) for k in STATE_KEYS)}; got {state!r}."
        )
    check_order("PackedStream", "packer", state["order"], order, _WHY)
    for key in ("epoch", "window", "emitted"):
        check_non_negative_int(f"state[{key!r}]", state[key])
    if not (state["carry"] is None or isinstance(state["carry"], str)):
        raise ArgumentValueError(f"PackedStream.load_state_dict: state['carry'] must be None or a string; got {state['carry']!r}.")
    if not isinstance(state["stats"], Mapping):
        raise ArgumentValueError(f"PackedStream.load_state_dict: state['stats'] must be a dict of counts; got {state['stats']!r}.")
    return dict(state)
