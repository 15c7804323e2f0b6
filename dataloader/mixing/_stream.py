"""``MixedStream``: several sources as one stream, each item drawn from a source with a weight."""

from __future__ import annotations

from typing import Any, Iterator

from .._order_state import check_resume_epoch, fresh, order_of
from .._validate import check_choice, check_non_negative_int, check_optional_seed
from ..dataset import StreamDataset
from ..sampler import resolve_world
from ..worker import get_worker_info
from ._checks import agreed_kind, check_world, checked_state, common_batch_size, named, weights_of
from ._run import MixStats, Run
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

    Every source starts an epoch of the mix at source epoch ``epoch``. A source of weight 0
    is never read.

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

    def __init__(
        self, sources: Any, weights: Any = None, *, stop: str = "all_exhausted", seed: int | None = 0,
        world_size: int | None = None, rank: int | None = None,
    ) -> None:
        names, found = named(sources)
        values = weights_of(weights, names)
        self.stop = check_choice("stop", stop, STOPS)
        self.seed = check_optional_seed("seed", seed) or 0  # None: 0, as every process must agree
        self.world_size, self.rank = resolve_world(world_size, rank)
        self._members = [Member(n, i, s, w) for i, (n, s, w) in enumerate(zip(names, found, values))]
        check_world(self._members, self.world_size, self.rank)
        self.yields_batches = agreed_kind(self._members)  # the loader reads it
        self.batch_size = common_batch_size(self._members) if self.yields_batches else None
        self._epoch: int | None = None  # set by set_epoch; None: count iter() calls
        self._iterations = 0
        self._run: Run | None = None
        self._resume: dict[str, Any] | None = None  # a loaded state: where the next iter() starts
        self._fingerprint: dict[str, Any] | None = None
        self._order_fields: dict[str, Any] | None = None  # what a state carries of the fingerprint

    @property
    def names(self) -> list[str]:
        """The sources' names, in order."""
        return [m.name for m in self._members]

    @property
    def weights(self) -> dict[str, float]:
        """``{name: weight}`` as given (not normalised)."""
        return {m.name: m.weight for m in self._members}

    @property
    def sources(self) -> dict[str, Any]:
        """``{name: source}``."""
        return {m.name: m.source for m in self._members}

    def order_fingerprint(self) -> dict[str, Any]:
        """What decides which items come in which order, as plain values: each source's
        fingerprint (its ``order_fingerprint()``, else its class), the weights, ``stop``, the
        seed and the world. A loader's state carries it and refuses a mix that differs."""
        if self._fingerprint is None:
            self._fingerprint = {
                "kind": type(self).__name__,
                "sources": {m.name: m.fingerprint() for m in self._members},
                "weights": [m.weight for m in self._members],
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
        return Run(self._members, self.stop, self._epoch or 0, self._shard(), None, open_sources=False).snapshot()

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator ``iter()`` returned last stands, as plain values: ``{"epoch",
        "draws", "sources": {name: {"epoch", "taken", "delivered", "exhausted", "state"}},
        "order"}`` (``taken``: items of the source's current source epoch; ``state``: its own
        ``state_dict()``, or None; ``order``: the mix's :meth:`order_fingerprint`, each source's
        part as a digest, which :meth:`load_state_dict` checks). Before any ``iter()``, the start of the next epoch."""
        if self._resume is not None:  # loaded, not read yet
            return self._resume
        if self._run is None:
            epoch = self._epoch if self._epoch is not None else self._iterations
            return {"epoch": epoch, "draws": 0, "sources": {}, "order": self._order()}
        return {**self._run.state(), "order": self._order()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` (of epoch ``state["epoch"]``) go on exactly where ``state``
        was taken: the same items as a run that was never interrupted. A state of a mix with
        other sources, weights, ``stop``, seed or world is refused, as a loader refuses it."""
        self._resume = checked_state(state, self._members, self._order())

    def __iter__(self) -> Iterator[Any]:
        epoch = self._epoch
        if epoch is None:
            epoch, self._iterations = self._iterations, self._iterations + 1
        resume, self._resume = self._resume, None
        if resume is not None:
            check_resume_epoch("MixedStream", "items", resume["epoch"], epoch)
        self._run = Run(self._members, self.stop, epoch, self._shard(), resume)
        return self._run.items()

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
        state["_run"] = None  # open readers stay in the process that opened them
        state["_resume"] = None  # where the loader resumes this process's reading, not a copy's
        return state
