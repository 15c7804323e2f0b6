"""A worker's exception is re-raised in the main process as its own type, whole.

Each raising line in ``_fixtures`` puts "(worker ID, pid PID)" of the worker
it ran in into its message, so the test can check that the header names the
real worker and pid.
"""

from __future__ import annotations

import errno
import re
import time

import pytest

import dataloader
from tests._workers._fixtures import (
    CorruptShardError,
    FailingCollator,
    FailingTransform,
    NeedsCode,
    Numbers,
    RaiseAt,
    batch_of,
    failing_worker_init,
    loader_over,
)

BAD = 22  # in batch 5: [20, 21, 22, 23]


def _raised_by(loader, expected=Exception):
    """The exception iterating ``loader`` raises, and the batches delivered before it."""
    delivered = []
    with pytest.raises(expected) as info:
        for batch in loader:
            delivered.append(batch[:, 0].tolist())
    return info.value, delivered


def _origin(error: BaseException) -> tuple[int, int]:
    """(worker id, pid) that the raising line wrote into the original message."""
    found = re.search(r"\(worker (\d+), pid (\d+)\)", str(error))
    assert found, f"the original message is missing from:\n{error}"
    return int(found[1]), int(found[2])


STAGES = [
    # stage, how the loader is built, the type raised, the raising line's source text
    ("fetch", dict(dataset=RaiseAt(64, BAD)), IndexError,
     'raise IndexError(f"sample {index} is past the end ({where})")'),
    ("transform", dict(dataset=Numbers(64), transform=FailingTransform(BAD)), ValueError,
     'raise ValueError(f"cannot augment sample {self.bad} ({_where()})")'),
    ("collate", dict(dataset=Numbers(64), collator=FailingCollator(BAD)), ZeroDivisionError,
     'raise ZeroDivisionError(f"cannot normalise the batch of sample {self.bad} ({_where()})")'),
]


@pytest.mark.parametrize("stage, parts, kind, source", STAGES, ids=[s[0] for s in STAGES])
def test_error_arrives_as_its_own_type_with_where_and_traceback(no_leaks, start_method, stage, parts, kind, source):
    parts = dict(parts)
    loader = loader_over(parts.pop("dataset"), start_method, **parts)

    error, delivered = _raised_by(loader, kind)

    worker_id, pid = _origin(error)
    assert isinstance(error, RuntimeError) and isinstance(error, dataloader.WorkerError)
    message = str(error)
    assert message.startswith(
        f"Caught {kind.__name__} in DataLoader worker process {worker_id} (pid {pid}) "
        f"while loading indices {batch_of(BAD)}"
    ), message
    assert re.search(rf"\bstage\W+{stage}\b", message), message
    assert source in message  # the original traceback, with the raising line's text
    assert (error.worker_id, error.pid, list(error.indices)) == (worker_id, pid, batch_of(BAD))
    assert delivered == [batch_of(i) for i in range(0, 20, 4)]  # the error comes in its batch's turn


def test_except_clauses_of_the_original_type_and_of_runtime_error_both_catch_it(no_leaks):
    caught = []
    for clause in (IndexError, RuntimeError, dataloader.WorkerError, LookupError):
        try:
            for _ in loader_over(RaiseAt(64, BAD), "fork"):
                pass
        except clause as error:
            caught.append(type(error).__name__)
    assert caught == ["IndexError"] * 4


def test_the_epoch_goes_on_after_an_error_and_the_next_epoch_runs(no_leaks):
    dataset = RaiseAt(64, BAD)
    loader = loader_over(dataset, "fork")
    iterator = iter(loader)
    with pytest.raises(IndexError):
        for _ in iterator:
            pass
    # As PyTorch's: the next next() yields the batch after the failed one, to the epoch's end.
    assert [int(b[0, 0]) for b in iterator] == list(range(batch_of(BAD)[-1] + 1, 64, 4))

    dataset.index = -1
    assert [int(b[0, 0]) for b in loader] == list(range(0, 64, 4))


# -- exceptions whose constructors are not just (message,) ------------------------

ODD = [
    ("KeyError", KeyError, ("missing-key-22",)),
    ("UnicodeDecodeError", UnicodeDecodeError, ("utf-8", b"ok \xff", 3, 4, "invalid start byte")),
    ("CorruptShardError", CorruptShardError, None),
    ("NeedsCode", NeedsCode, None),
]


@pytest.mark.parametrize("kind, cls, args", ODD, ids=[o[0] for o in ODD])
def test_exceptions_with_odd_constructors_keep_their_type(no_leaks, start_method, kind, cls, args):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, kind), start_method), cls)

    assert isinstance(error, dataloader.WorkerError)
    assert type(error).__name__ == kind
    assert str(error).startswith(f"Caught {kind} in DataLoader worker process")
    if args is not None:
        assert error.args == args


def test_unicode_decode_error_keeps_its_fields(no_leaks):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, "UnicodeDecodeError"), "fork"), UnicodeDecodeError)

    assert (error.encoding, error.object, error.start, error.end, error.reason) == (
        "utf-8", b"ok \xff", 3, 4, "invalid start byte"
    )


def test_os_error_subclass_keeps_errno_strerror_and_filename(no_leaks):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, "CorruptShardError"), "fork"), CorruptShardError)

    assert isinstance(error, OSError)
    assert error.errno == errno.EIO
    assert error.strerror.startswith("corrupt shard")
    assert error.filename == f"/data/shard-{BAD}.bin"


def test_keyword_only_constructor_keeps_its_attributes(no_leaks):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, "NeedsCode"), "fork"), NeedsCode)

    assert error.code == 42


# -- exceptions that cannot be rebuilt in the main process ------------------------

UNREBUILDABLE = [
    # the class's module exists only inside the worker
    ("WorkerOnlyModule", "ShardHeaderError", "raise module.ShardHeaderError(message)"),
    # the class is local to a function: it does not pickle
    ("LocalClass", "LocalFooterError", "raise LocalFooterError(message)"),
]


@pytest.mark.parametrize("kind, name, source", UNREBUILDABLE, ids=[u[0] for u in UNREBUILDABLE])
def test_a_type_that_cannot_be_rebuilt_becomes_a_plain_worker_error(no_leaks, start_method, kind, name, source):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, kind), start_method))

    assert type(error) is dataloader.WorkerError
    worker_id, pid = _origin(error)
    message = str(error)
    assert message.startswith(f"Caught {name} in DataLoader worker process {worker_id} (pid {pid})"), message
    assert source in message
    assert (error.worker_id, error.pid, list(error.indices)) == (worker_id, pid, batch_of(BAD))


def test_arguments_that_do_not_pickle_still_give_the_type_and_the_text(no_leaks, start_method):
    error, _ = _raised_by(loader_over(RaiseAt(64, BAD, "UnpicklableArgs"), start_method), ValueError)

    assert isinstance(error, dataloader.WorkerError)
    assert str(error).startswith("Caught ValueError in DataLoader worker process")
    assert f"sample {BAD} (worker" in str(error)  # the original message, from the traceback text


# -- worker_init_fn ----------------------------------------------------------------


def test_worker_init_fn_error_is_raised_in_the_main_process(no_leaks, start_method):
    loader = loader_over(Numbers(64), start_method, worker_init_fn=failing_worker_init)

    started = time.monotonic()
    with pytest.raises(ValueError) as info:
        next(iter(loader))
    elapsed = time.monotonic() - started

    error = info.value
    assert isinstance(error, dataloader.WorkerError)
    message = str(error)
    found = re.search(r"cannot open the database in worker (\d+) \(pid (\d+)\)", message)
    assert found, message
    assert message.startswith(f"Caught ValueError in DataLoader worker process {found[1]} (pid {found[2]})"), message
    assert "worker_init_fn" in message
    assert 'raise ValueError(f"cannot open the database in worker {worker_id}' in message
    assert elapsed < 10  # reported, not waited on until some other timeout
