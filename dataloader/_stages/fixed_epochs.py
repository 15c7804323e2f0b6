"""Fixed-size epochs: ``epoch_size`` batches from any source, carrying on across epochs."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Iterator

from ..errors import ArgumentValueError
from .position import PositionLog, Resume
from .source import Source, known_length
from .streams import restarting
from .task import BatchTask


class FixedEpochs(Source):
    """Exactly ``epoch_size`` batches per epoch from ``inner``, carrying on across epochs.

    The inner source's tasks form one feed that outlives each epoch; when it
    ends in the middle of an epoch it is opened again (:func:`restarting`) and
    the epoch is completed from the fresh one. A batch split into chunks counts once.
    Before each task it notes where the feed stands after it, (inner epoch, or pass; inner
    index), so a state can restart the feed there; the inner source's token for that place is
    asked for only when a state is taken, and pruned only as batches are handed out.
    """

    notes_tokens = True

    @property
    def reader(self) -> Source:
        return self.inner.reader

    def order_fields(self, dataset: Any, options: Any) -> dict[str, Any]:
        return self.inner.order_fields(dataset, options)

    def __init__(self, inner: Source, epoch_size: int) -> None:
        self.inner = inner
        self.epoch_size = epoch_size
        self.worker_batch_size = inner.worker_batch_size
        self.stream_workers = inner.stream_workers
        # Workers reading their own streams keep them open across epochs, restarting at the end.
        self.worker_restart = inner.worker_batch_size is not None
        self.reads_stream_here = inner.reads_stream_here
        self.tasks_are_batches = inner.tasks_are_batches
        self._feed: Iterator[BatchTask] | None = None
        self._log = PositionLog()
        self._after_last: tuple[int, int] | None = None  # (pass, inner index) after the latest task
        self._inner_length: int | None = -1  # -1: not asked yet (a sampler's len() may raise)

    def tasks(self, epoch: int, resume: Resume | None = None) -> Iterator[BatchTask]:
        done = index = 0
        if resume is not None and resume.token:
            token = resume.token
            start = (token["pass"], token["index"])
            self._feed = self._open_feed(*start, token["inner"], resume.skip_ahead)
            done, index = resume.count, resume.low
        else:
            if self._feed is None:  # the first epoch, or the feed raised last epoch: afresh
                self._feed, self._after_last = self._open_feed(epoch, 0, None, False), None
            start = self._after_last or (epoch, 0)
        self._log.note((epoch, index), start)
        # Batches handed out above `low` are counted in resume.count, yet their tasks must still
        # be read past: the epoch ends after the last of them, not at the count.
        last_skipped = max(resume.above, default=-1) if resume is not None else -1
        while done < self.epoch_size or index <= last_skipped:
            task = self._pull(epoch, index)
            if task is None:  # the feed raised last epoch (the error went to the user): start afresh
                self._feed = None
                return
            index += 1
            if resume is not None and resume.skips(index - 1):
                continue  # handed out before the state was taken, and counted in resume.count
            out = replace(task, epoch=epoch, index=index - 1)
            # Tasks handed out before the state, right after this one, are read past now: once
            # this one is handed out, a state points after them, at a noted position.
            while resume is not None and index in resume.above and self._pull(epoch, index) is not None:
                index += 1
            yield out
            done += task.chunk is None or task.chunk[2] == task.chunk[1] - 1

    def _pull(self, epoch: int, index: int) -> BatchTask | None:
        """The feed's next task (``index`` of ``epoch``), noting where the feed stands after it:
        (pass, next inner batch), or the next pass's start."""
        task = next(self._feed, None)  # type: ignore[arg-type]
        if task is not None:
            after = task.index + 1
            if self._inner_length == -1:
                self._inner_length = known_length(self.inner)
            if self._inner_length is not None and after >= self._inner_length and task.chunk is None:
                self._after_last = (task.epoch + 1, 0)
            else:
                self._after_last = (task.epoch, after)
            self._log.note((epoch, index + 1), self._after_last)
        return task

    def _open_feed(self, pass_: int, index: int, inner_token: dict | None, skip_ahead: bool) -> Iterator[BatchTask]:
        """The inner tasks from batch ``index`` of pass ``pass_`` on, passes after it in full."""
        fresh = inner_token is None and index == 0
        passes = itertools.count(pass_ if fresh else pass_ + 1)  # each pass is an inner epoch
        feed = restarting(
            lambda: self.inner.tasks(next(passes)),
            "the dataset or sampler produced no batch; fixed-size epochs (epoch_size) need "
            "a source that is not empty.",
        )
        if fresh:
            return feed
        resumed = self.inner.tasks(pass_, Resume(low=index, token=inner_token or {}, skip_ahead=skip_ahead))
        return _chained(resumed, feed)  # a resumed pass may have nothing left

    def _token(self, at: tuple[int, int], begun: bool = True) -> dict:
        """The plain values that restart the feed at ``at``: (pass, inner index) and the inner token."""
        return {"pass": at[0], "index": at[1], "inner": self.inner.resume_point(*at, begun=begun)}

    def length(self) -> int | None:
        return self.epoch_size

    def consumer_stages(self, upstream: Any, collator: Any, policy: Any = None) -> Any:
        return self.inner.consumer_stages(upstream, collator, policy)

    def close(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()  # type: ignore[attr-defined]
        self.inner.close()

    def rewind(self, token: dict) -> None:
        # Only where the inner source can be put back without re-reading what it yielded.
        if not token or self.worker_restart:
            return
        try:
            self.inner.check_resume(token["inner"], skip_ahead=False)
        except ArgumentValueError:
            return  # a stream without state_dict(): the next epoch goes on after what was read
        start = (token["pass"], token["index"])
        self.close()
        self._feed = self._open_feed(*start, token["inner"], skip_ahead=False)
        self._after_last = start

    def resume_point(self, epoch: int, index: int, begun: bool = True) -> dict:
        if begun:
            at = self._log.get((epoch, index))
            if at is not None or index:
                return {} if at is None else self._token(at)
            # The epoch's first batch not read yet: where the feed stands, as before it began.
        if self._after_last is not None and self._feed is not None:
            return self._token(self._after_last)
        return self._token((epoch, 0), begun=False)

    def reshape(self, saved: list[dict], one_for_all: bool) -> Resume:
        """The inner source reshaped at the pass each rank's feed stood in; the fixed-size epoch
        carries on from the count the ranks agree on."""
        if self.worker_restart:
            raise ArgumentValueError(self.inner.reshape_refused)
        if any(not position["source"] for position in saved):
            raise ArgumentValueError(
                "with epoch_size, a state of another number of ranks must say where each rank's feed "
                "stood, and one of these holds no position (edited, or of an older version). Pass the "
                "states as DataLoader.state_dict() returned them."
            )
        count, at = saved[0]["count"], (saved[0]["source"]["pass"], saved[0]["source"]["index"])
        for position in saved:
            token = position["source"]
            if position["above"] or position["partial"] or position["count"] != count or token["pass"] != at[0]:
                raise ArgumentValueError(
                    "with epoch_size, a state of another number of ranks must show every rank at the "
                    "same step of the same pass, every batch before it handed out (in_order=True, "
                    f"repeats=1); got count {position['count']} (and {count}), pass {token['pass']} "
                    f"(and {at[0]}). Pass the states every rank took at the same step."
                )
        inner = [
            {"low": p["source"]["index"], "above": [], "partial": [], "count": p["source"]["index"], "source": p["source"]["inner"]}
            for p in saved
        ]
        resumed = self.inner.reshape(inner, one_for_all)
        return Resume(low=count, count=count, token={"pass": at[0], "index": resumed.low, "inner": resumed.token})

    def forget_before(self, epoch: int, index: int) -> None:
        at = self._log.get((epoch, index))
        self._log.forget_before((epoch, index))
        if at is not None:
            self.inner.forget_before(*at)

    def check_resume(self, token: dict, skip_ahead: bool, epoch: int | None = None) -> None:
        if self.worker_restart:
            raise ArgumentValueError(
                "epoch_size with parallel_stream=True cannot resume: each worker's stream carries "
                "on across epochs, and where each stood is not recorded. Drop parallel_stream "
                "(the workers still run the transforms) or epoch_size."
            )
        if token:  # the inner source's passes need not be the loader's epochs
            self.inner.check_resume(token["inner"], skip_ahead)


def _chained(first: Iterator[BatchTask], then: Iterator[BatchTask]) -> Iterator[BatchTask]:
    """``first``, then ``then``: a generator, not a chain, so closing it closes the one it is in."""
    yield from first
    yield from then
