"""What a source's own saved state carries of its order fingerprint, and the check of it.

A position (a stream's ``{"epoch", "rows"}``, a mix's draws) means something only for the
source that saved it. A DataLoader's state carries its source's fingerprint and checks it;
a source's ``state_dict()`` carries it too, as ``"order"`` (:func:`order_of`), so that its
``load_state_dict()`` called directly refuses a state of another source, naming the first
field that differs (:func:`check_order`), as the loader does. States travel with every
batch: a value whose saved form is long is carried as a digest.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ._digest import canonical, digest, first_difference
from .errors import ArgumentValueError

# Characters of a value's saved (JSON) form carried as they are; a longer value as its digest.
_LONG = 48


def order_of(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """``fingerprint`` as a state carries it: each value (each value of a dict value) as it is
    where short, else as its digest. A new dict."""
    return {
        key: {name: _short(item) for name, item in value.items()} if isinstance(value, dict) else _short(value)
        for key, value in fingerprint.items()
    }


def fresh(order: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``order`` (JSON-like: dicts, lists, scalars) for a state to carry: it is made
    per batch, and ``copy.deepcopy`` costs three times as much for its memo."""
    return {key: _copied(value) for key, value in order.items()}


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _short(value: Any) -> Any:
    plain = canonical(value)
    return plain if len(json.dumps(plain)) <= _LONG else digest(value)


def check_order(owner: str, noun: str, saved: Any, mine: Mapping[str, Any], why: Mapping[str, str]) -> None:
    """Raise an ``ArgumentValueError`` naming the first field where a state's ``saved`` order
    differs from ``mine`` (``owner``: who loads it, "ParquetStream"; ``noun``: "stream";
    ``why``: per top-level field, why it must match)."""
    differing = first_difference("", saved, dict(mine))
    if differing is None:
        return
    field, theirs, value = differing
    field = field or "order"  # a saved order that is not a dict differs as a whole
    reason = why.get(field.partition(".")[0], "it decides which items come in which order")
    raise ArgumentValueError(
        f"{owner}.load_state_dict: the state was saved by a {noun} with {field}={theirs!r}; this "
        f"{noun} has {field}={value!r} ({reason}). Build the {noun} as the one that saved the state, "
        "or start it afresh without load_state_dict()."
    )


def check_resume_epoch(owner: str, items: str, saved: int, epoch: int) -> None:
    """Refuse to start ``iter()`` of ``epoch`` from a loaded state of epoch ``saved`` (``owner``:
    "MixedStream", "ParquetStream"...; ``items``: what it yields, "items" or "rows")."""
    if saved != epoch:
        raise ArgumentValueError(
            f"{owner}: the state given to load_state_dict() is a position in epoch {saved}, but this "
            f"iter() reads epoch {epoch}; its {items} would be another epoch's. Call set_epoch() with "
            "the state's epoch first (a DataLoader does), or load the state as state_dict() returned it."
        )
