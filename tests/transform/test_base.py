import pytest

from dataloader.errors import ArgumentTypeError
from dataloader.transform import Compose, PseudoTransform, Transform


class AddOne(Transform):
    def apply(self, input):
        return input + 1


class Double(Transform):
    def apply(self, input):
        return input * 2

    def apply_batch(self, inputs):
        self.batch_calls = getattr(self, "batch_calls", 0) + 1
        return [x * 2 for x in inputs]


def test_apply_batch_maps_apply():
    assert AddOne().apply_batch([1, 2, 3]) == [2, 3, 4]


def test_pseudo_transform_is_identity():
    sample = {"a": 1}
    assert PseudoTransform().apply(sample) is sample
    assert PseudoTransform().apply_batch([1, 2]) == [1, 2]


def test_compose_applies_in_order():
    assert Compose([AddOne(), Double()]).apply(3) == 8
    assert Compose([Double(), AddOne()]).apply(3) == 7


def test_compose_uses_each_childs_apply_batch():
    double = Double()
    assert Compose([AddOne(), double]).apply_batch([1, 2]) == [4, 6]
    assert double.batch_calls == 1


def test_compose_rejects_non_transforms_naming_the_position():
    with pytest.raises(ArgumentTypeError, match=r"transforms\[1\]"):
        Compose([AddOne(), 42])


def test_transform_is_abstract():
    with pytest.raises(TypeError):
        Transform()
