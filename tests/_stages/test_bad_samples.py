"""BatchMaker under ``on_error``: which samples are left out or replaced, the records made of
them, the per-sample search after a bulk read or batch transform fails, and the hook events.

Everything here drives :class:`~dataloader._stages.batch.BatchMaker` directly (one process, no
loader); tests/test_on_error.py runs the same policy through a DataLoader and its workers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dataloader import Collated, Collator, SampleError
from dataloader._failure import LEFT_OUT
from dataloader._failure_book import SUBSTITUTE_DRAWS, check_max_errors, max_errors_allowed
from dataloader._stages.bad_samples import ErrorPolicy, SampleFailure
from dataloader._stages.batch import BatchMaker
from dataloader._stages.task import BatchTask
from dataloader.errors import ArgumentTypeError, ArgumentValueError, CollateError
from dataloader.hooks import StageEvent, StageHook
from dataloader.transform import PseudoTransform, Transform

# -- datasets, transforms and a hook ------------------------------------------------------------


class Faulty:
    """0..length-1 as int64; ``raising`` keys raise ValueError, ``none`` keys give None."""

    def __init__(self, length: int = 20, raising: tuple = (3, 7), none: tuple = (5,)) -> None:
        self.length, self.raising, self.none = length, set(raising), set(none)
        self.reads: list[int] = []

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.reads.append(index)
        if index in self.raising:
            raise ValueError(f"cannot read sample {index}")
        if index in self.none:
            return None
        return np.int64(index)


class BulkFaulty(Faulty):
    """Reads a batch in one ``__getitems__`` call, which raises when any key of it is bad."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[list[int]] = []

    def __getitems__(self, indices: list[int]) -> list:
        self.calls.append(list(indices))
        bad = [i for i in indices if i in self.raising]
        if bad:
            raise ValueError(f"the bulk read of {indices} failed at {bad[0]}")
        return [np.int64(i) for i in indices]


class Times10(Transform):
    """x * 10; raises KeyError on ``raising`` values, returns None on ``none`` values."""

    def __init__(self, raising: tuple = (), none: tuple = ()) -> None:
        self.raising, self.none = set(raising), set(none)

    def apply(self, sample):
        if int(sample) in self.raising:
            raise KeyError(f"cannot transform {int(sample)}")
        if int(sample) in self.none:
            return None
        return sample * 10


class BatchTimes10(Times10):
    """A batch transform that fails as a whole when any sample of it is bad."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[list[int]] = []

    def apply_batch(self, inputs):
        self.calls.append([int(x) for x in inputs])
        return [self.apply(x) for x in inputs]


class Recording(StageHook):
    """Every event as (kind, stage, level, indices, error type name or None)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def before(self, event: StageEvent) -> None:
        self.events.append(("before", event.stage, event.level, event.indices, None))

    def after(self, event: StageEvent) -> None:
        assert event.end >= event.start
        self.events.append(("after", event.stage, event.level, event.indices, None))

    def failed(self, event: StageEvent, error: BaseException) -> None:
        self.events.append(("failed", event.stage, event.level, event.indices, type(error).__name__))

    def of(self, kind: str, stage: str, level: str = "batch") -> list[tuple]:
        return [e[3] for e in self.events if e[:3] == (kind, stage, level)]


def maker(dataset, on_error: str = "skip", transform=None, seed: int = 1, hooks=(), collator=None) -> BatchMaker:
    return BatchMaker(
        dataset, transform if transform is not None else PseudoTransform(), collator or Collator(),
        policy=ErrorPolicy(on_error, seed), hooks=tuple(hooks),
    )


def made(m: BatchMaker, indices, epoch: int = 0, index: int = 0):
    return m(BatchTask(epoch, index, indices=list(indices)))


def failed_keys(m: BatchMaker) -> list:
    return [record.index for record in m.failures]


# -- skip ---------------------------------------------------------------------------------------


def test_skip_leaves_out_exactly_the_samples_that_raise_or_are_none():
    m = maker(Faulty())
    batch = made(m, [1, 3, 5, 7, 9, 11])
    assert batch.tolist() == [1, 9, 11]
    assert failed_keys(m) == [3, 5, 7]
    assert [(r.position, r.stage, r.error, r.action) for r in m.failures] == [
        (1, "fetch", "ValueError", "skipped"),
        (2, "fetch", "SampleError", "skipped"),
        (3, "fetch", "ValueError", "skipped"),
    ]
    assert m.failures[0].message == "cannot read sample 3"
    assert "returned None" in m.failures[1].message
    assert all(isinstance(r, SampleFailure) and r.substitute is None and r.epoch == 0 and r.batch == 0
               for r in m.failures)


def test_a_good_batch_after_a_bad_one_has_no_records():
    m = maker(Faulty())
    made(m, [3, 4])
    assert failed_keys(m) == [3]
    assert made(m, [1, 2], index=1).tolist() == [1, 2]
    assert m.failures == ()


def test_skip_leaves_out_samples_whose_transform_raises_or_is_none():
    m = maker(Faulty(raising=(), none=()), transform=Times10(raising=(4,), none=(6,)))
    batch = made(m, [2, 4, 6, 8], epoch=3, index=5)
    assert batch.tolist() == [20, 80]
    assert [(r.index, r.position, r.stage, r.error, r.action) for r in m.failures] == [
        (4, 1, "transform", "KeyError", "skipped"),
        (6, 2, "transform", "SampleError", "skipped"),
    ]
    assert {(r.epoch, r.batch) for r in m.failures} == {(3, 5)}


def test_fetch_and_transform_failures_in_one_batch_are_both_left_out():
    m = maker(Faulty(raising=(3,), none=(5,)), transform=Times10(raising=(4,)))
    assert made(m, [3, 4, 5, 6]).tolist() == [60]
    assert [(r.index, r.stage) for r in m.failures] == [(3, "fetch"), (4, "transform"), (5, "fetch")]


def test_a_failed_bulk_read_is_searched_one_index_at_a_time():
    dataset = BulkFaulty(raising=(6,), none=())
    m = maker(dataset)
    batch = made(m, [2, 4, 6, 8])
    assert batch.tolist() == [2, 4, 8]
    assert failed_keys(m) == [6]
    # The record holds the error of the sample's own read, not the bulk read's.
    assert (m.failures[0].stage, m.failures[0].message) == ("fetch", "the bulk read of [6] failed at 6")
    # One bulk read of the batch, then one read per index.
    assert dataset.calls == [[2, 4, 6, 8], [2], [4], [6], [8]]


def test_a_none_from_a_bulk_read_is_left_out_without_reading_again():
    class BulkNone(BulkFaulty):
        def __getitems__(self, indices):
            self.calls.append(list(indices))
            return [None if i == 4 else np.int64(i) for i in indices]

    dataset = BulkNone(raising=(), none=())
    m = maker(dataset)
    assert made(m, [2, 4, 6]).tolist() == [2, 6]
    assert [(r.index, r.position, r.error) for r in m.failures] == [(4, 1, "SampleError")]
    assert dataset.calls == [[2, 4, 6]]


def test_a_failed_bulk_read_of_collated_batches_is_searched_one_index_at_a_time():
    """``__getitems__`` may return a Collated without rows when there is no per-sample
    transform; the one-index-at-a-time search must then find exactly the bad sample (here 6),
    not fail every sample because a one-sample Collated has no rows to take apart."""

    class BulkCollated(BulkFaulty):
        def __getitems__(self, indices):
            self.calls.append(list(indices))
            if 6 in indices:
                raise ValueError("cannot read sample 6")
            return Collated(np.array(indices, dtype=np.int64), len(indices))

    m = maker(BulkCollated(raising=(), none=()))
    batch = made(m, [2, 4, 6, 8])
    assert [(r.index, r.error, r.message) for r in m.failures] == [(6, "ValueError", "cannot read sample 6")]
    assert np.asarray(batch).ravel().tolist() == [2, 4, 8]


def test_a_failed_batch_transform_is_searched_one_sample_at_a_time():
    transform = BatchTimes10(raising=(4,))
    m = maker(Faulty(raising=(), none=()), transform=transform)
    assert made(m, [1, 4, 9]).tolist() == [10, 90]
    assert failed_keys(m) == [4]
    assert m.failures[0].stage == "transform" and m.failures[0].error == "KeyError"
    assert transform.calls == [[1, 4, 9], [1], [4], [9]]


def test_the_batch_transform_only_sees_the_samples_that_were_read():
    transform = BatchTimes10()
    m = maker(Faulty(raising=(3,), none=(5,)), transform=transform)
    assert made(m, [1, 3, 5, 7]).tolist() == [10, 70]
    assert transform.calls == [[1, 7]]


def test_a_batch_whose_every_sample_fails_is_left_out():
    m = maker(Faulty(raising=(3, 7), none=(5,)))
    assert made(m, [3, 5, 7]) is LEFT_OUT
    assert failed_keys(m) == [3, 5, 7]
    assert {r.action for r in m.failures} == {"skipped"}


def test_a_batch_whose_every_sample_fails_its_transform_is_left_out():
    m = maker(Faulty(raising=(), none=()), transform=Times10(raising=(1, 2), none=(3,)))
    assert made(m, [1, 2, 3]) is LEFT_OUT
    assert [(r.index, r.stage) for r in m.failures] == [(1, "transform"), (2, "transform"), (3, "transform")]


def test_a_batch_whose_collate_fails_is_left_out_with_each_sample_recorded():
    class Ragged:
        def __len__(self):
            return 10

        def __getitem__(self, index):
            return np.zeros(index + 1)

    m = maker(Ragged())
    assert made(m, [1, 2, 3], index=4) is LEFT_OUT
    assert [(r.index, r.position, r.stage, r.error, r.action, r.batch) for r in m.failures] == [
        (1, 0, "collate", "CollateError", "skipped", 4),
        (2, 1, "collate", "CollateError", "skipped", 4),
        (3, 2, "collate", "CollateError", "skipped", 4),
    ]


def test_raise_lets_the_original_exception_through():
    m = maker(Faulty(), on_error="raise")
    with pytest.raises(ValueError, match="cannot read sample 3") as caught:
        made(m, [1, 3])
    assert type(caught.value) is ValueError
    assert m.stage == "fetch"
    m = maker(Faulty(raising=(), none=()), on_error="raise", transform=Times10(raising=(2,)))
    with pytest.raises(KeyError, match="cannot transform 2"):
        made(m, [1, 2])
    assert m.stage == "transform"


def test_raise_hands_a_none_sample_to_the_collator_as_before():
    """Under ``raise`` None is not searched for: the collator meets it (PyTorch's behaviour)."""
    m = maker(Faulty(raising=(), none=(5,)), on_error="raise")
    with pytest.raises(Exception):
        made(m, [4, 5])
    assert m.failures == ()


def test_raise_lets_a_collate_error_through():
    class Ragged:
        def __getitem__(self, index):
            return np.zeros(index + 1)

    with pytest.raises(CollateError):
        made(maker(Ragged(), on_error="raise"), [1, 2])


# -- replace ------------------------------------------------------------------------------------


def test_replace_keeps_the_batch_size_with_substitutes_that_read_well():
    dataset = Faulty(length=40, raising=(3, 7, 11), none=(5,))
    m = maker(dataset, on_error="replace")
    batch = made(m, [1, 3, 5, 7, 9, 11], epoch=2, index=6)
    assert len(batch) == 6
    assert [batch[p] for p in (0, 4)] == [1, 9]
    replaced = [r for r in m.failures if r.action == "replaced"]
    assert [(r.index, r.position) for r in replaced] == [(3, 1), (5, 2), (7, 3), (11, 5)]
    for record in replaced:
        assert batch[record.position] == record.substitute  # the substitute's own sample
        assert record.substitute not in (3, 5, 7, 11) and 0 <= record.substitute < 40


def test_replace_is_the_same_on_two_makers_and_differs_with_another_seed():
    def run(seed):
        m = maker(Faulty(length=1000, raising=tuple(range(0, 40, 2)), none=()), on_error="replace", seed=seed)
        batch = made(m, range(40), epoch=1, index=3)
        return batch.tolist(), [(r.index, r.action, r.substitute) for r in m.failures]

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert len(first[0]) == 40
    assert first[0] != other[0]
    assert [r[0] for r in first[1] if r[1] == "replaced"] == list(range(0, 40, 2))


def test_replace_depends_on_the_batch_not_on_what_the_maker_made_before():
    dataset = Faulty(length=100, raising=(3,), none=())
    fresh = maker(dataset, on_error="replace")
    used = maker(dataset, on_error="replace")
    made(used, [3, 4], index=0)
    made(used, [5, 3], index=1)
    assert made(used, [3, 9], index=2).tolist() == made(fresh, [3, 9], index=2).tolist()


def test_a_substitute_that_fails_is_recorded_and_another_is_drawn():
    # Every key but 9 fails: draws hit failing keys until 9 (or the batch's own 9 stands in).
    dataset = Faulty(length=10, raising=tuple(range(9)), none=())
    for seed in range(20):
        m = maker(dataset, on_error="replace", seed=seed)
        assert made(m, [9, 0]).tolist() == [9, 9]
        first, *tried = m.failures
        assert (first.index, first.position, first.action, first.substitute) == (0, 1, "replaced", 9)
        assert len(tried) <= SUBSTITUTE_DRAWS
        assert all(r.action == "skipped" and r.position == 1 and r.index in range(9) and r.stage == "fetch"
                   for r in tried)
        if tried:
            break
    else:
        pytest.fail("no seed drew a failing substitute first; the test proves nothing")


def test_replace_without_int_keys_takes_one_of_the_batchs_good_samples():
    class Keyed:
        def __init__(self):
            self.table = {"a": np.int64(1), "b": None, "c": np.int64(3), "d": np.int64(4)}

        def __len__(self):
            return len(self.table)

        def __getitem__(self, key):
            return self.table[key]

    def run(seed):
        m = maker(Keyed(), on_error="replace", seed=seed)
        return made(m, ["a", "b", "c", "d"]).tolist(), m.failures

    batch, records = run(1)
    assert len(batch) == 4 and batch[1] in (1, 3, 4)
    assert [(r.index, r.action) for r in records] == [("b", "replaced")]
    assert records[0].substitute in ("a", "c", "d")
    assert {"a": 1, "c": 3, "d": 4}[records[0].substitute] == batch[1]
    assert run(1)[0] == batch


def test_replace_of_a_stream_batch_takes_one_of_its_good_samples():
    m = maker(None, on_error="replace", transform=Times10(raising=(2,)))
    batch = m(BatchTask(0, 0, samples=[np.int64(1), np.int64(2), np.int64(3)]))
    assert len(batch) == 3 and batch[1] in (10, 30)
    (record,) = m.failures
    assert (record.index, record.position, record.action) == (None, 1, "replaced")
    assert record.substitute in (0, 2)  # a position in the batch


def test_replace_with_nothing_good_anywhere_leaves_the_batch_out():
    m = maker(Faulty(length=4, raising=(0, 1, 2, 3), none=()), on_error="replace")
    assert made(m, [0, 1]) is LEFT_OUT
    assert {r.action for r in m.failures} == {"skipped"}
    assert [r.index for r in m.failures if r.position == 0][0] == 0


# -- records ------------------------------------------------------------------------------------


def test_records_are_json_ready_and_describe_themselves():
    m = maker(Faulty(), on_error="skip")
    made(m, [2, 3], epoch=1, index=2)
    (record,) = m.failures
    data = record.as_json()
    assert {k: data[k] for k in ("epoch", "batch", "index", "position", "stage", "error", "action")} == {
        "epoch": 1, "batch": 2, "index": 3, "position": 1, "stage": "fetch", "error": "ValueError",
        "action": "skipped",
    }
    assert data["worker"] == -1 and data["pid"] > 0 and data["signal"] is None
    text = record.describe()
    assert "index 3" in text and "ValueError" in text and "main process" in text
    odd = SampleFailure(0, 0, ("x", 1), 0, "fetch", "E", "m", "skipped", substitute=np.int64(3))
    assert odd.as_json()["index"] == repr(("x", 1))


def test_a_long_message_is_cut_to_its_first_line():
    class Verbose:
        def __getitem__(self, index):
            raise RuntimeError("x" * 1000 + "\nsecond line")

    m = maker(Verbose(), on_error="skip")
    assert made(m, [0]) is LEFT_OUT
    assert len(m.failures[0].message) <= 300 and "second" not in m.failures[0].message


# -- hooks --------------------------------------------------------------------------------------


def test_hooks_see_every_sample_once_per_stage_when_nothing_fails():
    hook = Recording()
    m = maker(Faulty(raising=(), none=()), transform=Times10(), hooks=[hook])
    batches = [[0, 1, 2], [3, 4, 5], [6, 7]]
    for number, keys in enumerate(batches):
        made(m, keys, index=number)
    for stage in ("fetch", "transform", "collate"):
        for kind in ("before", "after"):
            assert hook.of(kind, stage) == [tuple(keys) for keys in batches], (kind, stage)
        assert hook.of("failed", stage) == []
    assert not [e for e in hook.events if e[2] == "sample"]
    # Per batch: each stage's before, then its after, in pipeline order.
    assert [(e[0], e[1]) for e in hook.events[:6]] == [
        ("before", "fetch"), ("after", "fetch"), ("before", "transform"), ("after", "transform"),
        ("before", "collate"), ("after", "collate"),
    ]


def test_hooks_see_a_failed_fetch_then_each_sample_on_its_own():
    hook = Recording()
    m = maker(Faulty(raising=(3,), none=(5,)), hooks=[hook])
    made(m, [2, 3, 5])
    fetch = [e for e in hook.events if e[1] == "fetch" and e[0] != "before"]
    assert fetch == [
        ("failed", "fetch", "batch", (2, 3, 5), "ValueError"),
        ("after", "fetch", "sample", (2,), None),
        ("failed", "fetch", "sample", (3,), "ValueError"),
        ("after", "fetch", "sample", (5,), None),  # read (as None): found by the None check
    ]
    assert hook.of("before", "fetch", "sample") == [(2,), (3,), (5,)]


def test_hooks_see_a_failed_batch_transform_then_each_sample_on_its_own():
    hook = Recording()
    m = maker(Faulty(raising=(), none=()), transform=Times10(raising=(4,)), hooks=[hook])
    made(m, [1, 4, 9])
    transform = [e for e in hook.events if e[1] == "transform" and e[0] != "before"]
    assert transform == [
        ("failed", "transform", "batch", (1, 4, 9), "KeyError"),
        ("after", "transform", "sample", (1,), None),
        ("failed", "transform", "sample", (4,), "KeyError"),
        ("after", "transform", "sample", (9,), None),
    ]


def test_hooks_under_raise_see_the_failure_once():
    hook = Recording()
    m = maker(Faulty(), on_error="raise", hooks=[hook])
    with pytest.raises(ValueError):
        made(m, [1, 3])
    assert [e[:3] for e in hook.events] == [("before", "fetch", "batch"), ("failed", "fetch", "batch")]


def test_a_hook_that_raises_is_the_stages_failure():
    class Broken(StageHook):
        def after(self, event):
            if event.stage == "transform":
                raise RuntimeError("hook broke")

    m = maker(Faulty(raising=(), none=()), on_error="raise", transform=Times10(), hooks=[Broken()])
    with pytest.raises(RuntimeError, match="hook broke"):
        made(m, [1, 2])


# -- the policy ---------------------------------------------------------------------------------


def test_substitute_keys_are_in_range_and_fixed_by_their_coordinates():
    policy = ErrorPolicy("replace", seed=11)
    keys = [policy.substitute_key(epoch, batch, position, attempt, 7)
            for epoch in range(3) for batch in range(4) for position in range(5) for attempt in range(3)]
    assert all(type(k) is int and 0 <= k < 7 for k in keys)
    assert set(keys) == set(range(7))  # 180 draws cover 7 keys
    again = ErrorPolicy("replace", seed=11)
    assert keys == [again.substitute_key(epoch, batch, position, attempt, 7)
                    for epoch in range(3) for batch in range(4) for position in range(5) for attempt in range(3)]
    other = ErrorPolicy("replace", seed=12)
    assert keys != [other.substitute_key(epoch, batch, position, attempt, 7)
                    for epoch in range(3) for batch in range(4) for position in range(5) for attempt in range(3)]
    assert policy.substitute_key(0, 0, 0, 0, 1) == 0
    big = [policy.substitute_key(0, 0, p, 0, 10**12) for p in range(50)]
    assert all(0 <= k < 10**12 for k in big) and len(set(big)) == 50
    assert all(0 <= policy.stand_in(1, 2, p, 3) < 3 for p in range(20))


def test_the_policy_says_when_it_salvages():
    assert not ErrorPolicy("raise").salvages
    assert ErrorPolicy("skip").salvages and ErrorPolicy("replace").salvages


@pytest.mark.parametrize("value", [0, 3, np.int64(2), 0.0, 0.05, 1.0, np.float32(0.5)])
def test_check_max_errors_keeps_counts_and_fractions(value):
    checked = check_max_errors(value)
    assert checked == value
    assert type(checked) is (int if isinstance(value, (int, np.integer)) else float)


@pytest.mark.parametrize(
    "value, error",
    [(-1, ArgumentValueError), (1.5, ArgumentValueError), (-0.1, ArgumentValueError), (math.nan, ArgumentValueError),
     (math.inf, ArgumentValueError), ("x", ArgumentTypeError), (True, ArgumentTypeError), (None, ArgumentTypeError),
     ([1], ArgumentTypeError)],
)
def test_check_max_errors_refuses_what_is_no_count_or_fraction(value, error):
    with pytest.raises(error, match="max_errors"):
        check_max_errors(value)


def test_max_errors_allowed_is_a_count_or_a_fraction_of_the_samples_read():
    assert max_errors_allowed(3, 1000) == 3
    assert max_errors_allowed(0.05, 1000) == pytest.approx(50)
    assert max_errors_allowed(0.0, 1000) == 0


def test_sample_error_is_a_value_error():
    assert issubclass(SampleError, ValueError)
