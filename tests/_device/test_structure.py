from collections import namedtuple

import numpy as np

from dataloader._device.structure import leaves, map_arrays

Pair = namedtuple("Pair", "a b")


def test_structure_and_non_array_leaves_are_preserved():
    batch = {"x": np.zeros(2), "meta": ("name", b"raw", None, 3, 2.5), "pair": Pair(np.ones(1), [np.arange(2), "s"])}
    out = map_arrays(batch, lambda a: a + 1)
    assert list(out) == ["x", "meta", "pair"]
    assert out["meta"] == ("name", b"raw", None, 3, 2.5) and type(out["meta"]) is tuple
    assert type(out["pair"]) is Pair and type(out["pair"].b) is list
    assert out["pair"].b[1] == "s"
    assert np.array_equal(out["x"], np.ones(2)) and np.array_equal(out["pair"].b[0], [1, 2])


def test_strings_do_not_recurse():
    assert map_arrays("abc", lambda a: 1 / 0) == "abc"


def test_leaves_in_order():
    assert leaves({"a": [1, (2, 3)], "b": "s"}) == [1, 2, 3, "s"]
