import math

import pytest

from dataloader import _validate as v
from dataloader.errors import ArgumentTypeError, ArgumentValueError


@pytest.mark.parametrize("value", [0, -3])
def test_positive_int_rejects_small_values_with_the_name(value):
    with pytest.raises(ArgumentValueError, match=rf"`batch_size` must be a positive integer; got {value}\."):
        v.check_positive_int("batch_size", value)


@pytest.mark.parametrize("value", [1.0, "2", True, None])
def test_positive_int_rejects_other_types(value):
    with pytest.raises(ArgumentTypeError, match="`n`"):
        v.check_positive_int("n", value)


def test_errors_are_value_and_type_errors():
    with pytest.raises(ValueError):
        v.check_non_negative_int("num_workers", -1)
    with pytest.raises(TypeError):
        v.check_bool("drop_last", 1)


def test_non_negative_number_rejects_nan_and_negatives():
    assert v.check_non_negative_number("timeout", 0) == 0.0
    for bad in (-1, math.nan):
        with pytest.raises(ArgumentValueError, match="`timeout`"):
            v.check_non_negative_number("timeout", bad)


def test_seed_range():
    assert v.check_optional_seed("seed", None) is None
    with pytest.raises(ArgumentValueError):
        v.check_optional_seed("seed", -1)
    with pytest.raises(ArgumentValueError):
        v.check_optional_seed("seed", 2**64)


def test_has_apply_names_the_fix():
    with pytest.raises(ArgumentTypeError, match="`collator` must be a Collator.*apply"):
        v.check_has_apply("collator", object(), "Collator")


def test_choice():
    with pytest.raises(ArgumentValueError, match="'a', 'b'"):
        v.check_choice("mode", "c", ("a", "b"))
