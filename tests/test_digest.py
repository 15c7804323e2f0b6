"""A state's digest survives the ways a state is saved: JSON (tuples become lists, integer keys
strings), pickle, NumPy scalars; and it changes with any value."""

from __future__ import annotations

import json
import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader._digest import canonical, digest

leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(max_size=5),
                   st.floats(allow_nan=False, allow_infinity=False))
keys = st.one_of(st.text(max_size=4), st.integers(-5, 5))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                            st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_json_and_pickle_keep_the_digest(value):
    as_json = json.loads(json.dumps(canonical(value)))
    assert digest(as_json) == digest(value) == digest(pickle.loads(pickle.dumps(value)))


def test_numpy_values_digest_as_the_python_ones_json_would_give():
    assert digest({"a": np.int64(3), "b": np.arange(3)}) == digest({"a": 3, "b": [0, 1, 2]})


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=4), st.integers(0, 100), min_size=1), st.data())
def test_any_changed_value_changes_the_digest(state, data):
    key = data.draw(st.sampled_from(sorted(state)))
    changed = dict(state, **{key: state[key] + 1})
    assert digest(changed) != digest(state)
