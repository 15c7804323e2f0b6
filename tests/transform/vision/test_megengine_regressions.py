"""Bugs of MegEngine's vision transforms that this package fixes, one test each."""

import sys
import threading
import warnings

import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader._local import using_batch_rng
from dataloader.transform.vision import _functional as F

from ._support import noise_image, run, same

IM = ("image", "mask")


def test_random_crop_pads_the_mask_like_the_image_inside_compose():
    # MegEngine built RandomCrop's inner Pad with the crop's order at construction, so
    # Compose's order never reached it: only the image was padded and the mask was cut
    # from a different place (and padded with the image fill, not padding_maskvalue).
    image = np.random.default_rng(0).integers(1, 256, (20, 24, 3), dtype=np.uint8)
    mask = image[:, :, :1].copy()
    transform = V.Compose([V.RandomCrop((26, 30), padding_size=4, padding_maskvalue=0)], order=IM)
    for seed in range(20):
        out_image, out_mask = run(transform, (image, mask), seed=seed)
        assert out_image.shape[:2] == out_mask.shape[:2] == (26, 30)
        assert np.array_equal(out_image[:, :, :1], out_mask)


def test_random_crop_fills_the_mask_with_padding_maskvalue():
    image, mask = noise_image(8, 8), np.zeros((8, 8, 1), np.uint8)
    transform = V.RandomCrop(16, padding_value=(0, 0, 0), padding_maskvalue=255, order=IM)
    _, out_mask = run(transform, (image, mask))
    assert (out_mask[8:] == 255).all() and (out_mask[:8, :8] == 0).all()


def test_color_jitter_accepts_the_documented_min_max_form():
    # MegEngine compared the list with 0 (`value < 0`) and raised TypeError.
    transform = V.ColorJitter(brightness=[0.5, 1.5], contrast=[0.8, 1.2], saturation=[0, 2], hue=[-0.1, 0.1])
    image = noise_image()
    assert run(transform, image).shape == image.shape
    doubled = run(V.ColorJitter(brightness=[2, 2]), image)
    assert np.array_equal(doubled, np.clip(image.astype(int) * 2, 0, 255))


def test_negative_hue_shift_wraps_instead_of_overflowing():
    # MegEngine computed np.uint8(alpha * 255) with a negative alpha: an overflow.
    image = noise_image()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = run(V.HueTransform([-0.25, -0.25]), image)
    assert np.array_equal(out, F.shift_hue(image, 0.75))
    assert not np.array_equal(out, image)


def test_compose_does_not_change_its_childrens_order():
    # MegEngine's Compose assigned its order to every child (and nested child).
    flip = V.RandomHorizontalFlip(1.0)
    inner = V.Compose([flip])
    V.Compose([inner], order=IM)
    assert flip.order == ("image",) and inner.order == ("image",)
    image = noise_image()
    assert np.array_equal(run(flip, image), image[:, ::-1])  # still usable alone


def test_one_child_shared_by_composes_with_different_orders():
    crop = V.RandomCrop(10)
    with_mask = V.Compose([crop], order=IM)
    alone = V.Compose([crop])
    image, mask = noise_image(16, 16), noise_image(16, 16, channels=1)
    out_image, out_mask = run(with_mask, (image, mask))
    assert out_mask.shape == (10, 10, 1)
    assert run(alone, image).shape == (10, 10, 3)


def test_one_instance_is_safe_to_share_between_threads():
    # MegEngine stored the drawn parameters on self between apply() and _apply_*():
    # two threads interleaving mixed one sample's crop with another's.
    transform = V.Compose(
        [V.RandomResizedCrop(24), V.RandomHorizontalFlip(), V.ColorJitter(0.4, 0.4, 0.4, 0.1),
         V.RandomCrop(20, padding_size=2), V.GaussianNoise(std=0.02)],
        shuffle_indices=[(2, 3)],
        order=("image", "boxes", "mask"),
    )
    samples = [
        (noise_image(40, 50, seed=i), np.array([[5.0, 5.0, 30.0, 20.0]]), noise_image(40, 50, 1, seed=i))
        for i in range(60)
    ]

    def apply_all(seed):
        with using_batch_rng(np.random.default_rng(seed)):
            return [transform.apply(sample) for sample in samples]

    expected = {seed: apply_all(seed) for seed in (1, 2)}
    results, barrier = {}, threading.Barrier(2)

    def worker(seed):
        barrier.wait()
        results[seed] = apply_all(seed)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(seed,)) for seed in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    for seed in (1, 2):
        assert same(results[seed], expected[seed]), f"thread with seed {seed} differs"
    assert not same(expected[1], expected[2])


@pytest.mark.parametrize(
    "make",
    [
        lambda order: V.Resize((8, 8), order=order),
        lambda order: V.RandomHorizontalFlip(1.0, order=order),
        lambda order: V.CenterCrop(4, order=order),
        lambda order: V.RandomCrop(6, padding_size=2, order=order),
    ],
)
def test_coordinates_are_not_modified_in_place(make):
    # MegEngine wrote into the caller's coordinate arrays (coords[:, 0] -= x).
    boxes = np.array([[1.0, 2.0, 6.0, 7.0]], np.float32)
    run(make(("image", "boxes")), (noise_image(10, 10), boxes))
    assert boxes.tolist() == [[1.0, 2.0, 6.0, 7.0]]
