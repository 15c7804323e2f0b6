"""Short digests of plain values that survive the ways a state is saved.

A loader's state goes through ``json``, ``pickle``, ``torch.save`` and back; JSON turns tuples
into lists and integer keys into strings. :func:`canonical` maps a value to the form all of them
agree on, so :func:`digest` of a state is the same before saving and after loading.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def canonical(value: Any) -> Any:
    """``value`` as JSON would give it back: keys as JSON writes them, tuples as lists, NumPy
    scalars and arrays as Python numbers and lists; anything else by its ``repr``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {_key(key): canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return canonical(_plain(value))


def digest(value: Any, size: int = 8) -> str:
    """A hex digest of ``value``'s canonical form (``size`` bytes; not a secret, a checksum)."""
    text = json.dumps(canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def digest_array(array: Any, size: int = 8) -> str:
    """A hex digest of an integer array's values, from its bytes as little-endian int64: a
    million lengths in about a millisecond, where :func:`digest` would write them as JSON."""
    return hashlib.blake2b(np.asarray(array).astype("<i8").tobytes(), digest_size=size).hexdigest()


def _key(key: Any) -> str:
    """A dict key as JSON writes it (``1`` -> ``"1"``, ``True`` -> ``"true"``), else its ``repr``."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return repr(key)


def _plain(value: Any) -> Any:
    """What JSON cannot write, as what it can: NumPy values as Python ones, a set as the sorted
    ``repr`` of its items, anything else as its ``repr``."""
    tolist = getattr(value, "tolist", None)
    if tolist is not None:
        return tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(repr(item) for item in value)
    return repr(value)


def qualified_name(value: Any) -> str:
    """``module.Qualname`` of a function or class, or of an object's class."""
    kind = value if hasattr(value, "__qualname__") else type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def first_difference(name: str, theirs: Any, mine: Any) -> tuple[str, Any, Any] | None:
    """None where ``theirs`` and ``mine`` agree once saved (:func:`canonical`), else the first
    field that differs: ``name`` itself, or ``name.key`` (``key`` where ``name`` is empty) for a
    key of two dicts. What a loader's state and a mix's state are checked with before they
    place anything."""
    if canonical(theirs) == canonical(mine):
        return None
    if isinstance(theirs, dict) and isinstance(mine, dict):
        for key in sorted(set(theirs) | set(mine), key=str):
            if canonical(theirs.get(key)) != canonical(mine.get(key)):
                return f"{name}.{key}" if name else str(key), theirs.get(key), mine.get(key)
    return name, theirs, mine
