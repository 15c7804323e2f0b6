"""The packed fields of samples: which they are, their dtypes and trailing shapes (fixed by the
first sample), and each sample's arrays of them, checked to have one length."""

from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from ..errors import CollateError

BARE = "tokens"  # the field a sample that is a bare array (not a dict) is packed as


class Fields:
    """The packed fields, learnt from the first sample where ``names`` is None (every field)."""

    def __init__(self, names: tuple[str, ...] | None, where: str) -> None:
        self.names = names
        self.where = where  # " in worker 1", or ""
        self.dtypes: list[np.dtype] = []
        self.trailing: list[tuple[int, ...]] = []
        self._cast_ok: set[tuple[int, np.dtype]] = set()
        self._saved: str | None = None

    def saved(self) -> str | None:
        """The fields learnt (names, dtypes, trailing shapes) as one string, None before any: a
        resume packs with the dtypes the epoch's first sample fixed, not its window's first."""
        if not self.dtypes:
            return None
        if self._saved is None:
            self._saved = json.dumps([[n, d.str, list(t)] for n, d, t in zip(self.names or (), self.dtypes, self.trailing)])
        return self._saved

    def restore(self, text: str | None) -> None:
        """Learn the fields from what :meth:`saved` returned."""
        if text is not None:
            learnt = json.loads(text)
            self.names = tuple(name for name, _, _ in learnt)
            self.dtypes = [np.dtype(dtype) for _, dtype, _ in learnt]
            self.trailing = [tuple(shape) for _, _, shape in learnt]

    def arrays(self, sample: Any, number: int) -> list[np.ndarray]:
        """The packed fields of ``sample`` (sample ``number`` of the epoch) as arrays of one length."""
        values = self._values(sample, number)
        arrays = [v if type(v) is np.ndarray and v.ndim else self._array(v, at, number) for at, v in enumerate(values)]
        size = len(arrays[0])
        if len(arrays) > 1 and [len(array) for array in arrays].count(size) != len(arrays):
            lengths = {name: len(array) for name, array in zip(self.names or (), arrays)}
            raise CollateError(
                f"PackedStream: the packed fields of sample {number} of the epoch{self.where} differ in "
                f"length: {lengths}. The packed fields of a sample must have one length (a token each); "
                "name only those in `fields=`, or fix the sample in a `transform=`."
            )
        if not size:
            return arrays  # an empty sample: it adds no tokens, and fixes no dtype
        if not self.dtypes:
            self._check_plain(arrays, number)
            self.dtypes = [array.dtype for array in arrays]
            self.trailing = [array.shape[1:] for array in arrays]
            return arrays
        for at, (array, dtype, trailing) in enumerate(zip(arrays, self.dtypes, self.trailing)):
            if array.dtype != dtype or array.shape[1:] != trailing:
                self._check(at, array, number)
        return arrays

    def _values(self, sample: Any, number: int) -> list[Any]:
        if type(sample) is np.ndarray and self.names == (BARE,):
            return [sample]
        names = self.names
        if type(sample) is dict and names is not None:
            try:  # the common case, without the checks below
                return [sample[names[0]]] if len(names) == 1 else [sample[name] for name in names]
            except KeyError:
                pass
        if not isinstance(sample, Mapping):
            if self.names is None:
                self.names = (BARE,)
            if self.names != (BARE,):
                raise CollateError(
                    f"PackedStream: sample {number} of the epoch{self.where} is a {type(sample).__name__}, "
                    f"not a dict, but `fields={list(self.names)}` names fields. Give dict samples, or "
                    "fields=None (a bare array is packed as the field 'tokens')."
                )
            return [sample]
        if self.names is None:
            self.names = tuple(str(name) for name in sample)
        missing = [name for name in self.names if name not in sample]
        if missing:
            raise CollateError(
                f"PackedStream: sample {number} of the epoch{self.where} has no field {missing[0]!r} "
                f"(it has {sorted(map(str, sample))}); every sample must hold the packed fields "
                f"{list(self.names)}. Name only the fields every sample has in `fields=`."
            )
        return [sample[name] for name in self.names]

    def _array(self, value: Any, at: int, number: int) -> np.ndarray:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if array.ndim == 0:
            name = self.names[at] if self.names else BARE
            raise CollateError(
                f"PackedStream: field {name!r} of sample {number} of the epoch{self.where} is a scalar "
                f"({array!r}); a packed field needs a first axis (its tokens). Pack only sequence "
                "fields: name them in `fields=`, and the others are left out of the rows."
            )
        return array

    def _check_plain(self, arrays: list[np.ndarray], number: int) -> None:
        """No object arrays: a state carries a field's tokens as bytes, and an object array's
        bytes are addresses, which no resume (in another process) can read back."""
        for at, array in enumerate(arrays):
            if array.dtype.hasobject:
                name = (self.names or (BARE,))[at]
                raise CollateError(
                    f"PackedStream: field {name!r} of sample {number} of the epoch{self.where} is an object "
                    "array, which a state cannot carry (its bytes are addresses). Pack numbers (a "
                    "tokenizer's ids) or fixed-width strings: convert it in a `transform=` "
                    "(np.asarray(values, dtype=np.int32), or dtype=str)."
                )

    def _check(self, at: int, array: np.ndarray, number: int) -> None:
        """The same trailing shape as the first sample's, and a dtype that casts to its "same_kind"."""
        name, dtype = (self.names or (BARE,))[at], self.dtypes[at]
        if array.shape[1:] != self.trailing[at]:
            raise CollateError(
                f"PackedStream: field {name!r} of sample {number} of the epoch{self.where} has shape "
                f"{array.shape}, but the first sample's tokens had the trailing shape {self.trailing[at]}; "
                "every token of a field must have one shape. Fix the samples, or leave the field out of `fields=`."
            )
        if array.dtype != dtype and (at, array.dtype) not in self._cast_ok:
            if not np.can_cast(array.dtype, dtype, "same_kind"):
                raise CollateError(
                    f"PackedStream: field {name!r} of sample {number} of the epoch{self.where} is "
                    f"{array.dtype}, which does not cast to {dtype} (the first sample's dtype) as the "
                    "same kind. Give every sample one dtype (cast it in a `transform=`)."
                )
            self._cast_ok.add((at, array.dtype))
