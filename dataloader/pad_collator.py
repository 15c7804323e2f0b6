"""Batches of variable-length samples: :class:`PadCollator`.

Token sequences, audio frames, boxes per image: arrays whose first axis differs from sample
to sample. The default :class:`~dataloader.collator.Collator` refuses them (it never pads
silently); this collator pads each such field to the longest in the batch, rounded up to
``multiple_of``, and leaves every other field to the default rules. Output arrays come from
the active allocator (:func:`dataloader._alloc.empty`), so inside a worker the padded batch is
written once, straight into shared memory.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Sequence

import numpy as np

from . import _alloc
from ._validate import check_positive_int, fits_dtype
from .collator import Collator, batch_dtype
from .errors import ArgumentTypeError, ArgumentValueError, CollateError

__all__ = ["PadCollator"]

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)
_FIX = "give the field an array of at least 1 dimension (or a list of numbers) in every sample, or leave it out of `fields`"


class PadCollator(Collator):
    """Pad array fields along their first axis to the longest in the batch, collate the rest.

    ``pad_value``: the number written past each sample's end; a dict ``{field: number}`` gives
    one per field (fields it does not name pad with 0), e.g. ``{"input_ids": 0, "labels": -100}``.
    ``multiple_of``: the padded length is rounded up to a multiple of it (8 or 64 keep tensor
    cores busy). ``fields``: the fields to pad (dict keys, or positions of tuple samples);
    None pads every field that holds an array.

    The rules, for a sample of each kind:

    - A ``dict`` (any mapping): its top-level keys are the fields (nested dicts are collated
      as the default collator does, not padded). Each padded field ``f`` is followed in the
      batch by ``f"{f}_lengths"``: an int64 array of the samples' original lengths.
    - A ``tuple``, namedtuple or ``list``: its positions are the fields; the batch keeps the
      sample's structure, ``(tokens, label)`` giving ``(padded_tokens, labels)``, with no
      lengths (use dict samples to get them).
    - An array (or a list of numbers): the batch is the padded array, with no lengths.

    An array field is a NumPy array of at least 1 dimension, anything with ``__array__`` (an
    Arrow array, a tensor), or a list of numbers (as a Parquet list column arrives): it
    counts as a 1-d array. With ``fields=None`` a field is padded where sample 0 holds one
    there, so a batch's keys do not depend on its lengths; 0-d arrays and numbers are
    collated as by the default collator. Axes past the first must agree between samples; the
    dtype is the default collator's (NumPy's promotion, integers kept exact; an empty list
    takes the others' dtype, and empty lists alone the pad value's: int64 for an int). A pad
    value that does not fit that dtype (-1 in uint8, 0.5 in int32) is a
    :class:`~dataloader.errors.CollateError` naming the field, as is a field in ``fields``
    that is not an array in some sample, and axes that differ past the first.
    """

    def __init__(
        self, pad_value: Any = 0, *, multiple_of: int = 1, fields: Iterable[Hashable] | None = None
    ) -> None:
        self.multiple_of = check_positive_int("multiple_of", multiple_of)
        self.fields = _check_fields(fields)
        self.pad_value = _check_pad_value(pad_value, self.fields)

    def __repr__(self) -> str:
        fields = None if self.fields is None else list(self.fields)
        return f"PadCollator(pad_value={self.pad_value!r}, multiple_of={self.multiple_of}, fields={fields!r})"

    def apply(self, samples: Iterable[Any]) -> Any:
        """The batch of ``samples`` (a non-empty list), padded fields as the class says."""
        samples = samples if isinstance(samples, list) else list(samples)
        if not samples:
            raise CollateError("PadCollator.apply() needs at least one sample; got an empty list.")
        first = samples[0]
        if isinstance(first, Mapping):
            return self._dicts(samples)
        whole = _as_array(first)
        if isinstance(first, (tuple, list)) and whole is None:
            return self._sequences(samples)
        self._padded([], None, "the samples are arrays or numbers, which have no fields")
        if whole is None:
            return super().apply(samples)  # numbers or strings: nothing to pad
        return self._pad(samples, "sample", self._pad_for(None))[0]

    def _dicts(self, samples: list[Mapping[Any, Any]]) -> dict[Any, Any]:
        keys = list(samples[0])
        for i, sample in enumerate(samples):
            if not isinstance(sample, Mapping) or sample.keys() != samples[0].keys():
                _differs(samples, i, "keys", keys)
        padded = self._padded(keys, samples[0], f"the samples' keys are {keys}")
        rest = [k for k in keys if k not in padded]
        collated = super().apply([{k: s[k] for k in rest} for s in samples]) if rest else {}
        batch = {}
        for key in keys:
            if key not in padded:
                batch[key] = collated[key]
                continue
            lengths_key = f"{key}_lengths"
            if lengths_key in keys:
                raise CollateError(
                    f"Cannot pad `sample[{key!r}]`: the samples have a key {lengths_key!r} already, where "
                    "PadCollator puts the padded field's lengths; rename that key."
                )
            path = f"sample[{key!r}]"
            batch[key], batch[lengths_key] = self._pad([s[key] for s in samples], path, self._pad_for(key))
        return batch

    def _sequences(self, samples: list[Sequence[Any]]) -> Any:
        first = samples[0]
        for i, sample in enumerate(samples):
            if type(sample) is not type(first) or len(sample) != len(first):
                _differs(samples, i, "length" if type(sample) is type(first) else "type", len(first))
        positions = list(range(len(first)))
        padded = self._padded(positions, first, f"the samples have the positions {positions}")
        rest = [i for i in positions if i not in padded]
        # A dict keyed by position: the default collator names its fields `sample[i]`, as for tuples.
        collated = super().apply([{i: s[i] for i in rest} for s in samples]) if rest else {}
        items = [
            self._pad([s[i] for s in samples], f"sample[{i}]", self._pad_for(i))[0] if i in padded
            else collated[i] for i in positions
        ]
        if isinstance(first, list):
            return items
        return type(first)(*items) if hasattr(type(first), "_fields") else tuple(items)

    def _padded(self, names: list[Any], first: Any, where: str) -> set[Any]:
        """The fields to pad among ``names``: ``fields``, or those where ``first`` holds an
        array; an error where ``fields`` or a ``pad_value`` dict names any other."""
        if self.fields is not None:
            _check_named("fields", self.fields, names, where)
            padded = set(self.fields)
        else:
            padded = {n for n in names if _as_array(first[n]) is not None}
        if isinstance(self.pad_value, dict):
            shown = [n for n in names if n in padded]
            _check_named("pad_value", self.pad_value, padded, f"the padded fields are {shown}")
        return padded

    def _pad_for(self, name: Any) -> Any:
        return self.pad_value.get(name, 0) if isinstance(self.pad_value, dict) else self.pad_value

    def _pad(self, values: list[Any], path: str, pad: Any) -> tuple[np.ndarray, np.ndarray]:
        """The padded batch of one field's ``values`` and their lengths (int64)."""
        arrays = [_array_at(v, i, path) for i, v in enumerate(values)]
        # An empty list says nothing of the field's dtype or other axes: the other samples decide.
        empty = [isinstance(v, list) and not v for v in values]
        typed = [i for i, is_empty in enumerate(empty) if not is_empty] or list(range(len(values)))
        _check_trailing(arrays, typed, path)
        if all(empty):
            # Only empty lists (NumPy's float64 for them): the pad value's type, int64 for a
            # token column's int pad, as its batches with tokens have.
            dtype = np.asarray(pad).dtype
        else:
            dtype, _ = batch_dtype([arrays[i] for i in typed], path)
        _check_fits(pad, dtype, path)
        lengths = [len(a) for a in arrays]
        size = -(-max(lengths) // self.multiple_of) * self.multiple_of
        out = _alloc.empty((len(arrays), size, *arrays[typed[0]].shape[1:]), dtype)
        if min(lengths) == size:  # nothing to pad: one concatenate, as the default collator does
            np.concatenate(arrays, out=out.reshape(len(arrays) * size, *out.shape[2:]), casting="unsafe")
        else:
            _fill(out, arrays, min(lengths), pad)
        counts = _alloc.empty((len(arrays),), np.dtype(np.int64))
        counts[:] = lengths
        return out, counts


def _fill(out: np.ndarray, arrays: list[np.ndarray], shortest: int, pad: Any) -> None:
    """Write ``arrays`` into the rows of ``out``, ``pad`` past their ends (from ``shortest`` on)."""
    out[:, shortest:] = pad  # every row's data overwrites the part before its end
    # Plain assignment, twice as fast as np.copyto: batch_dtype has checked that every value
    # fits the dtype (uint64 into int64 too), and an empty list's float64 has none to cast.
    for row, array in zip(out, arrays):
        row[: len(array)] = array


def _as_array(value: Any) -> np.ndarray | None:
    """``value`` as an array to pad (at least 1-d), or None where it is no such thing."""
    if isinstance(value, np.ndarray):
        return value if value.ndim else None
    if isinstance(value, list):
        if value and not isinstance(value[0], _NUMBERS):
            return None  # positions of a structure (a list of arrays, say): not one array
        try:
            array = np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            return None
        return array if array.ndim == 1 and (array.dtype.kind in "biufc" or not value) else None
    if isinstance(value, (str, bytes, tuple, Mapping)) or not hasattr(value, "__array__"):
        return None
    array = np.asarray(value)
    return array if array.ndim else None


def _array_at(value: Any, i: int, path: str) -> np.ndarray:
    array = _as_array(value)
    if array is None or array.dtype.hasobject:
        raise CollateError(
            f"Cannot pad `{path}`: sample {i} has {_what(value)} there, not an array of at least 1 "
            f"dimension or a list of numbers; {_FIX}."
        )
    return array


def _what(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.dtype.hasobject:
        return "an object-dtype array"
    if isinstance(value, list):
        return "a list (not of numbers)"
    if hasattr(value, "__array__") and not isinstance(value, (str, bytes)):
        return "a 0-d array"
    return type(value).__name__


def _check_trailing(arrays: list[np.ndarray], typed: list[int], path: str) -> None:
    """Raise unless the arrays at ``typed`` all have the first one's shape past the first axis."""
    model = arrays[typed[0]]
    odd = next((i for i in typed if arrays[i].shape[1:] != model.shape[1:]), None)
    if odd is not None:
        raise CollateError(
            f"Cannot pad `{path}`: arrays differ past the first axis, which PadCollator does not pad: "
            f"shape {model.shape} in sample {typed[0]}, {arrays[odd].shape} in sample {odd}. Give them one "
            "size on every other axis (resize or crop in the transform)."
        )


def _check_named(option: str, named: Iterable[Any], names: Iterable[Any], where: str) -> None:
    """Raise if ``option`` (``fields`` or a ``pad_value`` dict) names a field not in ``names``."""
    missing = [n for n in named if n not in names]
    if missing:
        raise CollateError(
            f"PadCollator's `{option}` names {missing}, but {where}; name keys of dict samples or "
            "positions (0, 1, ...) of tuple samples, each holding an array to pad."
        )


def _check_fits(pad: Any, dtype: np.dtype, path: str) -> None:
    if not fits_dtype(pad, dtype):
        holds = f" (it holds {np.iinfo(dtype).min} to {np.iinfo(dtype).max})" if dtype.kind in "iu" else ""
        raise CollateError(
            f"Cannot pad `{path}`: pad_value {pad!r} does not fit its dtype {dtype}{holds}. Give a pad "
            "value the dtype holds, per field if need be: pad_value={'field': value, ...}."
        )


def _check_fields(fields: Any) -> tuple[Hashable, ...] | None:
    if fields is None:
        return None
    if isinstance(fields, (str, bytes)) or not isinstance(fields, Iterable):
        raise ArgumentTypeError(
            f"`fields` must be None or a list of field names; got {fields!r}. Write fields=[{fields!r}]."
        )
    names = tuple(dict.fromkeys(fields))
    if not names:
        raise ArgumentValueError("`fields` must name at least one field to pad; got an empty list. Use None to pad every array field.")
    return names


def _check_pad_value(pad_value: Any, fields: tuple[Hashable, ...] | None) -> Any:
    if isinstance(pad_value, Mapping):
        values = dict(pad_value)
        for value in values.values():
            _check_pad_number(value)
        unpadded = [k for k in values if fields is not None and k not in fields]
        if unpadded:
            raise ArgumentValueError(
                f"`pad_value` gives values for {unpadded}, which `fields` {list(fields or ())} does not name; "
                "add them to `fields`, or drop them from `pad_value`."
            )
        return values
    return _check_pad_number(pad_value)


def _check_pad_number(value: Any) -> Any:
    if not isinstance(value, _NUMBERS):
        raise ArgumentTypeError(
            f"`pad_value` must be a number or a dict of numbers per field; got {value!r}."
        )
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        raise ArgumentValueError(
            f"`pad_value` must fit a 64-bit integer or a float; got {value!r}, which no array dtype holds."
        )
    return value


def _differs(samples: list[Any], i: int, what: str, first: Any) -> None:
    """Raise: sample ``i`` has other keys, another length or another type than sample 0."""
    if what == "keys" and isinstance(samples[i], Mapping):
        raise CollateError(
            f"Cannot collate `sample`: sample 0 has keys {first} but sample {i} has keys "
            f"{list(samples[i])}; every sample must have the same keys."
        )
    if what == "length":
        raise CollateError(
            f"Cannot collate `sample`: lengths differ between samples: length {first} in sample 0, "
            f"length {len(samples[i])} in sample {i}; every sample must have the same structure."
        )
    raise CollateError(
        f"Cannot collate `sample`: it has type {type(samples[0]).__name__} in sample 0 but "
        f"{type(samples[i]).__name__} in sample {i}; every sample must have the same structure."
    )
