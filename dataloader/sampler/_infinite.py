"""``Infinite``: a sampler restarted whenever it ends, resumable at any batch."""

from __future__ import annotations

import sys
from typing import Any, Iterator

from .._reshard import Handed
from .._validate import check_len, check_non_negative_int
from ..errors import ArgumentTypeError, ArgumentValueError
from ._base import Sampler
from ._map import MapSampler
from ._reading import batches_from, sampler_state


class Infinite(Sampler):
    """Wraps a sampler and restarts it whenever it ends, forever.

    Attributes of the wrapped sampler (``batch_size``, ``set_epoch``, ...) are reachable through
    this object. It pickles without its live iterator: a copy resumes at the same batch (for
    samplers with ``set_epoch``) because it keeps only the pass's epoch and the batches consumed.
    """

    _wraps_one = True  # yields_valid_indices trusts it as far as the sampler it wraps

    def __init__(self, sampler: Sampler) -> None:
        if not hasattr(type(sampler), "__iter__"):
            raise ArgumentTypeError(f"`sampler` must be a Sampler; got {type(sampler).__name__}.")
        if check_len("sampler", sampler) == 0:  # None: no length (a stream)
            raise ArgumentValueError(
                f"`sampler` must yield at least one batch to repeat; got a "
                f"{type(sampler).__name__} with len() == 0. Lower `batch_size` or set "
                "`drop_last=False`."
            )
        self.sampler = sampler
        self._pass_epoch: int | None = None  # epoch of the pass in progress
        self._consumed = 0  # batches handed out from that pass
        self._iter: Iterator[list[int]] | None = None

    def __iter__(self) -> Infinite:
        return self

    def __next__(self) -> list[int]:
        if self._iter is None:  # first call, or first call after unpickling
            self._iter = self._open(self._consumed)
        for _ in range(2):
            try:
                batch = next(self._iter)
            except StopIteration:
                self._iter = self._open(0)
                continue
            self._consumed += 1
            return batch
        raise RuntimeError(f"the wrapped {type(self.sampler).__name__} yielded no batches.")

    def __len__(self) -> int:
        return sys.maxsize

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails. Reading `sampler` from __dict__ (not via
        # self.sampler) avoids endless recursion while pickle builds an empty instance.
        sampler = self.__dict__.get("sampler")
        if sampler is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(sampler, name)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_iter"] = None  # a live generator cannot be pickled; __next__ rebuilds it
        return state

    def state_dict(self) -> dict[str, Any]:
        """The pass in progress, the batches taken from it, and the wrapped sampler's state."""
        return {
            "pass_epoch": self._pass_epoch,
            "consumed": self._consumed,
            "sampler": sampler_state(self.sampler),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s ``state``: the next batch is the one after it."""
        if state.get("sampler") is not None:
            self.sampler.load_state_dict(state["sampler"])  # type: ignore[attr-defined]
        self._pass_epoch = state["pass_epoch"]
        self._consumed = check_non_negative_int("consumed", state["consumed"])
        self._iter = None

    def reshard_from(self, states: list[dict[str, Any]], handed: tuple[Handed, ...]) -> None:
        """Continue the pass that ranks of another world were in (see
        :meth:`MapSampler.reshard_from`): ``states`` are their ``Infinite`` states as the loader's
        epoch began, ``handed`` the loader's batches each rank handed out since."""
        first = states[0]
        if any((state.get("pass_epoch"), state.get("consumed")) != (first.get("pass_epoch"), first.get("consumed")) for state in states):
            raise ArgumentValueError("the ranks' Infinite states are at different passes: pass the states every rank took at the same step.")
        inner = self.sampler
        if not isinstance(inner, MapSampler) or not all(isinstance(s.get("sampler"), dict) for s in states):
            raise ArgumentValueError(
                f"Infinite over a {type(inner).__name__} cannot resume on another number of ranks: "
                "only a map sampler of this library says which indices each rank took."
            )
        first_pass = first["pass_epoch"] if first.get("pass_epoch") is not None else first["sampler"]["epoch"]
        before = int(first["consumed"]) if first.get("pass_epoch") is not None else 0
        # The pass the slowest rank is in, counted in batches from the start of `first_pass`.
        pass_epoch, start, length = _pass_holding(inner, first["sampler"], first_pass, before + min(h.low for h in handed))
        in_pass = []
        for done in handed:
            local = Handed(before + done.low - start, tuple(before + k - start for k in done.extra))
            if local.low > length or any(k >= length for k in local.extra):
                raise ArgumentValueError(
                    "a rank handed out batches of the next pass of the Infinite sampler before the "
                    "others finished this one (in_order=False, or states of different steps); such "
                    "states cannot be reshaped to another number of ranks. Resume on the same "
                    "world_size, or pass the states every rank took at the same step."
                )
            in_pass.append(local)
        inner.reshard_from([{**s["sampler"], "epoch": pass_epoch} for s in states], tuple(in_pass))
        self._pass_epoch, self._consumed, self._iter = pass_epoch, 0, None

    def _open(self, skip: int) -> Iterator[list[int]]:
        """Start a pass of the wrapped sampler; ``skip`` > 0 resumes the recorded pass."""
        if skip and self._pass_epoch is not None:
            self.sampler.set_epoch(self._pass_epoch)  # type: ignore[attr-defined]  # a sampler with epochs
        self._pass_epoch = getattr(self.sampler, "epoch", None)
        self._consumed = skip
        return batches_from(self.sampler, skip)


def _pass_holding(inner: MapSampler, state: dict[str, Any], first_pass: int, batch: int) -> tuple[int, int, int]:
    """The pass of ``inner`` (saved as ``state``, by a sampler of another world) that holds
    batch ``batch`` of a run of passes from ``first_pass`` on: its epoch, its first batch in
    that count and its length. The first pass may be one an earlier resume reshaped."""
    start, pass_epoch = 0, first_pass
    length = inner._length_of({**state, "epoch": pass_epoch})
    if batch >= length:  # later passes are whole epochs of the saving world, all as long
        later = max(1, inner._length_of({**state, "epoch": pass_epoch + 1}))
        skipped = 1 + (batch - length) // later
        start, pass_epoch, length = length + (skipped - 1) * later, pass_epoch + skipped, later
    return pass_epoch, start, length
