"""PackedStream over random lengths, seq_len, methods, buffer sizes and too_long rules: every
token exactly once and in order, segment ids and positions consistent, no row past seq_len,
stats that agree with the rows, and a resume at a random row that gives the uninterrupted run."""

from __future__ import annotations

import json
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import PackedStream
from tests.test_packing import PAIR, Samples, check_rows, fields_of

layouts = st.fixed_dictionaries({
    "seq_len": st.integers(1, 24),
    "factors": st.lists(st.floats(0, 3), max_size=40),  # each length: factor * seq_len, 0 .. 3 * seq_len
    "method": st.sampled_from(["best_fit", "first_fit", "concat"]),
    "buffer_size": st.integers(1, 6),
    "too_long": st.sampled_from(["split", "truncate", "drop"]),
    "seed": st.sampled_from([None, 3]),
    "bare": st.booleans(),
})


def _make(layout: dict) -> tuple[PackedStream, list[int]]:
    seq_len = layout["seq_len"]
    lengths = [int(factor * seq_len) for factor in layout["factors"]]
    stream = PackedStream(Samples(lengths, bare=layout["bare"]), seq_len, method=layout["method"],
                          buffer_size=layout["buffer_size"], too_long=layout["too_long"], seed=layout["seed"],
                          pad_value=-1, fields=None if layout["bare"] else PAIR)
    return stream, lengths


@settings(max_examples=150, deadline=None)
@given(layout=layouts)
def test_every_token_once_in_order_with_consistent_ids(layout):
    stream, lengths = _make(layout)
    rows = list(stream)
    check_rows(rows, lengths, layout["seq_len"], layout["too_long"], shuffled=layout["seed"] is not None,
               stats=stream.stats(), fields=fields_of(layout["bare"]), pad=-1)


@settings(max_examples=100, deadline=None)
@given(layout=layouts, cut=st.integers(0, 200), epoch=st.integers(0, 1))
def test_a_resume_at_any_row_gives_the_uninterrupted_run(layout, cut, epoch):
    whole, _ = _make(layout)
    whole.set_epoch(epoch)
    full = [json.dumps({k: v.tolist() for k, v in row.items()}) for row in whole]
    first, _ = _make(layout)
    first.set_epoch(epoch)
    rows = iter(first)
    head = [json.dumps({k: v.tolist() for k, v in next(rows).items()}) for _ in range(min(cut, len(full)))]
    state = json.loads(json.dumps(first.state_dict()))  # plain values
    resumed = pickle.loads(pickle.dumps(_make(layout)[0]))
    resumed.set_epoch(epoch)
    resumed.load_state_dict(state)
    rest = [json.dumps({k: v.tolist() for k, v in row.items()}) for row in resumed]
    assert head + rest == full
    assert resumed.stats() == whole.stats()  # the counts survive the resume
