"""``MixedStream``: several sources as one stream, each item drawn from a source with a weight."""

from __future__ import annotations

from typing import Any, Iterator

from .._order_state import check_resume_epoch, fresh, order_of
from .._validate import check_choice, check_non_negative_int, check_optional_seed
from .._world import resolve_world
from ..dataset import StreamDataset
from ..errors import ArgumentValueError
from ..worker import get_worker_info
from ._checks import agreed_kind, check_world, checked_state, common_batch_size, named
from ._elastic import resharded
from ._run import MixStats, Run
from ._schedule import Weights
from ._sources import Member, Shard

STOPS = ("all_exhausted", "first_exhausted", "never")


class MixedStream(StreamDataset):
    """Several sources as one :class:`~dataloader.StreamDataset`: each item comes from source
    ``i`` with probability ``weights[i] / sum(weights)`` (default: equal weights).

    ``sources`` is a list (named ``"0"``, ``"1"``, ...) or a dict ``{name: source}``; the
    names appear in :meth:`stats`, in the state and in errors. A source is a stream (a
    ``StreamDataset`` such as :class:`~dataloader.ParquetStream`, or any object whose
    ``__iter__`` starts a fresh pass) or a map dataset (``__getitem__`` and ``__len__``).
    All of them yield rows, or all yield whole batches (``yields_batches``, as a
    ``ParquetStream`` with a ``batch_size`` does): then the mix draws a whole batch at a time.

    Sharding: a stream shards itself over ranks and workers (``ParquetStream`` does, from its
    own ``world_size``/``rank`` and :func:`~dataloader.get_worker_info`); the mix only tells it
    its source epoch (``set_epoch``) and reads it. A map dataset is read in a permutation of its
    indices seeded by ``(seed, source, source epoch)``, cut into one block per rank and each of
    those into one per worker (blocks differ by at most one index), so every index is read once
    per source epoch across all processes. The draws of each process are seeded by ``(seed,
    epoch, rank, worker)``: the same arguments give the same items in the same order.

    ``stop`` says when an epoch of the mix ends, in each process (each reads its own share):

    - ``"all_exhausted"`` (default): a source that runs out is no longer drawn from (the
      others' weights then share its part) and the epoch ends when every source has run
      out, so each row of each source comes exactly once per epoch. Late in the epoch the
      mix holds only the sources that last longest.
    - ``"first_exhausted"``: the epoch ends when any source runs out; the others' rows left
      in that epoch do not come. The fractions hold to the end.
    - ``"never"``: a source that runs out starts its next source epoch (``set_epoch`` of its
      epoch + 1, a new permutation of a map dataset) and the stream never ends: pair it with
      ``DataLoader(epoch_size=N)``. Each source's rows come once per *source* epoch, and the
      fractions hold for ever. A source whose source epoch yields nothing at all (an empty
      shard) is dropped; the stream ends only when every source is.

    Every source starts an epoch of the mix at source epoch ``epoch``. A source is opened when
    a draw first picks it: one of weight 0 is never read.

    Weights that change: ``weights`` may be a schedule of ``drawn``, the number of items this
    process's mix has drawn since the run began (counted on from epoch to epoch by this object;
    a state carries it): a list of ``(drawn, weights)`` pairs, the first at 0, whose weights hold
    from their count to the next (the switch is exact), or a callable ``schedule(drawn) ->
    weights`` called at ``drawn = 0, 64, 128, ...`` whose weights hold for 64 draws (see
    :class:`~dataloader.WeightSchedule`). Where no source still in the mix has a weight in force,
    the epoch ends. With ``parallel_stream=True`` each worker counts the items of its own share,
    so a changing schedule needs the worker to have read the epochs before in the same process
    (``persistent_workers=True``); a fresh worker at a later epoch is refused.

    Resuming: :meth:`state_dict` holds the epoch, the draws made, and per source its epoch,
    its counts, whether it ran out and its own ``state_dict()``. A stream without
    ``state_dict()``/``load_state_dict()`` is resumed by reading its source epoch again and
    dropping the items it had delivered (exact when it reads the same items each time, as a
    file does); one with a ``resume_refused`` message (a ``RayStream``) refuses. The mix
    pickles without any open reader, so it goes to spawned workers
    (``DataLoader(..., parallel_stream=True)``), each of which reads its own share.

    Example::

        mix = MixedStream({"web": ParquetStream("web/"), "books": ParquetStream("books/")},
                          weights=[0.7, 0.3], seed=1)
        loader = DataLoader(mix, StreamSampler(batch_size=64), num_workers=2, parallel_stream=True)
    """

    loads_rank_states = True  # load_state_dict() takes the list of every rank's states

    def __init__(
        self, sources: Any, weights: Any = None, *, stop: str = "all_exhausted", seed: int | None = 0,
        world_size: int | None = None, rank: int | None = None,
    ) -> None:
        names, found = named(sources)
        self._weights = Weights(weights, names)
        self.stop = check_choice("stop", stop, STOPS)
        self.seed = check_optional_seed("seed", seed) or 0  # None: 0, as every process must agree
        self.world_size, self.rank = resolve_world(world_size, rank)
        self._members = [Member(n, i, s) for i, (n, s) in enumerate(zip(names, found))]
        check_world(self._members, self.world_size, self.rank)
        self.yields_batches = agreed_kind(self._members)  # the loader reads it
        self.batch_size = common_batch_size(self._members) if self.yields_batches else None
        self._epoch: int | None = None  # set by set_epoch; None: count iter() calls
        self._iterations = 0
        self._run: Run | None = None
        self._drawn = 0  # items drawn before the run now open began (a schedule reads the count)
        self._read_epoch: int | None = None  # the epoch this object last read (a worker's check)
        self._resume: dict[str, Any] | None = None  # a loaded state: where the next iter() starts
        self._fingerprint: dict[str, Any] | None = None
        self._order_fields: dict[str, Any] | None = None  # what a state carries of the fingerprint

    @property
    def names(self) -> list[str]:
        """The sources' names, in order."""
        return [m.name for m in self._members]

    @property
    def weights(self) -> dict[str, float]:
        """``{name: weight}`` in force now, at :attr:`drawn` (as given: not normalised)."""
        now = self._weights.at(self.drawn)[0].tolist()
        return {m.name: weight for m, weight in zip(self._members, now)}

    @property
    def drawn(self) -> int:
        """Items this process's mix has drawn since the run began: what a weight schedule reads."""
        if self._resume is not None:
            return int(self._resume.get("drawn", self._resume["draws"]))
        return self._run.draws.drawn if self._run is not None else self._drawn

    @property
    def sources(self) -> dict[str, Any]:
        """``{name: source}``."""
        return {m.name: m.source for m in self._members}

    def order_fingerprint(self) -> dict[str, Any]:
        """What decides which items come in which order, as plain values: each source's
        fingerprint (its ``order_fingerprint()``, else its class), the weights, ``stop``, the
        seed and the world. A loader's state carries it and refuses a mix that differs.
        ``"weights"``: constant weights as a list; a piecewise schedule by value
        (``{"piecewise": [[drawn, weights], ...]}``); a callable by its qualified name and its
        own ``order_fingerprint()`` where it has one, else a digest of its weights at drawn =
        0, 1, 10, ..., 10**8 (``{"callable": name, "fingerprint" | "values": ...}``)."""
        if self._fingerprint is None:
            self._fingerprint = {
                "kind": type(self).__name__,
                "sources": {m.name: m.fingerprint() for m in self._members},
                "weights": self._weights.fingerprint(),
                "stop": self.stop,
                "seed": self.seed,
                "world_size": self.world_size,
                "rank": self.rank,
            }
        return self._fingerprint

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` at the next ``iter()`` calls (the loader calls this each epoch)."""
        self._epoch = check_non_negative_int("epoch", epoch)

    def stats(self) -> MixStats:
        """Per source: its name, weight, items delivered in this epoch of the mix, realized
        fraction, source epoch and whether it ran out, for the iterator ``iter()`` returned
        last in this process (before any, the epoch's start). With ``parallel_stream=True``
        the workers read, so the main process's copy counts nothing."""
        if self._run is not None:
            return self._run.snapshot()
        before = Run(self._members, self._weights, self.stop, self._epoch or 0, self._shard(), None, self._drawn)
        return before.snapshot()

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator ``iter()`` returned last stands, as plain values: ``{"epoch",
        "draws", "drawn", "sources": {name: {"epoch", "taken", "delivered", "exhausted", "state"}},
        "order"}`` (``draws``: items of this epoch; ``drawn``: since the run began, what a weight
        schedule reads; ``taken``: items of the source's current source epoch; ``state``: its own
        ``state_dict()``, or None; ``order``: the mix's :meth:`order_fingerprint`, each source's
        part as a digest, which :meth:`load_state_dict` checks). Before any ``iter()``, the start of the next epoch."""
        if self._resume is not None:  # loaded, not read yet
            if "reshards" not in self._resume:
                return self._resume
            # from every old rank's states: the streams' own states of this world, by opening them
            resume = self._resume
            run = Run(self._members, self._weights, self.stop, resume["epoch"], self._shard(), resume)
            return {**run.state(), "order": self._order()}
        if self._run is None:
            epoch = self._epoch if self._epoch is not None else self._iterations
            return {"epoch": epoch, "draws": 0, "drawn": self._drawn, "sources": {}, "order": self._order()}
        return {**self._run.state(), "order": self._order()}

    def epoch_start_state(self, epoch: int) -> dict[str, Any] | None:
        """The state of the start of ``epoch``, nothing of it read yet, or None where this process
        does not know the count of items drawn then. A loader saves it at an epoch's boundary
        (where a stream's position says nothing else), so a schedule's count survives a restart there."""
        run = self._run
        if self._resume is not None:
            return None  # a loaded state not read yet: the loader keeps that one
        if run is None:
            drawn = self._drawn
        elif run.epoch == epoch:
            drawn = run.draws.base
        elif run.epoch == epoch - 1:
            drawn = run.draws.drawn
        else:
            return None
        return {"epoch": epoch, "draws": 0, "drawn": drawn, "sources": {}, "order": self._order()}

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]], reweight: bool = False) -> None:
        """Make the next ``iter()`` (of epoch ``state["epoch"]``) go on exactly where ``state``
        was taken: the same items as a run that was never interrupted. A state of a mix with
        other sources, weights, ``stop``, seed or world is refused, as a loader refuses it.

        ``reweight=True``: a state of this mix saved under other weights or another schedule
        loads too; every source goes on where it stood (its own state, counts, whether it ran
        out) and this mix's weights apply from the resume on, at the state's count of items
        drawn (the draws keep their uniforms; the weights that turn them into sources change).
        The sources, ``stop``, seed and world must still match.

        On another world size, pass the list of every old rank's state, in rank order (one
        ``all_gather_object``): this rank goes on with its share of the items the old ranks had
        not delivered in the epoch; a map source's indices left on the old ranks are cut anew, a
        stream source loads the list of its old ranks' states (its own ``load_state_dict(list)``).
        The draws from there are seeded anew (with the number of reshards) and the count of items
        drawn is the largest old rank's. A list from this world loads this rank's state. Read
        the mix in the main process (``parallel_stream=False``): the states are one process's."""
        if isinstance(state, (list, tuple)):
            self._resume = resharded(list(state), self._members, self._order(), bool(reweight),
                                     self.world_size, self.rank)
            return
        self._resume = checked_state(state, self._members, self._order(), reweight=bool(reweight))

    def __iter__(self) -> Iterator[Any]:
        epoch = self._epoch
        if epoch is None:
            epoch, self._iterations = self._iterations, self._iterations + 1
        resume, self._resume = self._resume, None
        if resume is not None:
            check_resume_epoch("MixedStream", "items", resume["epoch"], epoch)
        shard = self._shard()
        if get_worker_info() is not None:
            self._check_worker_count(epoch)
        self._drawn, self._read_epoch = self.drawn, epoch
        self._run = Run(self._members, self._weights, self.stop, epoch, shard, resume, self._drawn)
        return self._run.items()

    def _check_worker_count(self, epoch: int) -> None:
        """In a worker (``parallel_stream=True``), a changing schedule reads the items this copy
        drew in the epochs before: refuse where this process did not read the epoch before."""
        if self._weights.constant or epoch == 0 or self._read_epoch == epoch - 1:
            return
        raise ArgumentValueError(
            f"MixedStream: a worker reads epoch {epoch} of a mix whose weights follow a schedule, "
            f"but this worker's copy of the mix did not read epoch {epoch - 1}, so the count of items "
            "drawn that the schedule reads is not known here (a worker started afresh for each "
            "epoch, or a resume of a later epoch, with parallel_stream=True). Pass "
            "persistent_workers=True (each worker counts on from epoch to epoch), or read the mix "
            "in the main process (parallel_stream=False: its state carries the count), or give "
            "constant weights."
        )

    def _order(self) -> dict[str, Any]:
        """What a state carries of the fingerprint (:func:`~dataloader._order_state.order_of`:
        each source's as a short digest, as a state travels with every batch). A fresh copy each time."""
        if self._order_fields is None:
            self._order_fields = order_of(self.order_fingerprint())
        return fresh(self._order_fields)

    def _shard(self) -> Shard:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        return Shard(self.seed, self.world_size, self.rank, worker, workers)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_drawn"] = self.drawn if self._run is not None else self._drawn  # a worker counts on from it
        state["_run"] = None  # open readers stay in the process that opened them
        state["_resume"] = None  # where the loader resumes this process's reading, not a copy's
        return state
