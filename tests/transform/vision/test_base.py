import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader.errors import ArgumentTypeError, ArgumentValueError
from dataloader.transform import PseudoTransform, Transform
from dataloader.transform.vision import VisionTransform

from ._catalog import CATALOG, RANDOM
from ._support import FULL_ORDER, full_sample, noise_image, run, same, seeded, snapshot


def test_public_names_are_sorted_and_exported():
    assert V.__all__ == sorted(V.__all__)
    constants = {name for name in V.__all__ if name.isupper()}  # INTER_* flags and IMAGE_BACKEND
    for name in set(V.__all__) - {"Transform", "PseudoTransform"} - constants:  # MegEngine re-exports those two
        assert getattr(V, name).__module__.startswith("dataloader.transform.vision")
    assert [getattr(V, name) for name in sorted(constants) if name.startswith("INTER_")] == [3, 2, 4, 1, 5, 0, 6]
    assert V.IMAGE_BACKEND in ("opencv", "pillow")
    assert V.Transform is Transform and V.PseudoTransform is PseudoTransform
    assert issubclass(VisionTransform, Transform)


def test_default_order_is_image_only():
    assert V.RandomHorizontalFlip().order == ("image",)


def test_plain_array_is_the_image_and_comes_back_as_an_array():
    image = noise_image()
    out = run(V.RandomHorizontalFlip(1.0), image)
    assert isinstance(out, np.ndarray)
    assert np.array_equal(out, image[:, ::-1])


def test_tuple_in_tuple_out_and_trailing_fields_pass_through():
    image = noise_image()
    label = np.int32(3)
    out = run(V.RandomHorizontalFlip(1.0), (image, label, "extra"))
    assert isinstance(out, tuple) and len(out) == 3
    assert out[1] is label and out[2] == "extra"


def test_category_and_info_fields_pass_through_unchanged():
    sample = full_sample()
    out = run(V.RandomCrop(32, order=FULL_ORDER), sample)
    assert out[5] is sample[5]
    assert out[6] is sample[6]


def test_unknown_field_name_is_an_error_naming_it():
    with pytest.raises(ArgumentValueError, match="'depth'"):
        V.Resize(10, order=("image", "depth"))


@pytest.mark.parametrize("order", ["image", 3, ("image", 3)])
def test_order_must_be_a_sequence_of_strings(order):
    with pytest.raises(ArgumentTypeError, match="`order`"):
        V.Resize(10, order=order)


def test_sample_shorter_than_order_is_an_error():
    with pytest.raises(ArgumentValueError, match="2 fields"):
        V.Resize(10, order=("image", "mask", "boxes")).apply((noise_image(), noise_image()))


def test_plain_array_with_a_longer_order_is_an_error():
    with pytest.raises(ArgumentValueError, match="pass the sample as a tuple"):
        V.Resize(10, order=("image", "mask")).apply(noise_image())


def test_image_must_be_hwc():
    with pytest.raises(ArgumentValueError, match=r"\(H, W, C\).*image\[:, :, None\]"):
        V.Resize(10).apply(np.zeros((8, 8), np.uint8))


def test_geometry_needs_the_image_in_order():
    mask = np.zeros((8, 8, 1), np.uint8)
    with pytest.raises(ArgumentValueError, match="no 'image'"):
        V.CenterCrop(4, order=("mask",)).apply((mask,))


def test_apply_batch_returns_a_list_of_samples():
    images = [noise_image(seed=i) for i in range(3)]
    with seeded(0):
        out = V.CenterCrop(10).apply_batch(images)
    assert isinstance(out, list) and [o.shape for o in out] == [(10, 10, 3)] * 3


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_transform_leaves_its_input_unchanged(name):
    factory, _ = CATALOG[name]
    sample = full_sample()
    before = snapshot(sample)
    run(factory(FULL_ORDER), sample, seed=3)
    assert same(sample, before)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_transform_is_deterministic_under_an_installed_generator(name):
    factory, _ = CATALOG[name]
    transform = factory(FULL_ORDER)
    assert same(run(transform, full_sample(), seed=11), run(transform, full_sample(), seed=11))


@pytest.mark.parametrize("name", RANDOM)
def test_random_transforms_depend_on_the_generator(name):
    factory, _ = CATALOG[name]
    transform = factory(FULL_ORDER)
    outputs = [run(transform, full_sample(), seed=seed) for seed in range(8)]
    assert any(not same(outputs[0], other) for other in outputs[1:])


@pytest.mark.parametrize("name", RANDOM)
def test_outside_a_loader_numpy_seed_makes_calls_reproducible(name):
    factory, _ = CATALOG[name]
    transform = factory(FULL_ORDER)
    np.random.seed(5)
    first = transform.apply(full_sample())
    np.random.seed(5)
    assert same(transform.apply(full_sample()), first)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_transform_keeps_the_sample_structure(name):
    factory, _ = CATALOG[name]
    out = run(factory(FULL_ORDER), full_sample(), seed=1)
    assert isinstance(out, tuple) and len(out) == len(FULL_ORDER)
    assert isinstance(out[4], list) and isinstance(out[4][0], list)
    assert out[1].shape == (2, 4) and out[3].shape == (1, 2, 3)
    assert np.array_equal(out[3][..., 2], full_sample()[3][..., 2])  # visibility untouched


def test_empty_boxes_and_keypoints_are_fine():
    image = noise_image()
    boxes = np.zeros((0, 4), np.float32)
    keypoints = np.zeros((0, 5, 3), np.float32)
    out = run(V.RandomResizedCrop(16, order=("image", "boxes", "keypoints")), (image, boxes, keypoints))
    assert out[1].shape == (0, 4) and out[2].shape == (0, 5, 3)


def test_integer_coordinates_become_float32():
    out = run(V.Resize((96, 128), order=("image", "boxes")), (noise_image(), np.array([[1, 2, 3, 4]])))
    assert out[1].dtype == np.float32
    assert np.allclose(out[1], [[2, 4, 6, 8]])


def test_float64_coordinates_stay_float64():
    boxes = np.array([[1.0, 2.0, 3.0, 4.0]])
    out = run(V.RandomHorizontalFlip(1.0, order=("image", "boxes")), (noise_image(), boxes))
    assert out[1].dtype == np.float64


def test_boxes_must_be_n_by_4():
    with pytest.raises(ArgumentValueError, match=r"\(N, 4\)"):
        run(V.Resize(10, order=("image", "boxes")), (noise_image(), np.zeros((2, 5))))


class Brighten(VisionTransform):
    """A user transform: a new field name, params passed as arguments."""

    _random = True

    def _get_params(self, image, rng):
        return int(rng.integers(1, 10))

    def _apply_image(self, image, step):
        return image + np.uint8(step)

    def _apply_depth(self, depth, step):
        return depth + step


def test_subclasses_add_fields_with_apply_methods():
    transform = Brighten(order=("image", "depth"))
    image = np.zeros((2, 2, 1), np.uint8)
    out_image, out_depth = run(transform, (image, np.zeros((2, 2))), seed=4)
    assert out_image[0, 0, 0] == out_depth[0, 0] >= 1


def test_missing_apply_method_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="masks"):
        run(Brighten(order=("image", "mask")), (np.zeros((2, 2, 1), np.uint8), np.zeros((2, 2, 1))))
