"""_convert: each Arrow type comes out as the module's table says; nulls are errors unless filled."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from dataloader.columnar._convert import column_to_array, fill_for, table_to_batch
from dataloader.errors import ArgumentValueError, DataLoaderError
from tests.columnar._tables import expected_rows, has_unfilled_nulls, python, tables


@pytest.mark.parametrize("array,dtype", [
    (pa.array([1, 2], pa.int8()), np.int8),
    (pa.array([1, 2], pa.uint64()), np.uint64),
    (pa.array(np.array([1, 2], np.float16)), np.float16),
    (pa.array([1.5, 2.5], pa.float32()), np.float32),
    (pa.array([True, False]), np.bool_),
    (pa.array([1, 2], pa.timestamp("ms")), np.dtype("datetime64[ms]")),
    (pa.array([1, 2], pa.duration("us")), np.dtype("timedelta64[us]")),
    (pa.array([1, 2], pa.date32()), np.dtype("datetime64[D]")),
])
def test_numbers_bools_and_temporal_types_are_numpy_arrays(array, dtype):
    out = column_to_array(array, "c")
    assert isinstance(out, np.ndarray) and out.dtype == dtype and out.tolist() == array.to_numpy(zero_copy_only=False).tolist()


def test_fixed_size_lists_are_n_dimensional_and_tensors_take_their_shape():
    inner = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.int32)), 2)
    nested = pa.FixedSizeListArray.from_arrays(inner, 3)
    out = column_to_array(nested, "c")
    assert out.shape == (2, 3, 2) and out.dtype == np.int32 and out[1, 2, 1] == 11
    tensor = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float64(), (2, 2)), pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8.0)), 4))
    assert column_to_array(tensor, "t").shape == (2, 2, 2)


def test_strings_and_binary_are_objects_or_arrow_arrays():
    strings = pa.array(["a", "bc"])
    out = column_to_array(strings, "s")
    assert out.dtype == object and out.tolist() == ["a", "bc"]
    assert column_to_array(strings, "s", strings="arrow") is strings
    assert column_to_array(pa.array([b"x", b""]), "b").tolist() == [b"x", b""]
    assert column_to_array(pa.array(["a", "b", "a"]).dictionary_encode(), "d").tolist() == ["a", "b", "a"]


def test_other_types_are_object_arrays_of_python_values():
    out = column_to_array(pa.array([[1], [2, 3], []]), "l")
    assert out.dtype == object and out.tolist() == [[1], [2, 3], []]
    assert column_to_array(pa.array([{"k": 1}]), "s").tolist() == [{"k": 1}]


def test_chunked_columns_are_joined():
    column = pa.chunked_array([pa.array([1, 2]), pa.array([3])])
    assert column_to_array(column, "c").tolist() == [1, 2, 3]


def test_a_null_is_an_error_naming_the_column_unless_filled():
    array = pa.array([1, None, 3])
    with pytest.raises(DataLoaderError, match=r"column 'n' has 1 null value\(s\) in this batch; pass fill_null=\{'n': value\}"):
        column_to_array(array, "n")
    assert column_to_array(array, "n", fill=0).tolist() == [1, 0, 3]
    assert table_to_batch(pa.table({"n": array}), fill_null={"n": 9})["n"].tolist() == [1, 9, 3]
    assert fill_for({"n": 9}, "m") is None and fill_for(4, "m") == 4


def test_strings_must_be_object_or_arrow():
    with pytest.raises(ArgumentValueError, match="`strings` must be one of 'object', 'arrow'; got 'utf8'"):
        column_to_array(pa.array(["a"]), "s", strings="utf8")


@settings(max_examples=40, deadline=None)
@given(drawn=tables())
def test_a_converted_table_holds_the_tables_values(drawn):
    table, fill = drawn
    if has_unfilled_nulls(table, fill):
        with pytest.raises(DataLoaderError, match="null value"):
            table_to_batch(table, fill_null=fill)
        return
    batch = table_to_batch(table, fill_null=fill)
    rows = [{name: python(column[i]) for name, column in batch.items()} for i in range(table.num_rows)]
    assert rows == expected_rows(table, fill)


def test_a_dictionary_column_is_decoded_before_its_nulls_are_filled():
    array = pa.array(["a", None, "b"]).dictionary_encode()
    assert column_to_array(array, "d", fill="z").tolist() == ["a", "z", "b"]
