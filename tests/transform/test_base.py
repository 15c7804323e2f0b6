import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, SequentialSampler
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import BatchTransform, Compose, CudaTransform, PseudoTransform, Transform
from dataloader.transform._base import split_batch_transforms


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


def test_batch_transform_as_it_is_is_the_identity():
    batch = (np.arange(6).reshape(3, 2), np.arange(3))
    for identity in (BatchTransform(), CudaTransform()):
        assert identity.apply(batch) is batch
        assert identity.apply_batch([batch, batch]) == [batch, batch]
    assert load(CudaTransform()) == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8, 9], [10, 11]]]


# Batch transforms that end a Compose are lifted out of the per-sample stage.


class Count(BatchTransform):
    """Records the shape of every batch it sees; adds 100 to it."""

    def __init__(self):
        self.shapes = []

    def apply(self, batch):
        self.shapes.append(batch[0].shape)
        return (batch[0] + 100,)


class Shift(Transform):
    def apply(self, sample):
        return (sample[0] + 1,)


def load(transform, num_workers=0, rows=6, batch_size=4):
    dataset = ArrayDataset(np.arange(rows * 2).reshape(rows, 2))
    sampler = SequentialSampler(dataset, batch_size=batch_size)
    loader = DataLoader(dataset, sampler, transform=transform, num_workers=num_workers, timeout=60)
    return [b[0].tolist() for b in loader]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_transform_ending_a_nested_compose_runs_once_per_batch(num_workers, no_leaks):
    count = Count()
    got = load(Compose([Shift(), Compose([Shift(), count])]), num_workers)
    assert got == [[[102, 103], [104, 105], [106, 107], [108, 109]], [[110, 111], [112, 113]]]
    assert count.shapes == [(4, 2), (2, 2)]  # in this process, on whole collated batches


def test_split_lifts_the_tail_of_nested_composes_and_keeps_the_rest():
    first, second, inner = Count(), Count(), Shift()
    outer_shift = Shift()
    part, lifted = split_batch_transforms(Compose([outer_shift, Compose([inner, first]), second]))
    assert lifted == [first, second]
    assert type(part) is Compose and part.transforms[0] is outer_shift
    assert type(part.transforms[1]) is Compose and part.transforms[1].transforms == [inner]


def test_split_returns_a_compose_without_batch_transforms_unchanged():
    compose = Compose([Shift(), Compose([Shift()])])
    assert split_batch_transforms(compose) == (compose, [])
    part, lifted = split_batch_transforms(Compose([Count(), Compose([Count()])]))
    assert type(part) is Compose and part.transforms == [] and len(lifted) == 2


@pytest.mark.parametrize(
    "transform, path",
    [
        (lambda: Compose([Count(), Shift()]), r"transforms\[0\] is"),
        (lambda: Compose([Compose([Shift(), Count()]), Shift()]),
         r"transforms\[0\]\.transforms\[1\] is"),
        (lambda: Compose([Shift(), Compose([Count(), Shift()]), Count()]),
         r"transforms\[1\]\.transforms\[0\] is"),
    ],
)
def test_batch_transform_followed_by_per_sample_ones_is_an_error_naming_its_path(transform, path):
    message = path + " a BatchTransform followed by per-sample transforms"
    with pytest.raises(ArgumentValueError, match=message):
        DataLoader(ArrayDataset(np.arange(4)), transform=transform())


def test_with_transforms_copies_settings_and_checks_the_children():
    class Tagged(Compose):
        def __init__(self, transforms, tag):
            super().__init__(transforms)
            self.tag = tag

    shift = Shift()
    original = Tagged([Shift(), Count()], "t")
    clone = original.with_transforms([shift])
    assert type(clone) is Tagged and clone.tag == "t" and clone.transforms == [shift]
    assert len(original.transforms) == 2
    with pytest.raises(ArgumentTypeError, match=r"transforms\[0\]"):
        original.with_transforms([42])
