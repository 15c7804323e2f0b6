"""``PackedStream``: the variable-length samples of a source packed into rows of ``seq_len``."""

from __future__ import annotations

from typing import Any, Iterator

from .._digest import qualified_name
from .._order_state import check_resume_epoch, fresh, order_of
from .._validate import check_choice, check_non_negative_int, check_optional_seed, check_positive_int
from ..dataset import StreamDataset
from .._world import resolve_world
from ..worker import get_worker_info
from ._checks import METHODS, checked_state, fields_of, pads_of, transform_of
from ._run import Plan, Run
from ._source import Source
from ._stats import Counts, PackStats
from ._window import TOO_LONG


class PackedStream(StreamDataset):
    """The variable-length samples of ``source`` packed into rows of exactly ``seq_len`` tokens.

    ``source`` is a stream (a ``StreamDataset`` such as :class:`~dataloader.ParquetStream`,
    :class:`~dataloader.TarStream`, :class:`~dataloader.MixedStream`, or any object whose
    ``__iter__`` starts a fresh pass) or a map dataset, read in order: one contiguous block of
    its indices per rank and, in each, one per worker. A sample is a dict of array-likes (NumPy
    arrays, lists of numbers) or one bare array-like, packed as the field ``"tokens"``.
    ``fields`` names the fields to pack (default: every field, each with a first axis); the
    others are left out of the rows. The packed fields of a sample must have one length; the
    first sample with tokens fixes each field's dtype and trailing shape (later ones are cast
    to it where NumPy's ``"same_kind"`` allows). ``transform`` (a function or a Transform) is
    applied to each sample first, in the process that packs.

    Each row is ``{f: (seq_len, *trailing) array, f + "_segment_ids": int32 (seq_len,),
    f + "_positions": int32 (seq_len,)}`` for each packed field ``f``: segment ids 1, 2, ...
    for the pieces in the row and 0 on padding (``pad_value``: a number or ``{field: number}``),
    positions 0, 1, ... within each piece and 0 on padding; the ids and positions are the same
    arrays for every field of a row.

    The packer reads a *window* of samples, until their tokens reach ``buffer_size * seq_len``
    (or the source ends), and packs it:

    - ``"best_fit"`` (default): best fit decreasing: pieces longest first, each into the row with
      the least room that still holds it, else a new row. The least padding.
    - ``"first_fit"``: pieces in arrival order, each into the first row with room, else a new row.

    With either, the window's emptiest row is held back: its pieces (at most ``seq_len`` tokens)
    go first into the next window, which fills the room it had (the source's last window yields
    every row).
    - ``"concat"``: the samples concatenated and cut into full rows, no padding (the GPT layout);
      the rest goes on in the next window, and at the end the last rest is one padded row. A
      sample continued from the row before starts at position 0 as a segment of its own.

    A larger ``buffer_size`` pads less and holds more tokens at once. The window's rows come in
    creation order, or with ``seed`` an int, shuffled by ``(seed, epoch, rank, worker, window)``.

    ``too_long``: a sample longer than ``seq_len`` is ``"split"`` (default: nothing is lost, the
    library's promise; its pieces of ``seq_len`` tokens and the rest, in order, each its own
    segment), ``"truncate"``-d to its first ``seq_len`` tokens, ``"drop"``-ped, or ``"raise"``-s
    a :class:`~dataloader.CollateError`. :meth:`stats` counts each. A sample of no tokens is
    counted (``empty_samples``) and adds nothing. Every token of every sample comes exactly once
    per epoch, in its order within the sample (a split sample's pieces in order across rows,
    unless ``seed`` shuffles the rows).

    Resuming: :meth:`state_dict` holds no open rows, only the tokens a window starts with (the
    row the window before held back, or concat's rest: at most ``seq_len``): the window being yielded is named by the source's position at its start and
    the rows of it already yielded, and a resume reads that window again. The position is the
    source's own ``state_dict()``; a stream without one is read again from its epoch's start
    and the samples before the window are dropped (exact when it reads the same samples each
    time); one with a ``resume_refused`` message refuses. :meth:`order_fingerprint` holds
    ``seq_len``, the method, ``buffer_size`` and every other argument that shapes the rows, so
    a state of another packing is refused. The packer pickles without its open reader: with
    ``DataLoader(..., parallel_stream=True)`` each worker packs its own share of the source.

    Example::

        packed = PackedStream(ParquetStream("tokens/", columns=["ids"]), seq_len=2048)
        loader = DataLoader(packed, StreamSampler(batch_size=8), num_workers=2)
        for batch in loader:
            batch["ids"], batch["ids_segment_ids"], batch["ids_positions"]  # (8, 2048) each
    """

    def __init__(
        self, source: Any, seq_len: int, *, method: str = "best_fit", fields: Any = None, pad_value: Any = 0,
        buffer_size: int = 64, too_long: str = "split", seed: int | None = None, transform: Any = None,
        world_size: int | None = None, rank: int | None = None,
    ) -> None:
        self.seq_len = check_positive_int("seq_len", seq_len)
        self.method = check_choice("method", method, METHODS)
        self.fields = fields_of(fields)
        self.pad_value = pads_of(pad_value, self.fields)
        self.buffer_size = check_positive_int("buffer_size", buffer_size)
        self.too_long = check_choice("too_long", too_long, TOO_LONG)
        self.seed = check_optional_seed("seed", seed)
        self.transform = transform
        self.world_size, self.rank = resolve_world(world_size, rank)
        self.source = source
        self._plan = Plan(Source(source, self.world_size, self.rank), self.seq_len, self.method, self.buffer_size,
                          self.fields, self.pad_value, self.too_long, self.seed, transform_of(transform))
        self._epoch: int | None = None  # set by set_epoch; None: count iter() calls
        self._iterations = 0
        self._run: Run | None = None
        self._resume: dict[str, Any] | None = None  # a loaded state: where the next iter() starts
        self._fingerprint: dict[str, Any] | None = None
        self._order_fields: dict[str, Any] | None = None

    def order_fingerprint(self) -> dict[str, Any]:
        """What decides the rows and their order, as plain values: the source's fingerprint (its
        ``order_fingerprint()``, else its class), ``seq_len``, the method, ``buffer_size``, the
        fields, ``too_long``, ``pad_value``, the seed, the transform's name and the world."""
        if self._fingerprint is None:
            self._fingerprint = {
                "kind": type(self).__name__,
                "source": self._plan.source.fingerprint(),
                "seq_len": self.seq_len,
                "method": self.method,
                "buffer_size": self.buffer_size,
                "fields": None if self.fields is None else list(self.fields),
                "too_long": self.too_long,
                "pad_value": self.pad_value,
                "seed": self.seed,
                "transform": None if self.transform is None else qualified_name(self.transform),
                "world_size": self.world_size,
                "rank": self.rank,
            }
        return self._fingerprint

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` at the next ``iter()`` calls (the loader calls this each epoch);
        the source is told it too."""
        self._epoch = check_non_negative_int("epoch", epoch)

    def stats(self) -> PackStats:
        """Samples, tokens, rows and padding (and the samples split, truncated, dropped or
        empty) of the iterator ``iter()`` returned last in this process (before any, zeros).
        With ``parallel_stream=True`` the workers pack, so the main process's copy counts nothing."""
        if self._run is not None:
            return self._run.snapshot()
        return Counts().snapshot(self._epoch or 0, self.seq_len)

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator ``iter()`` returned last stands, as plain values: ``{"epoch",
        "window"`` (windows done this epoch), ``"source"`` (the source's position at the
        window's start), ``"carry"`` (the tokens the window started with, as one string, or None),
        ``"emitted"`` (rows of the window yielded), ``"layout"`` (the fields' dtypes),
        ``"stats"`` (the counts at the window's start), ``"order"}``. Before any ``iter()``, the
        start of the next epoch."""
        if self._resume is not None:  # loaded, not read yet
            return self._resume
        if self._run is None:
            epoch = self._epoch if self._epoch is not None else self._iterations
            start: dict[str, Any] = {"epoch": epoch, "window": 0, "source": None, "carry": None, "emitted": 0, "layout": None, "stats": {}}
            return {**start, "order": self._order()}
        return {**self._run.state(), "order": self._order()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` (of epoch ``state["epoch"]``) go on exactly where ``state``
        was taken: the same rows as a run that was never interrupted. A state of a packer with
        another source, ``seq_len``, method, ``buffer_size`` (or any field of
        :meth:`order_fingerprint`) is refused, naming the field."""
        self._resume = checked_state(state, self._order())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        epoch = self._epoch
        if epoch is None:
            epoch, self._iterations = self._iterations, self._iterations + 1
        resume, self._resume = self._resume, None
        if resume is not None:
            check_resume_epoch("PackedStream", "rows", resume["epoch"], epoch)
        info = get_worker_info()
        worker, where = (0, "") if info is None else (info.id, f" in worker {info.id}")
        self._run = Run(self._plan, epoch, self.rank, worker, where, resume)
        return self._run.rows()

    def _order(self) -> dict[str, Any]:
        if self._order_fields is None:
            self._order_fields = order_of(self.order_fingerprint())
        return fresh(self._order_fields)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_run"] = None  # the open reader stays in the process that opened it
        state["_resume"] = None  # where the loader resumes this process's reading, not a copy's
        return state
