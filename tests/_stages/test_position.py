"""Where an epoch stands: :class:`Position`, :class:`Tally`, :class:`PositionLog` and :class:`Resume`.

What is proven here, without a loader:

- ``low`` moves over every batch handed out in order, and out-of-order hand-outs (``above``)
  are folded into it as soon as the gap below them closes; a batch made from several tasks
  (chunks) marks all of them.
- A batch echoed ``repeats`` times counts only once it was handed out every time; before that
  the snapshot lists it in ``partial`` as (task, echoes done, worker), and a restored partial batch
  is echoed only the times that were left, matched by task index or, for worker stream shards,
  by worker.
- Per-worker counts count whole batches only, and batches made by no worker (-1) are not counted.
- A snapshot asks the source for its token at ``low`` and tells it to forget older tokens as
  batches are handed out; a snapshot after the last batch of a sized epoch is the next epoch's
  start, while a stream (no length) or a half-echoed last batch stays in its epoch.
- ``remaining()`` counts the echoes still to come after a resume.
- Following an executor directly (no stage reads ahead or echoes, so no :class:`Tally`): in
  order, hand-outs are only counted and ``low`` is placed after the latest batch made when a
  state is taken (the source's tokens are still pruned every few hundred batches); out of order,
  each batch is noted from the executor's ``last_made``.
"""

from __future__ import annotations

import threading

import pytest

from dataloader._stages.position import Position, PositionLog, Resume, Tally


class _Source:
    """The two hooks a position calls, recorded: a token that names the batch, and forgets."""

    notes_tokens = True  # it keeps a token per batch: a position tells it which to forget

    def __init__(self) -> None:
        self.forgotten: list[tuple[int, int]] = []
        self.asked: list[tuple[int, int]] = []

    def resume_point(self, epoch: int, index: int) -> dict:
        self.asked.append((epoch, index))
        return {"at": [epoch, index]}

    def forget_before(self, epoch: int, index: int) -> None:
        self.forgotten.append((epoch, index))


def _position(repeats: int = 1, length: int | None = 10, resume: Resume | None = None, epoch: int = 3):
    source = _Source()
    return Position(source, epoch, repeats, length, resume), source


def _hand_out(position: Position, keys: tuple[int, ...], worker: int = -1, times: int = 1) -> None:
    """A batch leaves the executor and the user gets it ``times`` times (the echo stage's calls)."""
    position.made(keys, worker)
    for _ in range(times):
        position.handed_out()


# -- low and above ------------------------------------------------------------------------------


def test_in_order_hand_outs_move_low_and_ask_the_source_for_its_token_there():
    position, source = _position()
    for index in range(3):
        _hand_out(position, (index,))
    snap = position.snapshot()
    assert snap == {
        "epoch": 3, "low": 3, "above": [], "partial": [], "count": 3, "workers": {}, "last_worker": -1,
        "source": {"at": [3, 3]},
    }
    assert source.asked == [(3, 3)]
    assert source.forgotten == [(3, 1), (3, 2), (3, 3)]  # each hand-out lets older tokens go


def test_out_of_order_marks_wait_above_low_until_the_gap_closes():
    position, source = _position()
    _hand_out(position, (2,))
    _hand_out(position, (4,))
    assert position.snapshot()["low"] == 0 and position.snapshot()["above"] == [2, 4]
    _hand_out(position, (0,))
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (1, [2, 4], 3)
    _hand_out(position, (1,))  # closes the gap: 2 is folded in, 3 is still missing
    snap = position.snapshot()
    assert (snap["low"], snap["above"]) == (3, [4])
    _hand_out(position, (3,))
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (5, [], 5)
    assert source.forgotten[-1] == (3, 5)
    assert snap["source"] == {"at": [3, 5]}


def test_a_batch_made_of_several_tasks_marks_them_all():
    position, _ = _position()
    _hand_out(position, (0, 1, 2))  # a callable source's batch split into three chunks
    _hand_out(position, (5, 6))
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (3, [5, 6], 2)
    _hand_out(position, (3, 4))
    assert position.snapshot()["low"] == 7


def test_a_restored_position_carries_on_from_its_low_above_count_and_workers():
    resume = Resume(low=3, above=frozenset({5, 7}), count=5, workers={0: 2, 1: 3})
    position, _ = _position(resume=resume, length=20)
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (3, [5, 7], 5)
    assert snap["workers"] == {"0": 2, "1": 3}
    _hand_out(position, (3,), worker=1)
    _hand_out(position, (4,), worker=0)
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (6, [7], 7)  # 5 was folded in
    assert snap["workers"] == {"0": 3, "1": 4}


def test_resume_skips_what_was_handed_out():
    resume = Resume(low=4, above=frozenset({6, 9}))
    assert [i for i in range(12) if resume.skips(i)] == [0, 1, 2, 3, 6, 9]
    assert not Resume().skips(0)


# -- echoes (repeats) ---------------------------------------------------------------------------


def test_a_batch_counts_once_every_echo_was_handed_out_and_until_then_is_partial():
    position, _ = _position(repeats=3, length=4)
    position.made((0,), -1)
    assert position.echoes_left() == 3
    position.handed_out()
    snap = position.snapshot()
    assert (snap["low"], snap["count"], snap["partial"]) == (0, 0, [[0, 1, -1]])
    assert snap["source"] == {"at": [3, 0]}  # the token of the half-echoed batch, made again
    position.handed_out()
    assert position.snapshot()["partial"] == [[0, 2, -1]]
    position.handed_out()
    snap = position.snapshot()
    assert (snap["low"], snap["count"], snap["partial"]) == (1, 1, [])


def test_a_batch_made_ahead_is_not_partial_until_its_first_echo_is_handed_out():
    position, _ = _position(repeats=2)
    _hand_out(position, (0,), times=2)
    position.made((1,), -1)  # in a buffer, not handed out yet
    position.made((2,), -1)
    snap = position.snapshot()
    assert (snap["low"], snap["partial"]) == (1, [])
    position.handed_out()
    assert position.snapshot()["partial"] == [[1, 1, -1]]


def test_a_restored_partial_batch_is_echoed_only_the_times_left():
    resume = Resume(low=2, partial=((2, 2, -1),), count=2)
    position, _ = _position(repeats=3, length=5, resume=resume)
    assert position.remaining() == (5 - 2) * 3 - 2
    # Not made again yet: the snapshot still holds the restored partial batch.
    assert position.snapshot()["partial"] == [[2, 2, -1]]
    position.made((2,), -1)
    assert position.echoes_left() == 1
    position.handed_out()
    snap = position.snapshot()
    assert (snap["low"], snap["count"], snap["partial"]) == (3, 3, [])
    position.made((3,), -1)  # the next batch is echoed in full
    assert position.echoes_left() == 3
    assert position.remaining() == (5 - 3) * 3


def test_a_restored_partial_batch_is_matched_by_task_index_out_of_order():
    resume = Resume(low=0, partial=((1, 1, -1),))
    position, _ = _position(repeats=2, resume=resume)
    position.made((0,), -1)  # another batch first (in_order=False): echoed in full
    assert position.echoes_left() == 2
    position.handed_out()
    position.handed_out()
    position.made((1,), -1)
    assert position.echoes_left() == 1
    position.handed_out()
    assert position.snapshot()["low"] == 2


def test_a_restored_partial_batch_made_again_but_queued_behind_another_stays_partial():
    """in_order=False: the restored half-echoed batch 1 is made again while batch 0, made first,
    is being echoed; a state then holds both, each with its own echoes done (a state that kept
    only the one being echoed would echo batch 1 in full again on the next resume)."""
    resume = Resume(low=0, partial=((1, 1, -1),))
    position, _ = _position(repeats=2, resume=resume)
    position.made((0,), -1)
    position.made((1,), -1)  # queued behind batch 0, one echo left
    position.handed_out()  # batch 0, first echo
    assert sorted(position.snapshot()["partial"]) == [[0, 1, -1], [1, 1, -1]]


def test_a_restored_partial_batch_of_a_worker_stream_shard_is_matched_by_worker():
    resume = Resume(partial=((7, 1, 1),), partial_by_worker=True)  # task 7 meant nothing to this run
    position, _ = _position(repeats=3, length=None, resume=resume)
    position.made((0,), 0)
    assert position.echoes_left() == 3
    for _ in range(3):
        position.handed_out()
    position.made((1,), 1)  # worker 1's next batch is the half-echoed one
    assert position.echoes_left() == 2
    for _ in range(2):
        position.handed_out()
    snap = position.snapshot()
    assert snap["workers"] == {"0": 1, "1": 1} and snap["partial"] == []


def test_remaining_is_unknown_for_a_stream():
    position, _ = _position(length=None)
    assert position.remaining() is None


# -- per-worker counts --------------------------------------------------------------------------


def test_worker_counts_count_whole_batches_of_real_workers():
    position, _ = _position(repeats=2, length=None)
    _hand_out(position, (0,), worker=1, times=2)
    _hand_out(position, (1,), worker=0, times=2)
    _hand_out(position, (2,), worker=1, times=2)
    _hand_out(position, (3,), worker=-1, times=2)  # made in the main process
    position.made((4,), 0)
    position.handed_out()  # half echoed: not counted yet
    snap = position.snapshot()
    assert snap["workers"] == {"0": 1, "1": 2}
    assert snap["count"] == 4 and snap["partial"] == [[4, 1, 0]]


# -- the end of an epoch ------------------------------------------------------------------------


def test_a_snapshot_after_the_last_batch_of_a_sized_epoch_is_the_next_epoch_start():
    position, source = _position(length=3, epoch=5)
    _hand_out(position, (1,), worker=0)
    _hand_out(position, (0,), worker=1)
    assert position.snapshot()["epoch"] == 5
    _hand_out(position, (2,), worker=0)
    snap = position.snapshot()
    assert snap == {
        "epoch": 6, "low": 0, "above": [], "partial": [], "count": 0, "workers": {}, "last_worker": -1,
        "source": {"at": [5, 3]},  # the source says where the next epoch starts
    }
    assert source.asked[-1] == (5, 3)


def test_a_half_echoed_last_batch_keeps_the_epoch():
    position, _ = _position(repeats=2, length=2, epoch=0)
    _hand_out(position, (0,), times=2)
    _hand_out(position, (1,), times=1)
    snap = position.snapshot()
    assert (snap["epoch"], snap["low"], snap["count"], snap["partial"]) == (0, 1, 1, [[1, 1, -1]])
    position.handed_out()
    assert position.snapshot()["epoch"] == 1


def test_a_restored_position_at_the_end_of_its_epoch_is_the_next_epoch_start():
    position, _ = _position(length=4, resume=Resume(low=3, count=3), epoch=2)
    assert position.remaining() == 1
    _hand_out(position, (3,))
    snap = position.snapshot()
    assert (snap["epoch"], snap["low"], snap["count"]) == (3, 0, 0)


def test_a_stream_epoch_never_ends_in_a_snapshot():
    position, _ = _position(length=None, epoch=1)
    for index in range(50):
        _hand_out(position, (index,))
    snap = position.snapshot()
    assert (snap["epoch"], snap["low"], snap["count"]) == (1, 50, 50)


# -- concurrency --------------------------------------------------------------------------------


def test_batches_made_in_one_thread_and_handed_out_in_another_are_all_counted():
    position, _ = _position(length=None)
    made = threading.Semaphore(0)
    total = 2000

    def produce():
        for index in range(total):
            position.made((index,), index % 3)
            made.release()

    producer = threading.Thread(target=produce)
    producer.start()
    for index in range(total):
        made.acquire()
        position.handed_out()
        if index % 97 == 0:
            snap = position.snapshot()
            assert snap["low"] == snap["count"] >= index + 1
    producer.join()
    snap = position.snapshot()
    assert (snap["low"], snap["count"]) == (total, total)
    assert sum(snap["workers"].values()) == total


# -- Tally ------------------------------------------------------------------------------------


class _Executor:
    """Yields ``(batch, task indices, worker)`` as executors do."""

    def __init__(self, made: list[tuple[tuple[int, ...], int]]) -> None:
        self._made = iter(made)

    def __iter__(self):
        return self

    def __next__(self):
        keys, worker = next(self._made)
        return f"batch {keys}", keys, worker


def test_tally_notes_each_batch_its_upstream_made():
    position, _ = _position(length=3)
    tally = Tally(_Executor([((1,), 0), ((0,), 1), ((2,), 0)]), position)
    assert next(tally) == "batch (1,)"
    position.handed_out()
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["workers"]) == (0, [1], {"0": 1})
    assert next(tally) == "batch (0,)"
    assert next(tally) == "batch (2,)"
    position.handed_out()  # the n-th handed out is the n-th noted
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["workers"]) == (2, [], {"0": 1, "1": 1})
    with pytest.raises(StopIteration):
        next(tally)


# -- counting: batches in order, nothing between the Tally and the user ----------------------


def _counting(length=None, resume=None):
    source = _Source()
    return Position(source, 4, 1, length, resume, counting=True), source


def _pass_out(tally: Tally, position: Position, count: int) -> None:
    """Hand out ``count`` batches straight from the tally, as the iterator does."""
    for _ in range(count):
        next(tally)
        position.handed_out()


def test_counting_in_order_counts_hand_outs_and_places_low_after_the_latest_made():
    position, source = _counting()
    tally = Tally(_Executor([((index,), -1) for index in range(10)]), position)
    _pass_out(tally, position, 4)
    assert source.forgotten == []  # counting only, until a state is taken
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"], snap["workers"]) == (4, [], 4, {})
    assert snap["source"] == {"at": [4, 4]} and source.forgotten == [(4, 4)]
    _pass_out(tally, position, 3)
    assert (position.snapshot()["low"], position.snapshot()["count"]) == (7, 7)


def test_counting_in_order_prunes_the_sources_tokens_without_a_state_being_taken():
    position, source = _counting()
    tally = Tally(_Executor([((index,), -1) for index in range(600)]), position)
    _pass_out(tally, position, 600)
    # A long epoch's tokens do not pile up: they go every few hundred batches.
    assert source.forgotten and all(low <= 600 for _, low in source.forgotten)
    assert source.forgotten[-1][1] >= 600 - 256
    assert (position.snapshot()["low"], position.snapshot()["count"]) == (600, 600)


def test_counting_in_order_after_a_resume_skips_what_was_handed_out_above():
    resume = Resume(low=2, above=frozenset({3, 6}), count=4)
    position, _ = _counting(length=7, resume=resume)
    assert position.remaining() == 3
    tally = Tally(_Executor([((2,), -1), ((4,), -1), ((5,), -1)]), position)  # what a resumed source makes
    _pass_out(tally, position, 1)
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (4, [6], 5)
    _pass_out(tally, position, 2)
    snap = position.snapshot()
    assert (snap["epoch"], snap["low"], snap["count"]) == (5, 0, 0)  # all 7 handed out: the next epoch


def test_out_of_order_notes_each_batch_and_its_worker():
    position, _ = _position(length=None)
    tally = Tally(_Executor([((1,), 0), ((0,), 1), ((3,), 1)]), position)
    _pass_out(tally, position, 3)
    snap = position.snapshot()
    assert (snap["low"], snap["above"], snap["count"]) == (2, [3], 3)
    assert snap["workers"] == {"0": 1, "1": 2}


def test_an_unmade_batch_counts_as_handed_out_in_full_in_either_mode():
    for position, _ in (_counting(length=3), _position(length=3, repeats=2)):
        tally = Tally(_Executor([((0,), -1), ((1,), -1), ((2,), -1)]), position)
        next(tally)
        position.unmade()  # batch 0 raised (or all its samples failed): its turn is over
        next(tally)
        position.handed_out()
        if not position._counting:
            position.handed_out()  # the second echo of batch 1
        snap = position.snapshot()
        assert (snap["low"], snap["count"]) == (2, 2)


# -- PositionLog --------------------------------------------------------------------------------


def test_position_log_keeps_tokens_until_forgotten_across_epochs():
    log = PositionLog()
    for key in [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]:
        log.note(key, {"key": list(key)})
    assert log.get((0, 2)) == {"key": [0, 2]}
    log.forget_before((0, 2))
    assert log.get((0, 0)) is None and log.get((0, 1)) is None
    assert log.get((0, 2)) == {"key": [0, 2]}  # the token at the key itself stays
    log.forget_before((1, 1))
    assert [log.get(key) for key in [(0, 2), (1, 0), (1, 1)]] == [None, None, {"key": [1, 1]}]
    assert log.get((5, 5)) is None


def test_position_log_a_token_noted_again_replaces_the_old_one():
    log = PositionLog()
    log.note((0, 3), "first")
    log.note((0, 3), "second")
    assert log.get((0, 3)) == "second"
    log.forget_before((0, 4))
    assert log.get((0, 3)) is None
