import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader import ArrayDataset, DataLoader
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import BatchTransform, Compose, PseudoTransform, Transform
from dataloader.transform._base import split_batch_transforms

from ._support import noise_image, run, same, seeded

IM = ("image", "mask")


def image_and_mask():
    image = noise_image(32, 40)
    return image, image[:, :, :1].copy()


class AddOne(Transform):
    def apply(self, input):
        return input + 1


def test_compose_applies_in_order():
    out = run(V.Compose([V.Pad(2), V.CenterCrop(4), V.ToMode()]), noise_image(4, 6))
    assert out.shape == (3, 4, 4)


def test_compose_order_reaches_every_child_and_nested_composes():
    inner = V.Compose([V.RandomVerticalFlip(1.0)])
    transform = V.Compose([V.RandomHorizontalFlip(1.0), inner], order=IM)
    image, mask = image_and_mask()
    out_image, out_mask = run(transform, (image, mask))
    assert np.array_equal(out_image[:, :, :1], out_mask)
    assert np.array_equal(out_mask, mask[::-1, ::-1])


def test_compose_without_order_lets_children_use_their_own():
    transform = V.Compose([V.RandomHorizontalFlip(1.0, order=IM)])
    image, mask = image_and_mask()
    assert np.array_equal(run(transform, (image, mask))[1], mask[:, ::-1])


def test_compose_accepts_plain_transforms():
    out = run(V.Compose([V.CenterCrop(2), AddOne(), PseudoTransform()]), np.zeros((4, 4, 1), np.uint8))
    assert (out == 1).all()


def test_shuffle_indices_permute_the_groups():
    log = []

    class Tag(Transform):
        def __init__(self, name):
            self.name = name

        def apply(self, input):
            log.append(self.name)
            return input

    transform = V.Compose([Tag("a"), Tag("b"), Tag("c"), Tag("d")], shuffle_indices=[(1, 3)])
    seen = set()
    with seeded(0):
        for _ in range(30):
            log.clear()
            transform.apply(noise_image(2, 2))
            seen.add(tuple(log))
    assert seen == {("a", "b", "c", "d"), ("c", "b", "a", "d")}


def test_batch_compose_runs_each_transform_over_the_batch():
    calls = []

    class Batchy(Transform):
        def apply(self, input):
            raise AssertionError("apply_batch should be used")

        def apply_batch(self, inputs):
            calls.append(len(inputs))
            return list(inputs)

    images = [noise_image(8, 8, seed=i) for i in range(3)]
    with seeded(1):
        out = V.Compose([V.CenterCrop(4), Batchy()], batch_compose=True).apply_batch(images)
    assert calls == [3] and [o.shape for o in out] == [(4, 4, 3)] * 3


def test_batch_compose_with_order_keeps_fields_aligned():
    samples = [image_and_mask() for _ in range(2)]
    transform = V.Compose([V.RandomCrop(16, padding_size=3)], batch_compose=True, order=IM)
    with seeded(2):
        for image, mask in transform.apply_batch(samples):
            assert np.array_equal(image[:, :, :1], mask)


def test_apply_batch_without_batch_compose_matches_apply():
    images = [noise_image(seed=i) for i in range(3)]
    transform = V.Compose([V.RandomResizedCrop(8), V.ColorJitter(0.4)])
    with seeded(3):
        batch = transform.apply_batch(images)
    with seeded(3):
        single = [transform.apply(image) for image in images]
    assert same(batch, single)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        ({"transforms": [V.Pad(1), 3]}, ArgumentTypeError, r"transforms\[1\]"),
        ({"transforms": [V.Pad(1)], "batch_compose": 1}, ArgumentTypeError, "`batch_compose`"),
        ({"transforms": [V.Pad(1)], "batch_compose": True, "shuffle_indices": [(1,)]}, ArgumentValueError, "batch_compose"),
        ({"transforms": [V.Pad(1)], "shuffle_indices": [(0, 1)]}, ArgumentValueError, r"\[1, 1\]"),
        ({"transforms": [V.Pad(1), V.Pad(1)], "shuffle_indices": [(1, 2), (2,)]}, ArgumentValueError, "twice"),
        ({"transforms": [V.Pad(1)], "shuffle_indices": [1]}, ArgumentTypeError, "`shuffle_indices`"),
        ({"transforms": [V.Pad(1)], "order": ("image", "nope")}, ArgumentValueError, "'nope'"),
    ],
)
def test_compose_argument_errors(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        V.Compose(**kwargs)


# The vision Compose is a base Compose: the loader lifts its trailing batch transforms too.


class Lift(BatchTransform):
    def apply(self, batch):
        return batch


def test_vision_compose_is_a_compose_and_a_vision_transform():
    transform = V.Compose([V.Pad(1)])
    assert isinstance(transform, Compose) and isinstance(transform, V.VisionTransform)


def test_split_keeps_the_settings_of_the_per_sample_part():
    pad, flip, lift = V.Pad(1), V.RandomHorizontalFlip(), Lift()
    transform = V.Compose([pad, flip, lift], shuffle_indices=[(1, 2)], order=IM)
    part, lifted = split_batch_transforms(transform)
    assert lifted == [lift]
    assert type(part) is V.Compose and part.transforms == [pad, flip]
    assert part.order == IM and part.shuffle_indices == transform.shuffle_indices
    assert transform.transforms == [pad, flip, lift]  # the original is left alone
    part, _ = split_batch_transforms(V.Compose([pad, lift], batch_compose=True))
    assert part.batch_compose and part.order == ("image",) and part._given_order is None


def test_split_of_a_nested_vision_compose_keeps_the_inner_order():
    flip, lift = V.RandomHorizontalFlip(1.0), Lift()
    part, lifted = split_batch_transforms(Compose([V.Pad(1), V.Compose([flip, lift], order=IM)]))
    assert lifted == [lift] and type(part) is Compose
    inner = part.transforms[1]
    assert type(inner) is V.Compose and inner.transforms == [flip] and inner.order == IM
    image, mask = image_and_mask()
    out_image, out_mask = run(part, (image, mask))
    assert np.array_equal(out_mask, mask[:, ::-1])  # the base Compose pads only the image


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: V.Compose([Lift(), V.Pad(1)]), r"transforms\[0\] is a BatchTransform followed by"),
        (lambda: V.Compose([V.Compose([V.Pad(1), Lift()]), V.Pad(1)]),
         r"transforms\[0\]\.transforms\[1\] is a BatchTransform followed by"),
        (lambda: V.Compose([V.Pad(1), V.Pad(1), Lift()], shuffle_indices=[(2, 3)]),
         r"transforms\[2\] is a BatchTransform in the `shuffle_indices` group \(2, 3\)"),
        (lambda: V.Compose([V.Pad(1), Lift()], shuffle_indices=[(2,)]),
         r"transforms\[1\] is a BatchTransform in the `shuffle_indices` group \(2,\)"),
        (lambda: V.Compose([V.Pad(1), V.Compose([V.Pad(1), Lift()])], shuffle_indices=[(1, 2)]),
         r"transforms\[1\]\.transforms\[1\] is a BatchTransform in the `shuffle_indices` "
         r"group \(1, 2\)"),
        (lambda: V.Compose([Lift(), V.Pad(1)], shuffle_indices=[(1, 2)]),
         r"transforms\[0\] is a BatchTransform in the `shuffle_indices` group"),
    ],
)
def test_misplaced_batch_transforms_are_errors_at_loader_construction(make, pattern):
    with pytest.raises(ArgumentValueError, match=pattern):
        DataLoader(ArrayDataset(np.zeros((4, 2, 2, 1), np.uint8)), transform=make())


def test_with_transforms_rejects_groups_that_no_longer_fit():
    pads = [V.Pad(1), V.Pad(2), V.Pad(3)]
    transform = V.Compose(pads, shuffle_indices=[(1, 3)])
    message = r"group \(1, 3\) refers to position 3, but the new Compose has 2"
    with pytest.raises(ArgumentValueError, match=message):
        transform.with_transforms(pads[:2])
    assert transform.with_transforms(pads[::-1]).transforms == pads[::-1]
