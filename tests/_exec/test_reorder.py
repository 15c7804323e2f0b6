"""The reorder buffer: any arrival order in, task order out; skipped tasks step aside."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dataloader._exec.reorder import ReorderBuffer


@st.composite
def arrivals(draw, max_size=40):
    """(order of arrival, the indices among them that made no batch)."""
    n = draw(st.integers(0, max_size))
    order = draw(st.permutations(range(n)))
    skipped = draw(st.sets(st.sampled_from(range(n)))) if n else set()
    return list(order), skipped


@given(arrivals())
def test_in_order_pops_every_kept_index_in_order_and_never_early(case):
    order, skipped = case
    buffer = ReorderBuffer(in_order=True)
    arrived: set[int] = set()
    popped = []
    for index in order:
        if index in skipped:
            buffer.skip(index)
        else:
            buffer.put(index, f"batch-{index}")
        arrived.add(index)
        while True:
            found, value = buffer.pop()
            if not found:
                break
            k = int(value.split("-")[1])
            assert set(range(k + 1)) <= arrived, f"batch {k} left before an earlier task arrived"
            assert value == f"batch-{k}" and k not in skipped
            popped.append(k)
        # Nothing deliverable is held back: the next index to go has not arrived yet.
        next_kept = min((i for i in range(len(order)) if i not in skipped and i not in popped), default=None)
        if next_kept is not None and set(range(next_kept + 1)) <= arrived:
            raise AssertionError(f"batch {next_kept} was deliverable but not popped")
        assert len(buffer) == sum(1 for i in arrived if i not in skipped and i not in popped)
    assert popped == sorted(set(order) - skipped)
    assert buffer.pop() == (False, None)
    assert len(buffer) == 0


@given(arrivals())
def test_out_of_order_pops_arrivals_first_in_first_out(case):
    order, skipped = case
    buffer = ReorderBuffer(in_order=False)
    popped = []
    for position, index in enumerate(order):
        if index in skipped:
            buffer.skip(index)
        else:
            buffer.put(index, index)
        if position % 3 == 2:  # drain now and then, as a consumer would
            while (item := buffer.pop())[0]:
                popped.append(item[1])
    while (item := buffer.pop())[0]:
        popped.append(item[1])
    assert popped == [i for i in order if i not in skipped]
    assert len(buffer) == 0


def test_held_values_are_returned_as_given():
    buffer = ReorderBuffer()
    value = object()
    buffer.put(1, value)
    assert buffer.pop() == (False, None)
    buffer.put(0, None)  # None is a value like any other
    assert buffer.pop() == (True, None)
    assert buffer.pop() == (True, value)
