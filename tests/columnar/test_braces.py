"""Brace patterns: numeric ranges keep their zero padding, alternatives keep their order."""

from __future__ import annotations

import pytest

from dataloader.columnar._braces import expand_braces
from dataloader.errors import ArgumentValueError


def test_a_name_without_braces_is_itself():
    assert expand_braces("data/train.tar") == ["data/train.tar"]


def test_a_range_keeps_the_width_of_its_first_bound():
    assert expand_braces("s-{008..011}.tar") == ["s-008.tar", "s-009.tar", "s-010.tar", "s-011.tar"]
    assert expand_braces("s{9..10}") == ["s9", "s10"]
    assert expand_braces("{3..3}") == ["3"]


def test_alternatives_and_several_braces_give_every_combination_in_order():
    assert expand_braces("{train,val}/{0..1}.tar") == ["train/0.tar", "train/1.tar", "val/0.tar", "val/1.tar"]
    assert expand_braces("s3://b/{a,}x") == ["s3://b/ax", "s3://b/x"]


@pytest.mark.parametrize("pattern, why", [
    ("s-{000..0099", "unmatched or nested brace"),
    ("s-000..0099}", "unmatched or nested brace"),
    ("{a,{b,c}}", "unmatched or nested brace"),
    ("s-{10..2}", "counts down"),
    ("s-{x..y}", "neither a range of numbers"),
    ("s-{}", "neither a range of numbers"),
    ("{0..99999}{0..999}", "more than"),
])
def test_a_malformed_pattern_is_refused(pattern, why):
    with pytest.raises(ArgumentValueError, match=why):
        expand_braces(pattern)
