"""Turn a list of samples into one batch: :class:`Collator`.

A batch mirrors the structure of one sample: every array leaf gains a leading
batch dimension, numbers become 1-d arrays, strings and bytes become lists,
and dicts, namedtuples, tuples and lists keep their shape. Anything else is a
:class:`~dataloader.errors.CollateError` naming the field, never a silent
truncation or an object array.

The hook: subclass :class:`Collator` and override ``apply`` to build batches
your own way (padding ragged boxes, say), and pass an instance as
``DataLoader(collator=...)``. Every output array here comes from the active
allocator (:func:`dataloader._alloc.empty`, filled in place, or
:func:`dataloader._alloc.adopt` for a column of numbers made in one NumPy call),
so inside a worker the batch is written straight into shared memory; a custom
collator that does the same gets that for free, one that returns fresh arrays
costs one extra copy.

Speed: a field whose values all have one exact type (the common case) takes a
bulk rule, one C-level pass per field; any other field, and any the bulk rule
cannot decide, takes the full rules, which also word every error.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from . import _alloc
from ._validate import check_apply_or_function
from .errors import CollateError

__all__ = ["Collator"]

_NUMBER_TYPES = (bool, int, float, complex, np.generic)
_FIX = "return numpy arrays or numbers from the dataset/transform, or pass a custom collator"
_MAX_SHOWN = 4  # how many distinct shapes / sample positions an error message lists


class Collator:
    """Combine samples of one structure into a batch (batch dimension first)."""

    def apply(self, samples: Iterable[Any]) -> Any:
        """Return the batch made of ``samples``, a non-empty list of like-shaped samples."""
        samples = samples if isinstance(samples, list) else list(samples)
        if not samples:
            raise CollateError("Collator.apply() needs at least one sample; got an empty list.")
        return _collate(samples, "sample")


class _FunctionCollator(Collator):
    """A plain function of the batch's samples as a collator (``collate_fn=fn``, PyTorch style)."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def apply(self, samples: Iterable[Any]) -> Any:
        return self.function(samples if isinstance(samples, list) else list(samples))

    def __repr__(self) -> str:
        return f"FunctionCollator({self.function!r})"


def as_collator(value: Any, name: str = "collator") -> Collator:
    """The loader's collator: a Collator as it is, a plain function of the list of samples
    wrapped, None the default; anything else (a class given for an instance, say) a clear error."""
    if value is None:
        return Collator()
    collator: Collator = check_apply_or_function(name, value, "Collator", _FunctionCollator)
    return collator


def _kind(value: Any) -> str:
    """The collate rule that applies to ``value``."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, _NUMBER_TYPES):
        return "number"
    if isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        return "array"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, tuple):
        return "namedtuple" if hasattr(type(value), "_fields") else "tuple"
    if isinstance(value, list):
        return "list"
    return "other"


def _collate(values: Sequence[Any], path: Any) -> Any:
    """Collate the values found at ``path`` in every sample (one per sample). The bulk rules
    pass ``path`` unformatted (see :func:`_named`); the full rules name it in every error."""
    first = type(values[0])
    natural = _NATURAL_DTYPES.get(first, _UNSEEN)
    if natural is _UNSEEN:
        natural = _natural_dtype(first)
    if natural is not None:
        column = _fast_column(values, natural)
        if column is not None:
            return column
    else:
        # A bulk rule checks in one C-level pass that every value takes it (see _FAST_RULES).
        fast = _FAST_RULES.get(first)
        batch = None if fast is None else fast(values, path)
        if batch is not None:
            return batch
    path = _named(path)
    types = set(map(type, values))
    kind = _kind(values[0])
    if len(types) > 1:
        kind = _common_kind(values, kind, path)
    return _RULES[kind](values, path)


def _named(path: Any) -> str:
    """``path`` as errors show it: a string as it is; a bulk rule's ``(parent, key, keyed)``
    formatted only now, as ``parent[key]`` (``keyed``: a dict key, shown by its repr)."""
    if type(path) is str:
        return path
    parent, key, keyed = path
    return f"{_named(parent)}[{key!r}]" if keyed else f"{_named(parent)}[{key}]"


def _all_of(cls: type, values: Sequence[Any]) -> bool:
    """Whether every value's type is exactly ``cls`` (one C-level pass, no set built)."""
    return operator.countOf(map(type, values), cls) == len(values)


_PLAIN_ARRAYS = {np.ndarray}
_dtype_of = operator.attrgetter("dtype")
# The dtype a column of numbers gets where they all have the first one's type: Python's numbers
# and NumPy's number scalars; None for every other type. Filled as types are met.
_UNSEEN: Any = object()  # what _NATURAL_DTYPES gives for a type it has not met yet
_NATURAL_DTYPES: dict[type, np.dtype | None] = {
    bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64), complex: np.dtype(np.complex128),
}


def _natural_dtype(cls: type) -> np.dtype | None:
    """The dtype a column of ``cls`` numbers gets, or None for anything but numbers (and for
    timedelta64, which the full rules handle); noted in ``_NATURAL_DTYPES``, which
    :func:`_collate` reads first, so this runs once per type."""
    dtype = np.dtype(cls) if issubclass(cls, (np.number, np.bool_)) else None
    natural = _NATURAL_DTYPES[cls] = dtype if dtype is not None and dtype.kind in "biufc" else None
    return natural


def _fast_column(values: Sequence[Any], natural: np.dtype) -> np.ndarray | None:
    """A column of numbers whose first has ``natural`` dtype, by NumPy's own inference (one C
    pass that also checks every value): kept only where it comes out 1-d in ``natural``.

    What the full rules make of such values is ``np.asarray`` of them too (numbers of mixed
    types, bools among ints) or the same stack of 0-d arrays, so the result is theirs. Where
    NumPy infers anything else (a float among ints, an int past int64, a string, a list, an
    object), or fails, or where floats have other numbers among them (an integer that float64
    would round), the full rules decide, and word the error.
    """
    try:
        column = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        return None
    dtype = column.dtype
    if (dtype is not natural and dtype != natural) or column.ndim != 1:
        return None
    if dtype.kind in "fc" and not _exact_floats(column, values):
        return None  # an integer among floats: the full rules check that the float holds it exactly
    return _alloc.adopt(column)


_largest = np.maximum.reduce
# Per float dtype, 2**(mantissa bits + 1): every integer under it in magnitude is exact in the
# dtype, and every integer from one past it on becomes a float of at least that magnitude.
_EXACT_BELOW: dict[np.dtype, float] = {}


def _exact_floats(column: np.ndarray, values: Sequence[Any]) -> bool:
    """Whether no integer among ``values`` changed in the float ``column`` NumPy made of them.

    Runs per float column per batch, so the cheap test goes first: a column under
    2**(mantissa bits + 1) in magnitude holds every integer exactly (one C pass, ~1 us for 256
    values); past it (a large value, inf, nan) only a column of one type passes
    (:func:`_all_of`, a Python-level call per value)."""
    limit = _EXACT_BELOW.get(column.dtype)
    if limit is None:
        limit = _EXACT_BELOW[column.dtype] = float(2 ** (np.finfo(column.dtype).nmant + 1))
    return bool(_largest(np.absolute(column)) < limit) or _all_of(type(values[0]), values)


def _fast_sequence(values: Sequence[Sequence[Any]], path: Any) -> list[Any] | None:
    """The fields of tuples or lists (all of the first one's exact type), column by column;
    None where the types or lengths differ."""
    if not _all_of(type(values[0]), values):
        return None
    try:
        columns = list(zip(*values, strict=True))
    except ValueError:
        return None
    return [_collate(column, (path, i, False)) for i, column in enumerate(columns)]


def _fast_tuple(values: Sequence[tuple[Any, ...]], path: Any) -> tuple[Any, ...] | None:
    columns = _fast_sequence(values, path)
    return None if columns is None else tuple(columns)


def _fast_dict(values: Sequence[dict[Any, Any]], path: Any) -> dict[Any, Any] | None:
    """The values of plain dicts key by key; None unless every one is a dict with the first
    one's keys (as many keys, and each of the first's found: no other set of keys passes)."""
    keys = list(values[0])
    if not _all_of(dict, values) or sum(map(len, values)) != len(keys) * len(values):
        return None
    try:
        columns = [list(map(operator.itemgetter(key), values)) for key in keys]
    except KeyError:
        return None
    return {k: _collate(column, (path, k, True)) for k, column in zip(keys, columns)}


def _fast_text(values: Sequence[str], path: Any) -> list[str] | None:
    """Strings as a list: ``"".join`` checks in C that every value is a ``str`` (a subclass
    such as ``numpy.str_`` included, which the full rules also keep as text)."""
    try:
        "".join(values)
    except TypeError:
        return None
    return list(values)


def _fast_bytes(values: Sequence[bytes], path: Any) -> list[bytes] | None:
    # Not b"".join: it also takes bytearray and memoryview, which the full rules refuse.
    return list(values) if _all_of(bytes, values) else None


def _fast_arrays(values: Sequence[np.ndarray], path: Any) -> np.ndarray | None:
    return _stack_alike(values) if _all_of(np.ndarray, values) else None


def _stack_alike(arrays: Sequence[np.ndarray]) -> np.ndarray | None:
    """The fast path for the common case: plain arrays of one shape and dtype stacked with one
    ``np.concatenate`` into the batch array (no per-sample views, no Python-level pass over
    shapes and dtypes). None when they differ, or are 0-d: the full path then decides."""
    first = arrays[0]
    if not first.ndim or first.dtype.hasobject:
        return None
    try:
        lengths = set(map(len, arrays))
    except TypeError:  # a 0-d array among others: the full path names the shapes
        return None
    if len(lengths) > 1 or len(set(map(_dtype_of, arrays))) > 1:
        return None
    out = _alloc.empty((len(arrays), *first.shape), first.dtype)
    rows = out.reshape(len(arrays) * first.shape[0], *first.shape[1:])
    try:
        # Equal lengths plus concatenate's own check of the other axes: equal shapes.
        np.concatenate(arrays, out=rows)
    except ValueError:
        return None  # ragged beyond the first axis: the full path names the shapes
    return out


def _common_kind(values: Sequence[Any], first: str, path: str) -> str:
    """The one rule for values of several types, or raise if they do not share one."""
    kinds = [_kind(v) for v in values]
    seen = set(kinds)
    if seen <= {"number", "array"}:  # e.g. np.float32 in one sample, a 0-d array in another
        return "array" if "array" in seen else "number"
    if "other" in seen:
        _unsupported(values, path, kinds.index("other"))
    if len(seen) > 1:
        i = next(i for i, k in enumerate(kinds) if k != first)
        raise CollateError(
            f"Cannot collate `{path}`: it has type {_type_name(values[0])} in sample 0 but "
            f"{_type_name(values[i])} in sample {i}; every sample must have the same structure."
        )
    return first


def _collate_arrays(values: Sequence[Any], path: str) -> np.ndarray:
    """The full path (``_collate`` tried the fast one for plain arrays)."""
    plain = set(map(type, values)) == _PLAIN_ARRAYS
    arrays: Sequence[np.ndarray] = values if plain else _as_arrays(values, path)
    dtypes = {a.dtype for a in arrays}
    if any(d.hasobject for d in dtypes):
        _unsupported(values, path, next(i for i, a in enumerate(arrays) if a.dtype.hasobject))
    if len({a.shape for a in arrays}) > 1:
        _ragged(arrays, path)
    dtype, casting = batch_dtype(arrays, path)
    out = _alloc.empty((len(arrays), *arrays[0].shape), dtype)
    _fill(lambda: np.stack(arrays, out=out, casting=casting), path)
    return out


def batch_dtype(arrays: Sequence[np.ndarray], path: str) -> tuple[np.dtype, Literal["same_kind", "unsafe"]]:
    """The dtype of the batch of ``arrays`` (of any shapes; PadCollator's too) and the casting
    that fills it: NumPy's promotion, integers kept exact (a CollateError where they cannot be)."""
    dtypes = {a.dtype for a in arrays}
    dtype = _promote(dtypes, path)
    if dtype.kind in "fc" and any(d.kind in "iu" for d in dtypes):
        _check_exact_arrays(arrays, dtype, path)
    sized = [a for a in arrays if a.size]
    if dtype.kind == "f" and all(d.kind in "iu" for d in dtypes) and sized:
        # Signed with uint64 promotes to float64: keep the integers exact in the type that
        # holds them all (checked, so the cast from the others' type loses nothing).
        return _integer_dtype(min(a.min() for a in sized), max(a.max() for a in sized), arrays, path), "unsafe"
    return dtype, "same_kind"


def _collate_numbers(values: Sequence[Any], path: str) -> np.ndarray:
    column = _fill(lambda: np.asarray(values), path)
    if column.dtype.kind in "fO" and all(map(_is_integer, values)):
        # NumPy makes float64 of integers past int64 (losing the digits above 2**53) and
        # objects of integers past uint64: keep them exact in the 64-bit type that holds them.
        column = np.array([int(v) for v in values], _integer_dtype(min(values), max(values), values, path))
    elif column.dtype.hasobject:  # an integer past 64 bits beside floats or bools
        i = next((i for i, v in enumerate(values) if _is_integer(v) and not _fits_64(v)), 0)
        _too_wide(values[i], i, path)
    elif column.dtype.kind in "fc":  # integers beside floats: kept only where the float is exact
        for i, value in enumerate(values):
            if _is_integer(value) and not _exact(column[i].item(), int(value)):
                _inexact(int(value), _type_name(value), i, [np.asarray(v).dtype for v in values], column.dtype, path)
    out = _alloc.empty(column.shape, column.dtype)
    out[...] = column
    return out


def _exact(number: Any, integer: int) -> bool:
    """Whether ``number`` (a float or complex from the column) is ``integer`` exactly."""
    if isinstance(number, complex):
        return number.imag == 0 and number.real == integer
    return bool(number == integer)  # Python compares an int and a float exactly


def _check_exact_arrays(arrays: Sequence[np.ndarray], dtype: np.dtype, path: str) -> None:
    """Integer arrays beside float ones become ``dtype``: refuse any integer it would change."""
    limit = 2 ** (np.finfo(dtype).nmant + 1)  # every integer up to this is exact in ``dtype``
    for i, array in enumerate(arrays):
        if array.dtype.kind not in "iu" or not array.size:
            continue
        if -limit <= int(array.min()) and int(array.max()) <= limit:
            continue
        cast = array.astype(dtype).ravel().tolist()
        for number, integer in zip(cast, array.ravel().tolist()):
            if not _exact(number, integer):
                _inexact(integer, str(array.dtype), i, [a.dtype for a in arrays], dtype, path)


def _inexact(integer: int, kind: str, i: int, dtypes: list[np.dtype], dtype: np.dtype, path: str) -> None:
    """Raise: ``integer`` (of type ``kind``) in sample ``i`` would change in the ``dtype``
    column that the float among ``dtypes`` (one per sample) makes of the field."""
    j = next((k for k, d in enumerate(dtypes) if d.kind in "fc"), 0)
    raise CollateError(
        f"Cannot collate `{path}`: the integer {integer} in sample {i} ({kind}) "
        f"would change in the {dtype} column that the {dtypes[j]} in sample {j} "
        f"makes ({dtype} holds integers exactly only up to 2**{np.finfo(dtype).nmant + 1}). Give the "
        "field one type in every sample (integers everywhere, or floats everywhere), or pass a "
        "custom collator."
    )


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _fits_64(number: Any) -> bool:
    return bool(-(2**63) <= number < 2**64)


def _integer_dtype(lowest: Any, highest: Any, values: Sequence[Any], path: str) -> np.dtype:
    """int64 or uint64, whichever holds every integer from ``lowest`` to ``highest``; else a
    CollateError naming the value (and the sample, among ``values``) that does not fit."""
    lowest, highest = int(lowest), int(highest)
    if lowest >= -(2**63) and highest < 2**63:
        return np.dtype(np.int64)
    if lowest >= 0 and highest < 2**64:
        return np.dtype(np.uint64)
    for number in (highest, lowest):
        if not _fits_64(number):
            _too_wide(number, _sample_of(values, number), path)
    raise CollateError(
        f"Cannot collate `{path}`: the integer {highest} in sample {_sample_of(values, highest)} "
        f"needs uint64, which cannot hold the negative {lowest} in sample "
        f"{_sample_of(values, lowest)}; {_FIX}."
    )


def _too_wide(number: Any, sample: int, path: str) -> None:
    raise CollateError(
        f"Cannot collate `{path}`: the integer {number} in sample {sample} fits neither int64 "
        f"nor uint64; {_FIX}."
    )


def _sample_of(values: Sequence[Any], number: int) -> int:
    """The first sample (a number or an integer array) that holds ``number``."""
    return next((i for i, v in enumerate(values) if np.any(np.asarray(v, dtype=object) == number)), 0)


def _collate_text(values: Sequence[Any], path: str) -> list[Any]:
    return list(values)


def _collate_mapping(values: Sequence[Mapping[Any, Any]], path: str) -> dict[Any, Any]:
    keys = values[0].keys()
    for i, value in enumerate(values):
        if value.keys() != keys:
            raise CollateError(
                f"Cannot collate `{path}`: sample 0 has keys {list(keys)} but sample {i} has "
                f"keys {list(value.keys())}; every sample must have the same keys."
            )
    return {k: _collate([v[k] for v in values], f"{path}[{k!r}]") for k in keys}


def _collate_sequence(values: Sequence[Sequence[Any]], path: str) -> list[Any]:
    if len(set(map(len, values))) > 1:
        lengths = [len(v) for v in values]
        raise CollateError(
            f"Cannot collate `{path}`: lengths differ between samples: "
            f"{_grouped([f'length {n}' for n in lengths])}; every sample must have the same "
            "structure."
        )
    return [_collate(column, f"{path}[{i}]") for i, column in enumerate(zip(*values))]


def _collate_tuple(values: Sequence[tuple[Any, ...]], path: str) -> tuple[Any, ...]:
    return tuple(_collate_sequence(values, path))


def _collate_list(values: Sequence[list[Any]], path: str) -> list[Any]:
    return _collate_sequence(values, path)


def _collate_namedtuple(values: Sequence[tuple[Any, ...]], path: str) -> tuple[Any, ...]:
    cls = type(values[0])
    odd = next((i for i, v in enumerate(values) if type(v) is not cls), None)
    if odd is not None:
        raise CollateError(
            f"Cannot collate `{path}`: it has type {_type_name(values[0])} in sample 0 but "
            f"{_type_name(values[odd])} in sample {odd}; every sample must have the same "
            "structure."
        )
    return cls(*_collate_sequence(values, path))


def _collate_other(values: Sequence[Any], path: str) -> Any:
    _unsupported(values, path, 0)


# The bulk rules, by the first value's exact type (numbers take _fast_column first). A bulk
# rule checks that the other values take it too, and gives exactly what the full rules give, or
# None where it cannot tell (types, lengths or keys that differ, ragged arrays); the full rules
# then collate the values again and name the problem, so results and errors are the same.
_FAST_RULES: dict[type, Callable[[Sequence[Any], Any], Any]] = {
    np.ndarray: _fast_arrays, str: _fast_text, bytes: _fast_bytes,
    tuple: _fast_tuple, list: _fast_sequence, dict: _fast_dict,
}

_RULES: dict[str, Callable[[Sequence[Any], str], Any]] = {
    "array": _collate_arrays,
    "number": _collate_numbers,
    "str": _collate_text,
    "bytes": _collate_text,
    "mapping": _collate_mapping,
    "namedtuple": _collate_namedtuple,
    "tuple": _collate_tuple,
    "list": _collate_list,
    "other": _collate_other,
}


def _as_arrays(values: Sequence[Any], path: str) -> list[np.ndarray]:
    try:
        return [np.asarray(v) for v in values]
    except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
        if any(getattr(v, "is_nested", False) is True for v in values):
            raise CollateError(
                f"Cannot collate `{path}`: batches of nested tensors are not currently supported "
                "by the default collate_fn (Collator): their samples have no common shape to "
                "stack. Pass a collate_fn (collator) of your own, one that keeps them in a list."
            ) from exc
        raise CollateError(f"Cannot collate `{path}`: {exc}; {_FIX}.") from exc


def _promote(dtypes: set[np.dtype], path: str) -> np.dtype:
    if len(dtypes) == 1:
        return next(iter(dtypes))
    dtype: np.dtype = _fill(lambda: functools.reduce(np.result_type, dtypes), path)
    return dtype


def _fill(step: Callable[[], Any], path: str) -> Any:
    """Run one numpy step, turning numpy's complaint into a CollateError naming ``path``."""
    try:
        return step()
    except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
        raise CollateError(f"Cannot collate `{path}`: {exc}; {_FIX}.") from exc


def _ragged(arrays: Sequence[np.ndarray], path: str) -> None:
    shapes = _grouped([a.shape for a in arrays])
    if len({a.shape[1:] for a in arrays}) == 1 and all(a.ndim for a in arrays):  # PadCollator's case
        raise CollateError(
            f"Cannot collate `{path}`: arrays have different shapes: {shapes}. To pad them to the "
            "longest, pass collator=PadCollator() (dataloader.PadCollator); or resize them to one shape."
        )
    raise CollateError(
        f"Cannot collate `{path}`: arrays have different shapes: {shapes}. They differ in more than "
        "the first axis (which PadCollator pads): resize them to one shape in the dataset/transform, or "
        "pass a custom collator."
    )


def _unsupported(values: Sequence[Any], path: str, i: int) -> None:
    value = values[i]
    what = "an object-dtype array" if _kind(value) == "array" else _type_name(value)
    raise CollateError(f"Cannot collate `{path}`: got {what} in sample {i}; {_FIX}.")


def _grouped(items: Sequence[Any]) -> str:
    """'(3,) in samples 0, 2; (4,) in sample 1' — each distinct item and where it was seen."""
    where: dict[Any, list[int]] = {}
    for i, item in enumerate(items):
        where.setdefault(item, []).append(i)
    parts = [f"{item} in {_positions(idx)}" for item, idx in list(where.items())[:_MAX_SHOWN]]
    more = len(where) - _MAX_SHOWN
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _positions(idx: list[int]) -> str:
    shown = ", ".join(str(i) for i in idx[:_MAX_SHOWN])
    rest = f", ... ({len(idx)} in all)" if len(idx) > _MAX_SHOWN else ""
    return f"sample{'s' if len(idx) > 1 else ''} {shown}{rest}"


def _type_name(value: Any) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
