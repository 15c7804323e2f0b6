"""``ParquetStream`` and ``ArrowStream``: columnar files as a stream, sharded over ranks and workers.

Building one reads the files' metadata (:mod:`._readers`); each ``iter()``
plans the epoch (:mod:`._sharding`), reads this shard's pieces, and turns
them into rows or batches (:mod:`._batching`).
"""

from __future__ import annotations

import functools
from typing import Any, Iterator

import numpy as np

from .._digest import digest
from .._order_state import check_resume_epoch, fresh, order_of
from .._remote import RETRIES, access_from
from .._validate import check_bool, check_choice, check_non_negative_int, check_optional_seed, check_positive_int
from ..dataset import Collated, StreamDataset
from ..errors import ArgumentValueError
from .._world import resolve_world
from ..worker import get_worker_info
from ._batching import batch_rows, cut_batches, drop_rows, in_pieces, rows_of, shuffled_windows
from ._convert import STRINGS, table_to_batch
from ._elastic import check_state, check_world, gather, history_json, history_of, kept
from ._files import ARROW_SUFFIXES, PARQUET_SUFFIXES, files_fingerprint, resolve_files
from ._planner import Planner, Reshard
from ._readers import ArrowUnits, ParquetUnits, Units
from ._scattered import scattered
from ._snapshot import stamps_fingerprint
from ._stream_stats import Progress, StreamStats
from ._sharding import Layout, Piece, shard_range, window_rng
from ._table_dataset import check_fill_null

SURPLUS = ("drop", "carry")
# Why each field of the order fingerprint must match for a saved position to be loaded.
_WHY = {
    "kind": "a state of another kind of stream places nothing here",
    "files": "the rows would come from other files",
    "stamps": "the files were rewritten since: their rows are not the ones the state counted",
    "row_groups": "the rows are cut into other units, so the epoch's plan differs",
    "columns": "a state is a position in the rows of the columns read",
    "filter": "it decides which rows an epoch holds",
    "batch_size": "the epoch's plan cuts the shards by whole batches",
    "shuffle": "it decides the order of the rows",
    "seed": "it decides the order of the rows",
    "shuffle_buffer": "it decides the order of the rows",
    "world_size": "each process's share of the rows depends on it",
    "rank": "each process's share of the rows depends on it",
    "equal": "it decides which rows an epoch holds",
    "surplus": "it decides which rows an epoch holds",
}


class ColumnarStream(StreamDataset):
    """What :class:`ParquetStream` and :class:`ArrowStream` share; see :class:`ParquetStream`."""

    _suffixes: tuple[str, ...] = ()
    _units_type: type[Units] = Units
    # load_state_dict() takes every rank's states of another world (a loader passes them on).
    loads_rank_states = True

    def __init__(
        self, source: Any, *, batch_size: int | None = None, columns: Any = None, filter: Any = None,
        shuffle: bool = False, seed: int | None = 0, shuffle_buffer: int = 0, world_size: int | None = None,
        rank: int | None = None, equal: bool = False, surplus: str = "drop", strings: str = "object",
        fill_null: Any = None, filesystem: Any = None, verify_checksums: bool = False, retries: int = RETRIES,
        read_ahead: int | None = None, cache_dir: Any = None, cache_limit: int | None = None,
    ) -> None:
        kind = type(self).__name__
        self.batch_size = None if batch_size is None else check_positive_int("batch_size", batch_size)
        self.yields_batches = batch_size is not None  # each item is then a Collated batch
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_optional_seed("seed", seed) or 0  # None: 0, as every process must agree
        self.shuffle_buffer = check_non_negative_int("shuffle_buffer", shuffle_buffer)
        self.world_size, self.rank = resolve_world(world_size, rank)
        self.equal = check_bool("equal", equal)
        self.surplus = check_choice("surplus", surplus, SURPLUS)
        self.strings = check_choice("strings", strings, STRINGS)
        verify = check_bool("verify_checksums", verify_checksums)
        if verify and self._units_type is ArrowUnits:
            raise ArgumentValueError(
                "`verify_checksums=True` checks Parquet page checksums, and Arrow IPC files carry "
                "none. Drop verify_checksums, or store the data as Parquet written with checksums."
            )
        access = access_from(retries, read_ahead, cache_dir, cache_limit)
        filesystem, paths = resolve_files(source, self._suffixes, filesystem, what="source", access=access)
        self._units = self._units_type(filesystem, paths, columns, filter, verify, access=access)
        self.fill_null = check_fill_null(fill_null, self._units.schema, {}, "the files")
        self._check_equal(kind)
        self._planner = Planner(Layout(
            tuple(self._units.counts), self.world_size, self.batch_size or 1, self.shuffle, self.seed,
            self.equal, self.equal and self.surplus == "carry", self.shuffle_buffer,
        ))
        self._epoch: int | None = None  # set by set_epoch; None: count iter() calls
        self._iterations = 0
        self._progress: Progress | None = None
        self._resume: tuple[int, int] | None = None  # (epoch, rows): where the next iter() starts
        self._fingerprint: dict[str, Any] | None = None  # order_fingerprint(), made once
        self._order_fields: dict[str, Any] | None = None  # what a state carries of it, made once

    def _check_equal(self, kind: str) -> None:
        if not self.equal:
            if self.surplus != "drop":
                raise ArgumentValueError(
                    f"`surplus={self.surplus!r}` applies only with equal=True: without it every row "
                    "is delivered each epoch and nothing is left over. Pass equal=True, or drop surplus."
                )
            return
        if self._units.filter is not None:
            raise ArgumentValueError(
                f"{kind}: equal=True needs every shard's row count before reading, and a filter's "
                "matches are known only after reading. Write the filtered rows to files of their own, "
                "or drop equal=True and bound each rank's batches with DataLoader(epoch_size=...)."
            )
        rows, size = sum(self._units.counts), self.batch_size or 1
        if rows < self.world_size * size:
            raise ArgumentValueError(
                f"{kind}: equal=True gives every rank the same number of full batches, but the files "
                f"hold {rows} rows, fewer than world_size * batch_size = {self.world_size * size}: "
                "every rank would get none. Lower batch_size, or drop equal=True."
            )

    @property
    def columns(self) -> list[str]:
        """The columns each row or batch holds."""
        return self._units.names

    def order_fingerprint(self) -> dict[str, Any]:
        """What decides which rows come in which order, as plain values: a loader's resume
        state carries it and refuses a stream that differs (naming the field): other files,
        or the same files rewritten since (their sizes, times and versions: ``stamps``)."""
        if self._fingerprint is not None:
            return self._fingerprint
        units = self._units
        self._fingerprint = {
            "kind": type(self).__name__,
            "files": files_fingerprint(units.paths),
            "stamps": stamps_fingerprint(units.stamps),
            "row_groups": f"{len(units.counts)} units, {digest(units.counts)}",
            "columns": None if units.columns is None else list(units.columns),
            "filter": None if units.filter is None else str(units.filter),
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "shuffle_buffer": self.shuffle_buffer,
            "world_size": self.world_size,
            "rank": self.rank,
            "equal": self.equal,
            "surplus": self.surplus,
        }
        return self._fingerprint

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` at the next ``iter()`` calls (the loader calls this each epoch)."""
        self._epoch = check_non_negative_int("epoch", epoch)

    def stats(self) -> StreamStats:
        """The last epoch this process read (or, before any, the current one, with ``rows=0``).

        ``dropped``, ``carried`` and ``carried_in`` are the epoch's, the same in every
        process; ``rows`` and ``shard_rows`` are this process's shard's. With
        ``parallel_stream=True`` the workers read, so the main process's copy counts no rows.
        """
        progress = self._progress or self._start(self._epoch or 0)[0]
        return progress.snapshot()

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator ``iter()`` returned last stands: its epoch, the rows this
        process's shard has delivered (a loader's :meth:`~dataloader.DataLoader.state_dict`
        asks at every batch boundary) and ``order``, the stream's :meth:`order_fingerprint`
        in short, which :meth:`load_state_dict` checks."""
        if self._resume is not None:  # loaded, not read yet
            epoch, rows = self._resume
        elif self._progress is None:
            epoch, rows = (self._epoch if self._epoch is not None else self._iterations), 0
        else:
            epoch, rows = self._progress.epoch, self._progress.rows
        state = {"epoch": epoch, "rows": rows, "order": self._order()}
        history = kept(self._planner.history, epoch, self._planner.layout.carry)
        if history:  # a run that changed its world size: what rebuilds its plans
            state["reshards"] = history_json(history)
        return state

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Make the next ``iter()`` of epoch ``state["epoch"]`` start after ``state["rows"]`` rows
        of this shard. Without a filter or a shuffle buffer it starts reading there; otherwise it
        reads the shard from its start and drops those rows. A state of a stream over other
        files (or the same files rewritten since), with another shuffle, seed, batch size or
        world, is refused, as a loader refuses it.

        On another world size, pass the list of every rank's state of the saving run, in rank
        order (one ``all_gather_object``): the next ``iter()`` of that epoch delivers this rank's
        share of the rows the old ranks had not delivered (see the "Resuming on another world
        size" section of the columnar guide). A list from this world loads this rank's state."""
        kind = type(self).__name__
        mine = self._order()
        if isinstance(state, (list, tuple)):
            world = gather(kind, state, mine, _WHY)
            if world != self.world_size:
                self._reshard(kind, state)
                return
            state = state[self.rank]
        check_state(kind, state, mine, _WHY)
        check_world(kind, state, mine)
        epoch = check_non_negative_int("epoch", state["epoch"])
        rows = check_non_negative_int("rows", state["rows"])
        self._adopt(history_of(kind, state), epoch)
        self._resume = (epoch, rows)

    def _reshard(self, kind: str, states: list[dict[str, Any]]) -> None:
        """Load every old rank's state: the epoch goes on with their remaining rows, cut anew."""
        if self._units.filter is not None:
            raise ArgumentValueError(
                f"{kind}.load_state_dict: a stream with a filter resumes only on the world that saved the "
                "state: the rows after each rank's delivered matches are known only by reading its shard. "
                "Resume on the same world_size, or at the start of the next epoch (set_epoch)."
            )
        epoch = check_non_negative_int("epoch", states[0]["epoch"])
        rows = tuple(check_non_negative_int("rows", state["rows"]) for state in states)
        self._adopt(history_of(kind, states[0]) + (Reshard(epoch, len(states), rows),), epoch)
        self._resume = (epoch, 0)

    def _adopt(self, history: tuple[Reshard, ...], epoch: int) -> None:
        """Plan with ``history`` from now on, once its plan of ``epoch`` is made (which checks it)."""
        planner = Planner(self._planner.layout, kept(history, epoch, self._planner.layout.carry))
        planner.plan(epoch)
        self._planner = planner

    def _order(self) -> dict[str, Any]:
        """What a state carries of :meth:`order_fingerprint` (:func:`~dataloader._order_state.order_of`),
        made once; a fresh copy each time."""
        if self._order_fields is None:
            self._order_fields = order_of(self.order_fingerprint())
        return fresh(self._order_fields)

    def __iter__(self) -> Iterator[Any]:
        epoch = self._epoch
        if epoch is None:
            epoch, self._iterations = self._iterations, self._iterations + 1
        resume, self._resume = self._resume, None
        if resume is not None:
            check_resume_epoch(type(self).__name__, "rows", resume[0], epoch)
        done = resume[1] if resume is not None else 0
        seek = done if self._seekable() else 0  # start reading there, or read and drop `done` rows
        progress, pieces, window_key = self._start(epoch, seek)
        progress.rows = done
        self._progress = progress
        return self._read(progress, pieces, window_key, done - seek)

    def _seekable(self) -> bool:
        """Whether row ``n`` of a shard is row ``n`` of its pieces (no filter, no shuffle buffer)."""
        return self._units.filter is None and self.shuffle_buffer <= 1

    def _start(self, epoch: int, skip: int = 0) -> tuple[Progress, list[Piece], tuple[int, ...]]:
        """This shard's plan for ``epoch``: its progress record, its pieces (from row ``skip`` of
        the shard on), what keys its shuffle windows (see :func:`window_rng`)."""
        plan = self._planner.plan(epoch)
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        lo, hi = shard_range(plan, self.batch_size or 1, self.rank, worker, workers)
        progress = Progress(epoch, hi - lo, plan.surplus_rows, self._planner.layout.carry, plan.carried_in)
        return progress, plan.pieces(min(lo + skip, hi), hi), (self.seed, epoch, self.rank, worker, plan.generation)

    def _read(self, progress: Progress, pieces: list[Piece], window_key: tuple[int, ...], drop: int = 0) -> Iterator[Any]:
        reader = self._units.reader()
        try:
            resharded = window_key[-1] and self._units.filter is None  # short pieces: read per unit
            tables = scattered(reader.tables, pieces) if resharded else reader.tables(pieces)
            if self.shuffle_buffer > 1:
                rng_for = functools.partial(_window, window_key)
                tables = shuffled_windows(tables, self.shuffle_buffer, rng_for)
            if drop:
                tables = drop_rows(tables, drop)
            chunks = (self._to_batch(piece) for piece in in_pieces(tables))
            if self.batch_size is None:
                for row in rows_of(chunks):
                    progress.rows += 1
                    yield row
                return
            for batch, size in cut_batches(chunks, self.batch_size):
                progress.rows += size
                yield Collated(batch, size, rows=functools.partial(batch_rows, batch))
        finally:
            reader.close()

    def _to_batch(self, table: Any) -> dict[str, Any]:
        """A piece of the read ``pyarrow.Table`` as ``{column: array}`` (a subclass may decode its values)."""
        return table_to_batch(table, self.strings, self.fill_null)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_progress"] = None  # this process's count; a copy starts its own
        state["_resume"] = None  # where the loader resumes this process's reading, not a copy's
        return state


def _window(key: tuple[int, ...], window: int) -> np.random.Generator:
    seed, epoch, rank, worker, generation = key
    return window_rng(seed, epoch, rank, worker, window, generation)


class ParquetStream(ColumnarStream):
    """Parquet files as a :class:`~dataloader.StreamDataset`, sharded over ranks and workers.

    ``source`` is a file, a directory (its ``.parquet``/``.parq``/``.pq`` files,
    recursively, sorted), a URI (``s3://...``) or a list of them; ``filesystem`` a
    ``pyarrow.fs`` filesystem to resolve them on. Building the stream reads every
    file's footer: the row groups and their row counts, nothing else.

    What it yields: with ``batch_size=None``, rows, ``{column: value}``, so
    per-sample transforms apply (pair it with ``StreamSampler(batch_size=N)``).
    With ``batch_size=N``, whole batches, ``{column: array}`` made column by
    column from Arrow, without a Python step per row (pair it with
    ``StreamSampler()``); the loader hands them out as they are, or splits them
    into rows for a per-sample transform. Numbers come out as NumPy arrays,
    fixed-size lists as N-d arrays, strings as object arrays (Arrow arrays
    with ``strings="arrow"``); a null is an error unless ``fill_null`` (one
    value, or ``{column: value}``) fills it. ``columns`` reads only those
    columns; ``filter`` (an
    expression, ``pyarrow.dataset.field("x") > 3``) keeps the matching rows, and
    row groups whose statistics rule out every row are not read.

    Guarantees, per epoch: every row is delivered exactly once across all
    ranks (``world_size``/``rank``, else the ``WORLD_SIZE``/``RANK``
    environment) and all workers (:func:`~dataloader.get_worker_info`), each
    process computing its share from the footers alone. The order is the
    files' (sorted paths, row groups in order); ``shuffle=True`` reads the row
    groups in a permutation seeded by ``(seed, epoch)``, the same in every
    process, and ``shuffle_buffer=K`` also permutes rows within windows of
    ``K`` rows of each shard. A shard is a contiguous run of the epoch's
    batches, so every batch is full except the epoch's last, and shards differ
    by at most one batch; a shard gets none only when the epoch has fewer
    batches (rows, in row mode) than there are shards. The epoch is the one
    :meth:`set_epoch` gave (the loader calls it each epoch in every process);
    without it each ``iter()`` starts the next one.

    ``equal=True`` (distributed training, where a rank with fewer batches
    hangs the others): every rank yields the same number of full batches,
    ``rows // batch_size // world_size`` (in row mode the same number of rows,
    so the loader's batches agree when every rank runs as many workers).
    The rows left over are dropped
    (``surplus="drop"``) or delivered first in the next epoch
    (``surplus="carry"``), so over epochs nothing is lost. :meth:`stats` counts
    them. With ``filter`` it is an error: the matches are not known before
    reading.

    Files: the stream reads them as they were when it was built. Each file's
    size, modification time, inode (local files) and row groups are checked
    whenever it is opened (each epoch, in every process); a file replaced,
    rewritten or removed since
    is a :class:`~dataloader.SourceChangedError` or
    :class:`~dataloader.DataFileError` naming it, never rows read through stale
    footers. A read that fails (a corrupt page, a truncated file) is a
    ``DataFileError`` naming the file and the row group. ``verify_checksums=True``
    also checks the pages' CRC checksums (``write_parquet_shards`` writes them),
    so a corrupted value is an error instead of a wrong number.

    Remote files (S3, GCS, any fsspec filesystem; see the "Remote data" page):
    a transient error is retried ``retries`` times with exponential backoff,
    then raised as a :class:`~dataloader.RemoteReadError` naming the object;
    each reading process reads the next row groups ahead in background
    threads, up to ``read_ahead`` bytes (default 64 MiB remote, 0 local); and
    with ``cache_dir`` each file is fetched whole once into that local
    directory (shared by workers and ranks, at most ``cache_limit`` bytes,
    least recently used copies deleted first) and read from there after.

    Who reads: with ``parallel_stream=True`` each worker opens the files and
    decodes its own shard, so reading scales with the workers; without it the
    main process reads and decodes everything and the workers only transform,
    which does not scale. The stream pickles as paths and row counts, so it
    works with every start method.

    Example::

        stream = ParquetStream("data/", batch_size=256, shuffle=True)
        loader = DataLoader(stream, StreamSampler(), num_workers=2, parallel_stream=True)
        for batch in loader:
            batch["label"]  # a NumPy array of 256 labels (the last batch may be shorter)
    """

    _suffixes = PARQUET_SUFFIXES
    _units_type = ParquetUnits


class ArrowStream(ColumnarStream):
    """Arrow IPC files (the file format: ``.arrow``, ``.feather``, ``.ipc``) as a stream.

    Everything is as in :class:`ParquetStream`, with record batches in place
    of row groups: the unit of work, of shuffling and of sharding. Local
    files are memory-mapped, so a column that is not selected is never
    touched. ``filter`` is applied to the rows read (IPC files have no
    statistics to skip batches with). Counting the rows reads each record
    batch's header; on a remote filesystem that means reading the files once
    when the stream is built.

    Example::

        stream = ArrowStream("data/train.arrow", batch_size=256)
        loader = DataLoader(stream, StreamSampler(), num_workers=2, parallel_stream=True)
    """

    _suffixes = ARROW_SUFFIXES
    _units_type = ArrowUnits
