"""The fields of a loader's state, checked one by one and against each other.

A state that was edited by hand or corrupted must never place a resumed epoch somewhere it
never stood: each field must have its type and range, and the fields must agree (every batch
counted once, ``above`` above ``low``). The error names the field and what it holds.
"""

from __future__ import annotations

import numbers
from typing import Any

from .._stages.source import Source
from ..errors import ArgumentTypeError, ArgumentValueError

_FIX = (
    "Load the state as DataLoader.state_dict() returned it: an edited or corrupted state "
    "cannot say where the data stood."
)


def field_int(state: dict, name: str, low: int = 0, high: int | None = None) -> int:
    """``state[name]``, an integer in ``[low, high]``."""
    if name not in state:
        raise ArgumentValueError(f"the state has no {name!r} field. {_FIX}")
    return _int(state[name], name, low, high)


def _int(value: Any, name: str, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"the state's {name} must be an int; got {type(value).__name__} {value!r}. {_FIX}")
    if value < low or (high is not None and value > high):
        bounds = f"from {low}" + ("" if high is None else f" to {high}")
        raise ArgumentValueError(f"the state's {name} is {value}, outside its range ({bounds}). {_FIX}")
    return int(value)


def _list(state: dict, name: str) -> list:
    value = state.get(name)
    if not isinstance(value, (list, tuple)):
        raise ArgumentTypeError(f"the state's {name} must be a list; got {type(value).__name__} {value!r}. {_FIX}")
    return list(value)


def checked_position(state: dict, source: Source, length: int | None, repeats: int) -> dict[str, Any]:
    """The position fields of ``state``, checked; ``length``: batches per epoch, if known."""
    tasks_bound = length if source.tasks_are_batches else None  # task numbers count batches
    low = field_int(state, "low", 0, tasks_bound)
    above = [_int(key, "above", low + 1, None if tasks_bound is None else tasks_bound - 1) for key in _list(state, "above")]
    if len(set(above)) != len(above):
        raise ArgumentValueError(f"the state's above lists a batch twice: {sorted(above)}. {_FIX}")
    count = field_int(state, "count", 0, length)
    workers = _workers(state.get("workers"))
    last_worker = field_int(state, "last_worker", -1) if "last_worker" in state else -1
    if last_worker >= 0 and not workers.get(last_worker):
        raise ArgumentValueError(
            f"the state's last_worker is {last_worker}, a worker that handed out no batch "
            f"(workers: {state['workers']!r}). {_FIX}"
        )
    _agree(source, low, above, count, workers)
    partial = [_partial(entry, repeats) for entry in _list(state, "partial")]
    if not isinstance(state.get("source"), dict):
        raise ArgumentTypeError(f"the state's source must be a dict; got {type(state.get('source')).__name__}. {_FIX}")
    return {"low": low, "above": above, "count": count, "workers": workers, "last_worker": last_worker, "partial": partial}


def _workers(value: Any) -> dict[int, int]:
    if not isinstance(value, dict):
        raise ArgumentTypeError(f"the state's workers must be a dict; got {type(value).__name__} {value!r}. {_FIX}")
    counts = {}
    for key, count in value.items():
        try:
            worker = int(key)
        except (TypeError, ValueError):
            raise ArgumentValueError(f"the state's workers has the key {key!r}, not a worker id. {_FIX}") from None
        counts[_int(worker, "workers key", 0, None)] = _int(count, f"workers[{key!r}]", 0, None)
    return counts


def _agree(source: Source, low: int, above: list[int], count: int, workers: dict[int, int]) -> None:
    """Every batch handed out is counted once: by task (``low`` and ``above``) or by worker."""
    by_worker = sum(workers.values())
    if source.resumes_by_worker:
        if by_worker != count:
            raise ArgumentValueError(
                f"the state's count is {count} but its workers handed out {by_worker} batches "
                f"(workers: {workers}). {_FIX}"
            )
        return
    by_task = low + len(above)
    if (count != by_task) if source.tasks_are_batches else (count > by_task):
        raise ArgumentValueError(
            f"the state's count is {count} but low and above say {by_task} batches were handed out "
            f"(low={low}, above={above}). {_FIX}"
        )
    if by_worker > count:
        raise ArgumentValueError(f"the state's workers handed out {by_worker} batches, more than its count {count}. {_FIX}")


def _partial(entry: Any, repeats: int) -> tuple[int, int, int]:
    """One half-echoed batch: [task index, times handed out (1 to repeats - 1), worker or -1]."""
    if not isinstance(entry, (list, tuple)) or len(entry) != 3:
        raise ArgumentTypeError(f"the state's partial entries are [index, times, worker]; got {entry!r}. {_FIX}")
    index, times, worker = entry
    if repeats < 2:
        raise ArgumentValueError(f"the state's partial holds {entry!r}, but with repeats=1 nothing is echoed. {_FIX}")
    return _int(index, "partial index", 0, None), _int(times, "partial times", 1, repeats - 1), _int(worker, "partial worker", -1, None)
