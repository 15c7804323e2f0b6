"""Tests for dataloader.collator: the rules, the error messages, the allocator hook, properties."""

from __future__ import annotations

import collections
import contextlib
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader import _alloc
from dataloader import collator as collator_module
from dataloader.collator import Collator
from dataloader.errors import CollateError

Point = collections.namedtuple("Point", "x y")
Other = collections.namedtuple("Other", "x y")
FIX = "return numpy arrays or numbers from the dataset/transform, or pass a custom collator"


def collate(samples: list) -> Any:
    return Collator().apply(samples)


class Recorder:
    """An allocator that remembers every array it hands out."""

    def __init__(self) -> None:
        self.made: list[np.ndarray] = []

    def __call__(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        out = np.full(shape, 7, dtype) if dtype.kind in "biufc" else np.empty(shape, dtype)
        self.made.append(out)
        return out


class ArrayLike:
    def __init__(self, data: list) -> None:
        self.data = data

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.data, dtype=dtype)


# ---------------------------------------------------------------- arrays


def test_arrays_are_stacked_batch_first():
    samples = [np.arange(6).reshape(2, 3) + 10 * i for i in range(4)]
    batch = collate(samples)
    assert batch.shape == (4, 2, 3)
    np.testing.assert_array_equal(batch, np.stack(samples))


def test_stacked_output_is_c_contiguous_for_strided_inputs():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    samples = [base.T[::2], base.T[1::2]]  # non-contiguous views
    batch = collate(samples)
    assert batch.flags.c_contiguous
    np.testing.assert_array_equal(batch, np.stack(samples))


def test_zero_d_arrays_become_1d():
    batch = collate([np.array(1.5), np.array(2.5), np.array(3.5)])
    assert batch.shape == (3,) and batch.dtype == np.float64
    np.testing.assert_array_equal(batch, [1.5, 2.5, 3.5])


@pytest.mark.parametrize(
    "dtypes, expected",
    [
        ((np.int32, np.float32), np.float64),
        ((np.bool_, np.int8), np.int8),
        ((np.uint8, np.uint8), np.uint8),
        ((np.uint8, np.int8), np.int16),
        ((np.float16, np.complex64), np.complex64),
    ],
)
def test_dtype_is_promoted(dtypes, expected):
    samples = [np.ones(3, dtype=d) for d in dtypes]
    batch = collate(samples)
    assert batch.dtype == np.result_type(*dtypes) == expected
    np.testing.assert_array_equal(batch, np.ones((2, 3)))


def test_many_distinct_dtypes_promote():
    names = ["U%d" % k for k in range(1, 70)]  # numpy < 2 takes at most 32 arguments
    batch = collate([np.array("a", dtype=n) for n in names])
    assert batch.dtype == np.dtype("U69") and list(batch) == ["a"] * len(names)


def test_objects_with_array_protocol_are_converted():
    batch = collate([ArrayLike([1, 2]), ArrayLike([3, 4])])
    assert isinstance(batch, np.ndarray)
    np.testing.assert_array_equal(batch, [[1, 2], [3, 4]])


def test_pyarrow_arrays_are_converted():
    batch = collate([pa.array([1.0, 2.0]), pa.array([3.0, 4.0])])
    assert batch.dtype == np.float64
    np.testing.assert_array_equal(batch, [[1.0, 2.0], [3.0, 4.0]])


# ---------------------------------------------------------------- numbers and text


@pytest.mark.parametrize(
    "values, dtype",
    [
        ([1, 2, 3], np.int64),
        ([1.0, 2.5], np.float64),
        ([True, False], np.bool_),
        ([1j, 2 + 0j], np.complex128),
        ([np.float32(1), np.float32(2)], np.float32),
        ([np.uint8(1), np.uint8(200)], np.uint8),
        ([1, 2.5], np.float64),
    ],
)
def test_numbers_become_a_1d_array(values, dtype):
    batch = collate(values)
    assert isinstance(batch, np.ndarray) and batch.shape == (len(values),)
    assert batch.dtype == dtype
    assert batch.tolist() == list(values)


def test_numbers_mixed_with_zero_d_arrays():
    batch = collate([np.float32(1), np.array(2, dtype=np.float32)])
    assert batch.dtype == np.float32 and batch.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("values", [["a", "bc"], [b"x", b"yz"]])
def test_text_becomes_a_list(values):
    batch = collate(values)
    assert type(batch) is list and batch == values
    assert all(b is v for b, v in zip(batch, values))


# ---------------------------------------------------------------- containers


def test_mapping_becomes_dict_in_first_samples_key_order():
    samples = [{"b": 1, "a": 2.0}, OrderedDict(a=3.0, b=4), MappingProxyType({"a": 5.0, "b": 6})]
    batch = collate(samples)
    assert type(batch) is dict and list(batch) == ["b", "a"]
    assert batch["b"].tolist() == [1, 4, 6] and batch["a"].tolist() == [2.0, 3.0, 5.0]


def test_namedtuple_type_is_preserved():
    batch = collate([Point(1, np.zeros(2)), Point(2, np.ones(2))])
    assert type(batch) is Point
    assert batch.x.tolist() == [1, 2]
    np.testing.assert_array_equal(batch.y, [[0, 0], [1, 1]])


def test_tuple_and_list_keep_their_type():
    batch = collate([(1, [2.0, "a"]), (3, [4.0, "b"])])
    assert type(batch) is tuple and type(batch[1]) is list
    assert batch[0].tolist() == [1, 3]
    assert batch[1][0].tolist() == [2.0, 4.0] and batch[1][1] == ["a", "b"]


def test_nested_structure():
    samples = [{"img": np.full((2, 2), i, np.uint8), "meta": {"id": i, "name": f"n{i}"}}
               for i in range(3)]
    batch = collate(samples)
    assert batch["img"].shape == (3, 2, 2) and batch["img"].dtype == np.uint8
    assert batch["meta"]["id"].tolist() == [0, 1, 2]
    assert batch["meta"]["name"] == ["n0", "n1", "n2"]


def test_accepts_any_iterable_of_samples():
    batch = collate(iter([1, 2]))  # type: ignore[arg-type]
    assert batch.tolist() == [1, 2]


def test_subclass_can_override_apply():
    class Firsts(Collator):
        def apply(self, samples):
            return super().apply([s[0] for s in samples])

    assert Firsts().apply([(1, "x"), (2, "y")]).tolist() == [1, 2]


# ---------------------------------------------------------------- errors


def test_empty_samples_raise():
    with pytest.raises(CollateError, match="at least one sample"):
        collate([])


def test_ragged_arrays_name_path_shapes_and_positions():
    samples = [(0, {"boxes": np.zeros((n, 4))}) for n in (3, 5, 3)]
    with pytest.raises(CollateError) as info:
        collate(samples)
    msg = str(info.value)
    assert "sample[1]['boxes']" in msg
    assert "(3, 4) in samples 0, 2" in msg and "(5, 4) in sample 1" in msg
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("make", [
    lambda i: np.full((2, 3), i, np.float32),
    lambda i: (np.arange(24).reshape(4, 6)[:, ::2] + i).astype(">i4"),  # strided, big-endian
    lambda i: np.zeros((0, 5), np.int8),
    lambda i: np.zeros((3, 0), np.int8),
], ids=["plain", "strided-big-endian", "empty-first-axis", "empty-last-axis"])
def test_like_arrays_equal_np_stack_and_take_one_allocation(make):
    samples = [make(i) for i in range(5)]
    record = Recorder()
    with _alloc.use_allocator(record):
        batch = collate(samples)
    expected = np.stack(samples)
    assert batch.dtype == samples[0].dtype and batch.shape == expected.shape
    np.testing.assert_array_equal(batch, expected)
    assert len(record.made) == 1 and record.made[0] is batch


def test_arrays_ragged_past_the_first_axis_name_their_shapes():
    samples = [np.zeros((4, n)) for n in (3, 5, 3)]
    with pytest.raises(CollateError, match=r"\(4, 3\) in samples 0, 2; \(4, 5\) in sample 1"):
        collate(samples)


def test_ragged_message_stays_short():
    samples = [np.zeros(i % 9) for i in range(100)]
    with pytest.raises(CollateError) as info:
        collate(samples)
    msg = str(info.value)
    assert "(100 in all)" not in msg and "(12 in all)" in msg and "more" in msg
    assert len(msg) < 400


def test_mismatched_keys_name_path_and_both_key_sets():
    with pytest.raises(CollateError) as info:
        collate([{"m": {"a": 1, "b": 2}}, {"m": {"a": 1, "b": 2}}, {"m": {"a": 1, "c": 2}}])
    msg = str(info.value)
    assert "sample['m']" in msg and "['a', 'b']" in msg and "['a', 'c']" in msg
    assert "sample 2" in msg


@pytest.mark.parametrize("make", [list, tuple])
def test_mismatched_lengths_name_path_and_lengths(make):
    with pytest.raises(CollateError) as info:
        collate([{"pts": make([1, 2])}, {"pts": make([1, 2, 3])}])
    msg = str(info.value)
    assert "sample['pts']" in msg and "length 2" in msg and "length 3" in msg


@pytest.mark.parametrize(
    "leaf, what",
    [(None, "NoneType"), (object(), "object"), (np.array([object()]), "object-dtype array"),
     (ArrayLike([None, "x"]), "object-dtype array")],
)
def test_unsupported_leaves_name_path_type_and_fix(leaf, what):
    with pytest.raises(CollateError) as info:
        collate([{"x": [1, leaf]}, {"x": [2, leaf]}])
    msg = str(info.value)
    assert "sample['x'][1]" in msg and what in msg and FIX in msg


def test_unsupported_leaf_in_a_later_sample():
    with pytest.raises(CollateError) as info:
        collate([{"mask": np.zeros(2)}, {"mask": np.zeros(2)}, {"mask": None}])
    msg = str(info.value)
    assert "sample['mask']" in msg and "NoneType in sample 2" in msg and FIX in msg


@pytest.mark.parametrize(
    "a, b, names",
    [
        (np.zeros(2), {"k": 1}, ("numpy.ndarray", "dict")),
        ((1, 2), [1, 2], ("tuple", "list")),
        (Point(1, 2), (1, 2), ("Point", "tuple")),
        (Point(1, 2), Other(1, 2), ("Point", "Other")),
        ("a", b"a", ("str", "bytes")),
        (1, "1", ("int", "str")),
    ],
)
def test_mixed_types_at_one_path_raise(a, b, names):
    with pytest.raises(CollateError) as info:
        collate([{"f": a}, {"f": a}, {"f": b}])
    msg = str(info.value)
    assert "sample['f']" in msg and all(n in msg for n in names) and "sample 2" in msg


def test_number_too_big_for_int64_raises():
    with pytest.raises(CollateError, match=r"sample\[0\]"):
        collate([(2**70,), (1,)])


@pytest.mark.parametrize(
    "values, dtype",
    [
        ([1, 2**53 + 1], np.int64),
        ([1, 2**63], np.uint64),  # was float64: 2**63 + 1 came back as 2**63
        ([2**63 + 1, 0], np.uint64),
        ([1, 2**64 - 1], np.uint64),
        ([-(2**63), 2**63 - 1], np.int64),
        ([np.uint64(2**63 + 1), np.int64(1)], np.uint64),
        ([np.uint64(1), -1], np.int64),
    ],
)
def test_large_integers_stay_exact_in_the_64_bit_type_that_holds_them(values, dtype):
    batch = collate(values)
    assert batch.dtype == dtype
    assert [int(v) for v in batch] == [int(v) for v in values]


@pytest.mark.parametrize(
    "values, text",
    [
        ([1, 2**70], r"the integer 1180591620717411303424 in sample 1 fits neither int64 nor uint64"),
        ([1, -(2**63) - 1], r"the integer -9223372036854775809 in sample 1 fits neither int64 nor uint64"),
        ([1.5, 2**70], r"the integer 1180591620717411303424 in sample 1 fits neither int64 nor uint64"),
        ([-1, 3, 2**63], r"the integer 9223372036854775808 in sample 2 needs uint64, which cannot hold "
                         r"the negative -1 in sample 0"),
    ],
)
def test_integers_no_64_bit_type_holds_name_the_one_that_does_not_fit(values, text):
    with pytest.raises(CollateError, match=rf"Cannot collate `sample`: {text}; return numpy arrays"):
        collate(values)


def test_integer_arrays_of_int64_and_uint64_stay_integers():
    batch = collate([np.array([1, 2]), np.array([2**63, 3], dtype=np.uint64)])
    assert batch.dtype == np.uint64 and batch.tolist() == [[1, 2], [2**63, 3]]
    assert collate([np.array([-1]), np.array([7], dtype=np.uint64)]).dtype == np.int64
    with pytest.raises(CollateError, match=r"the integer 9223372036854775808 in sample 1 needs uint64, "
                       r"which cannot hold the negative -1 in sample 0"):
        collate([np.array([-1, 0]), np.array([2**63, 0], dtype=np.uint64)])


def test_unconvertible_array_like_raises_collate_error():
    class Broken:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("tensor requires grad")

    with pytest.raises(CollateError, match=r"sample\['t'\].*requires grad") as info:
        collate([{"t": Broken()}, {"t": Broken()}])
    assert isinstance(info.value.__cause__, RuntimeError)


# ---------------------------------------------------------------- allocator hook


def test_outputs_come_from_the_allocator():
    record = Recorder()
    samples = [{"img": np.full((2, 3), i, np.float32), "label": i, "ok": True, "p": Point(1.5, 2),
                "name": "s"} for i in range(4)]
    with _alloc.use_allocator(record):
        batch = collate(samples)
    leaves = [batch["img"], batch["label"], batch["ok"], batch["p"].x, batch["p"].y]
    assert len(record.made) == len(leaves)  # one allocation per field, not per sample
    for leaf in leaves:
        assert sum(np.shares_memory(leaf, made) for made in record.made) == 1
    np.testing.assert_array_equal(batch["img"], np.stack([s["img"] for s in samples]))
    assert batch["label"].tolist() == [0, 1, 2, 3] and batch["ok"].tolist() == [True] * 4


def test_batch_is_written_into_the_allocators_buffer():
    buffer = np.zeros(1 << 12, np.uint8)
    offset = [0]

    def carve(shape: tuple, dtype: np.dtype) -> np.ndarray:
        size = int(np.prod(shape)) * dtype.itemsize
        view = buffer[offset[0]:offset[0] + size].view(dtype).reshape(shape)
        offset[0] += -(-size // 64) * 64
        return view

    with _alloc.use_allocator(carve):
        batch = collate([(np.arange(5, dtype=np.int16), 3.0), (np.arange(5, dtype=np.int16), 4.0)])
    assert np.shares_memory(batch[0], buffer) and np.shares_memory(batch[1], buffer)
    assert batch[1].tolist() == [3.0, 4.0]
    np.testing.assert_array_equal(buffer[:20].view(np.int16), np.tile(np.arange(5), 2))


# ---------------------------------------------------------------- properties

DTYPES = [np.dtype(d) for d in ("bool", "int8", "uint8", "int32", "int64", "float32", "float64",
                                "complex64")]
NUMBERS = {
    "int": (st.integers(-(2**63), 2**63 - 1), np.int64),
    "float": (st.floats(allow_nan=False), np.float64),
    "bool": (st.booleans(), np.bool_),
    "complex": (st.complex_numbers(allow_nan=False), np.complex128),
    "f32": (st.floats(width=32, allow_nan=False).map(np.float32), np.float32),
    "u8": (st.integers(0, 255).map(np.uint8), np.uint8),
}
PYTHON_DTYPES = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
KEYS = st.sampled_from(["a", "b", "boxes", "label", 0, 1])

leaf_schemas = st.one_of(
    st.tuples(st.just("array"), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
              st.sampled_from(DTYPES)),
    st.tuples(st.just("number"), st.sampled_from(sorted(NUMBERS))),
    st.tuples(st.sampled_from(["str", "bytes"])),
)
schemas = st.recursive(
    leaf_schemas,
    lambda kids: st.one_of(
        st.lists(st.tuples(KEYS, kids), max_size=3, unique_by=lambda kv: kv[0])
        .map(lambda kv: ("dict", tuple(kv))),
        st.lists(kids, max_size=3).map(lambda c: ("tuple", tuple(c))),
        st.lists(kids, max_size=3).map(lambda c: ("list", tuple(c))),
        st.lists(kids, min_size=2, max_size=2).map(lambda c: ("point", tuple(c))),
    ),
    max_leaves=8,
)


def values(schema: tuple) -> st.SearchStrategy:
    """Samples with the structure ``schema`` describes and random leaf values."""
    tag = schema[0]
    if tag == "array":
        return hnp.arrays(schema[2], schema[1])
    if tag == "number":
        return NUMBERS[schema[1]][0]
    if tag == "str":
        return st.text(max_size=3)
    if tag == "bytes":
        return st.binary(max_size=3)
    if tag == "dict":
        return st.fixed_dictionaries({k: values(s) for k, s in schema[1]})
    parts = st.tuples(*[values(s) for s in schema[1]])
    return parts.map({"tuple": tuple, "list": list, "point": lambda p: Point(*p)}[tag])


def check_element(batch: Any, sample: Any, i: int, first: Any, n: int) -> None:
    """Element ``i`` of every leaf of ``batch`` (n samples, the first ``first``) is ``sample``."""
    if isinstance(sample, (str, bytes)):
        assert type(batch) is list and len(batch) == n and batch[i] == sample
    elif isinstance(sample, np.ndarray):
        assert batch.shape == (n, *sample.shape) and batch.dtype == sample.dtype
        assert batch.flags.c_contiguous
        np.testing.assert_array_equal(batch[i], sample)
    elif isinstance(sample, dict):
        assert type(batch) is dict and list(batch) == list(first) and set(sample) == set(first)
        for key in sample:
            check_element(batch[key], sample[key], i, first[key], n)
    elif isinstance(sample, (tuple, list)):
        assert type(batch) is type(sample) and len(batch) == len(sample)
        for part_b, part_s, part_f in zip(batch, sample, first):
            check_element(part_b, part_s, i, part_f, n)
    else:
        assert batch.shape == (n,) and batch[i] == sample
        assert batch.dtype == PYTHON_DTYPES.get(type(sample)) or batch.dtype == sample.dtype


def number_dtypes(schema: tuple) -> list:
    tag = schema[0]
    if tag == "number":
        return [np.dtype(NUMBERS[schema[1]][1])]
    if tag in ("array", "str", "bytes"):
        return []
    kids = [s for _, s in schema[1]] if tag == "dict" else schema[1]
    return [d for kid in kids for d in number_dtypes(kid)]


def array_leaves(schema: tuple, path: str = "sample", where: tuple = ()) -> list:
    """(path text, position in the schema, leaf) for every array leaf."""
    tag = schema[0]
    if tag == "array":
        return [(path, where, schema)]
    if tag == "dict":
        return [leaf for j, (k, s) in enumerate(schema[1])
                for leaf in array_leaves(s, f"{path}[{k!r}]", where + (j,))]
    if tag in ("tuple", "list", "point"):
        return [leaf for j, s in enumerate(schema[1])
                for leaf in array_leaves(s, f"{path}[{j}]", where + (j,))]
    return []


def replace_leaf(schema: tuple, where: tuple, new: tuple) -> tuple:
    if not where:
        return new
    head, rest = where[0], where[1:]
    kids = list(schema[1])
    if schema[0] == "dict":
        kids[head] = (kids[head][0], replace_leaf(kids[head][1], rest, new))
    else:
        kids[head] = replace_leaf(kids[head], rest, new)
    return (schema[0], tuple(kids))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_property_element_i_of_the_batch_is_sample_i(data):
    schema = data.draw(schemas)
    samples = data.draw(st.lists(values(schema), min_size=1, max_size=4))
    record = Recorder()
    with _alloc.use_allocator(record):
        batch = collate(samples)
    for i, sample in enumerate(samples):
        check_element(batch, sample, i, samples[0], len(samples))
    n_arrays = len(array_leaves(schema))
    assert len(record.made) == n_arrays + len(number_dtypes(schema))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_property_ragged_leaf_is_reported_by_path(data):
    schema = data.draw(schemas.filter(lambda s: array_leaves(s)))
    path, where, (_, shape, dtype) = data.draw(st.sampled_from(array_leaves(schema)))
    other = (shape[0] + 1, *shape[1:]) if shape else (1,)
    odd_schema = replace_leaf(schema, where, ("array", other, dtype))
    n = data.draw(st.integers(2, 4))
    odd = data.draw(st.integers(1, n - 1))
    samples = [data.draw(values(odd_schema if j == odd else schema)) for j in range(n)]
    with pytest.raises(CollateError) as info:
        collate(samples)
    msg = str(info.value)
    assert f"`{path}`" in msg and str(tuple(shape)) in msg and str(other) in msg
    assert f"{other} in sample {odd}" in msg


# ------------------------------------------------ the bulk rules give what the full rules give

ODD_LEAVES = st.one_of(
    st.integers(-(2**65), 2**65), st.floats(), st.booleans(), st.none(), st.text(max_size=2),
    st.binary(max_size=2), hnp.arrays(np.int64, ()), hnp.arrays(np.float32, (2,)),
    st.sampled_from([np.int64(3), np.float32(1.5), np.uint64(2**64 - 1), np.bool_(True), np.int32(7),
                     np.float16(0.5), np.array(2.5, np.float32), np.array(4, np.uint64), [1.0]]),
)


def full_rules_only() -> Any:
    """The collator with its bulk rules switched off: every value takes the full rules."""
    from unittest import mock

    from dataloader import collator as collator_module

    return contextlib_all(
        mock.patch.object(collator_module, "_FAST_RULES", {}),
        mock.patch.object(collator_module, "_fast_column", lambda values, natural: None),
    )


@contextlib.contextmanager
def contextlib_all(*managers: Any) -> Any:
    with contextlib.ExitStack() as stack:
        for manager in managers:
            stack.enter_context(manager)
        yield


def outcome(samples: list) -> Any:
    try:
        return collate(samples)
    except CollateError as error:
        return error


def assert_same(got: Any, expected: Any) -> None:
    """Equal values, dtypes, shapes and container types all the way down; equal errors."""
    assert type(got) is type(expected)
    if isinstance(expected, CollateError):
        assert str(got) == str(expected)
    elif isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    elif isinstance(expected, dict):
        assert list(got) == list(expected)
        for key in expected:
            assert_same(got[key], expected[key])
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert_same(a, b)
    else:
        assert got == expected


def perturbed(sample: Any, data: Any) -> Any:
    """``sample`` with one part changed: a leaf swapped for an odd one, a container's type
    changed, or an element or key dropped (each somewhere at random)."""
    kind = type(sample)
    if isinstance(sample, dict) and sample:
        key = data.draw(st.sampled_from(list(sample)))
        choice = data.draw(st.sampled_from(["recurse", "drop"]))
        if choice == "drop":
            return {k: v for k, v in sample.items() if k != key}
        return {**sample, key: perturbed(sample[key], data)}
    if isinstance(sample, (tuple, list)) and sample:
        j = data.draw(st.integers(0, len(sample) - 1))
        choice = data.draw(st.sampled_from(["recurse", "drop", "retype"]))
        parts = list(sample)
        if choice == "drop":
            del parts[j]
        elif choice == "recurse":
            parts[j] = perturbed(parts[j], data)
        else:
            return list(parts) if kind is not list else tuple(parts)
        return kind(*parts) if hasattr(kind, "_fields") and len(parts) == len(sample) else (
            list(parts) if kind is list else tuple(parts))
    return data.draw(ODD_LEAVES)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_property_bulk_rules_give_what_the_full_rules_give(data):
    schema = data.draw(schemas)
    samples = data.draw(st.lists(values(schema), min_size=1, max_size=5))
    for _ in range(data.draw(st.integers(0, 2))):
        i = data.draw(st.integers(0, len(samples) - 1))
        samples[i] = perturbed(samples[i], data)
    with full_rules_only():
        expected = outcome(samples)
    assert_same(outcome(samples), expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(ODD_LEAVES, st.integers(), st.floats()), min_size=1, max_size=6))
def test_property_columns_of_mixed_numbers_match_the_full_rules(column):
    samples = [(value, i) for i, value in enumerate(column)]
    with full_rules_only():
        expected = outcome(samples)
    assert_same(outcome(samples), expected)


def test_bulk_rules_raise_the_full_rules_errors_for_ragged_and_mixed_batches():
    for samples in ([(1, 2.0), (1,)], [{"a": 1, "b": 2}, {"a": 1, "c": 2}], [(1, "x"), (2, b"y")],
                    [(2**64, 1), (-1, 1)], [[1, 2], (1, 2)], [{"a": np.zeros(2)}, {"a": np.zeros(3)}]):
        with full_rules_only():
            expected = outcome(samples)
        assert isinstance(expected, CollateError)
        assert_same(outcome(samples), expected)


def test_bulk_rules_write_into_the_allocator():
    record = Recorder()
    with _alloc.use_allocator(record):
        batch = collate([(1, 2.5, True, np.float32(1)), (3, 4.5, False, np.float32(2))])
    assert [a.dtype for a in batch] == [np.int64, np.float64, np.bool_, np.float32]
    assert len(record.made) == 4


def test_a_zero_d_array_among_arrays_is_a_collate_error():
    with pytest.raises(CollateError, match=r"arrays have different shapes: \(1,\) in samples 0, 2; \(\) in sample 1"):
        collate([np.zeros(1), np.array(0.0), np.zeros(1)])


@pytest.mark.parametrize("samples", [
    [np.int64(2**60 + 1), 0.5], [2**53 + 1, np.float64(1.5)], [np.array([2**60 + 1, 3]), np.array([0.5, 1.0])],
    [np.array(2**60 + 3), np.array(0.5)], [np.uint64(2**64 - 1), 0.0],
])
def test_integers_beside_floats_are_never_rounded(samples):
    """An integer that the float column of its field cannot hold exactly is a CollateError
    naming it (NumPy's promotion used to round it without a word); small ones stay exact."""
    with pytest.raises(CollateError, match=r"the integer \d+ in sample 0 \(.*\) would change in the float"):
        Collator().apply(samples)


def test_small_integers_beside_floats_collate_as_floats():
    assert Collator().apply([np.int64(2**53), 0.5]).tolist() == [2**53, 0.5]
    out = Collator().apply([np.array([1, 2], np.int16), np.array([1.5, 2.0], np.float32)])
    assert out.dtype == np.float32 and out.tolist() == [[1, 2], [1.5, 2]]


@pytest.mark.parametrize("big", [2**53 + 1, -(2**53 + 1), 2**63 - 1, np.int64(2**60 + 1)])
def test_a_large_integer_after_floats_is_never_rounded(big):
    """Floats first take the bulk rule; an integer past 2**53 further down still stops it."""
    with pytest.raises(CollateError, match=r"the integer -?\d+ in sample 2 \(.*\) would change in the float64"):
        Collator().apply([0.5, 1.5, big])


@pytest.mark.parametrize("values", [
    [0.5, 2**53], [0.5, -(2**53)], [2.0**60, 3.0], [float("nan"), 1.0], [float("inf"), 2**52],
    [np.float32(0.5), np.float32(2.0**30)], [1.5 + 2j, 2**53 + 0j],
])
def test_float_columns_past_the_exact_range_collate_as_numpy_makes_them(values):
    out = Collator().apply(values)
    assert out.tolist() == np.asarray(values).tolist() or np.isnan(out[0])
    assert out.dtype == np.asarray(values).dtype


def test_a_float_column_of_small_values_takes_no_per_value_pass(monkeypatch):
    """The exactness check of a float column is one C pass where every value is under 2**53:
    the per-value type scan (a Python call per value, per field, per batch) is not run."""
    def scanned(cls, values):
        raise AssertionError("per-value scan")

    monkeypatch.setattr(collator_module, "_all_of", scanned)
    assert Collator().apply([0.25 * i for i in range(256)]).tolist() == [0.25 * i for i in range(256)]
    assert Collator().apply([0.5, 7]).tolist() == [0.5, 7.0]  # an int among them, exact
