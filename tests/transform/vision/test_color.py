import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader.errors import ArgumentTypeError, ArgumentValueError

from ._support import like_opencv, noise_image, run

PHOTOMETRIC = {
    "BrightnessTransform": lambda: V.BrightnessTransform(0.5),
    "ContrastTransform": lambda: V.ContrastTransform(0.5),
    "SaturationTransform": lambda: V.SaturationTransform(0.5),
    "HueTransform": lambda: V.HueTransform(0.2),
    "ColorJitter": lambda: V.ColorJitter(0.3, 0.3, 0.3, 0.1),
    "Lighting": lambda: V.Lighting(0.5),
    "GaussianNoise": lambda: V.GaussianNoise(0.0, 0.05),
}


@pytest.mark.parametrize("name", sorted(PHOTOMETRIC))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_photometric_transforms_keep_shape_and_dtype(name, dtype):
    image = noise_image().astype(dtype)
    out = run(PHOTOMETRIC[name](), image, seed=2)
    assert out.shape == image.shape and out.dtype == dtype
    assert out.min() >= 0 and out.max() <= 255


@pytest.mark.parametrize(
    "transform",
    [V.BrightnessTransform(0), V.ContrastTransform(0), V.SaturationTransform(0), V.HueTransform(0),
     V.ColorJitter(), V.Lighting(0), V.GaussianNoise(0.0, 0.0)],
    ids=lambda t: type(t).__name__,
)
def test_zero_strength_keeps_the_image(transform):
    image = noise_image()
    assert np.array_equal(run(transform, image), image)


def test_photometric_transforms_pass_geometry_through():
    image = noise_image()
    boxes, mask = np.array([[1.0, 2.0, 3.0, 4.0]]), np.ones((48, 64, 1), np.uint8)
    out = run(V.ColorJitter(0.5, order=("image", "boxes", "mask")), (image, boxes, mask))
    assert out[1] is boxes and out[2] is mask


def test_brightness_scales_and_saturates():
    image = np.array([[[10, 100, 200]]], np.uint8)
    assert run(V.BrightnessTransform([2, 2]), image).tolist() == [[[20, 200, 255]]]
    assert run(V.BrightnessTransform([0.5, 0.5]), image.astype(np.float32)).tolist() == [[[5, 50, 100]]]


def test_contrast_zero_gives_the_mean_gray():
    image = noise_image()
    out = run(V.ContrastTransform([0, 0]), image)
    assert len(np.unique(out)) == 1
    assert like_opencv(out[:1, :1, :1], lambda cv2: np.rint([[cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).mean()]]))


def test_saturation_zero_gives_gray():
    image = noise_image()
    out = run(V.SaturationTransform([0, 0]), image)
    assert np.array_equal(out, np.repeat(out[:, :, :1], 3, axis=2))
    assert like_opencv(out, lambda cv2: np.repeat(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)[:, :, None], 3, axis=2))


def test_saturation_and_contrast_accept_one_channel():
    image = noise_image(channels=1)
    assert run(V.SaturationTransform(0.5), image).shape == image.shape
    assert run(V.ContrastTransform(0.5), image).shape == image.shape


def test_hue_needs_three_channels():
    with pytest.raises(ArgumentValueError, match="3-channel"):
        run(V.HueTransform(0.2), noise_image(channels=1))


def test_hue_half_turn_on_uint8_and_float_agree():
    image = np.zeros((1, 1, 3), np.uint8)
    image[0, 0] = (0, 0, 255)  # red in BGR
    cyan = run(V.HueTransform([0.5, 0.5]), image)
    assert np.allclose(cyan, [[[255, 255, 0]]], atol=4)  # OpenCV's 256-level hue is not exact
    as_float = run(V.HueTransform([0.5, 0.5]), image.astype(np.float32))
    assert np.allclose(as_float, [[[255, 255, 0]]], atol=1e-3)


def test_normalize_returns_float32_per_channel():
    image = noise_image()
    out = run(V.Normalize([100, 110, 120], [50, 60, 70]), image)
    assert out.dtype == np.float32 and out.shape == image.shape
    expected = (image.astype(np.float32) - [100, 110, 120]) / [50, 60, 70]
    assert np.allclose(out, expected, atol=1e-5)


def test_normalize_scalar_and_many_channels():
    image = noise_image(channels=6)
    assert np.allclose(run(V.Normalize(128, 64), image), (image - 128.0) / 64, atol=1e-5)
    out = run(V.Normalize(list(range(6)), [2] * 6), image)
    assert np.allclose(out, (image - np.arange(6.0)) / 2, atol=1e-5)


def test_normalize_channel_count_mismatch_is_an_error():
    with pytest.raises(ArgumentValueError, match="channels"):
        run(V.Normalize([1, 2], [1, 2]), noise_image())


def test_to_mode_chw():
    image = noise_image()
    mask = np.zeros((48, 64, 1), np.uint8)
    out_image, out_mask = run(V.ToMode(order=("image", "mask")), (image, mask))
    assert out_image.shape == (3, 48, 64) and out_image.flags.c_contiguous
    assert np.array_equal(out_image, image.transpose(2, 0, 1)) and out_mask.shape == (1, 48, 64)


def test_gaussian_noise_std_is_in_units_of_255():
    image = np.full((200, 200, 3), 128, np.float32)
    out = run(V.GaussianNoise(0.0, 0.1), image)
    assert abs((out - 128).std() - 25.5) < 1
    out = run(V.GaussianNoise([0.0, 0.1, 0.2], [0.0, 0.0, 0.0]), image)
    assert np.allclose(out[0, 0], [128, 153.5, 179])


def test_lighting_adds_one_offset_per_channel():
    image = np.full((4, 4, 3), 128, np.uint8)
    out = run(V.Lighting(1.0), image).astype(int) - 128
    assert (out == out[0, 0]).all() and np.abs(out[0, 0]).max() >= 1


def test_lighting_needs_three_channels():
    with pytest.raises(ArgumentValueError, match="3-channel"):
        run(V.Lighting(0.1), noise_image(channels=4))


def test_color_jitter_applies_all_parts_in_a_random_order():
    image = noise_image()
    transform = V.ColorJitter(brightness=[1.5, 1.5], saturation=[0, 0])
    outputs = {run(transform, image, seed=s).tobytes() for s in range(12)}
    assert len(outputs) == 2  # brightness then gray, or gray then brightness


@pytest.mark.parametrize(
    "make, error, pattern",
    [
        (lambda: V.BrightnessTransform(-1), ArgumentValueError, "`value`"),
        (lambda: V.ContrastTransform([2, 1]), ArgumentValueError, "`value`"),
        (lambda: V.SaturationTransform("a"), ArgumentTypeError, "`value`"),
        (lambda: V.HueTransform(0.6), ArgumentValueError, r"\[0, 0.5\]"),
        (lambda: V.HueTransform([-0.6, 0]), ArgumentValueError, "`value`"),
        (lambda: V.HueTransform([0, 0.7]), ArgumentValueError, "`value`"),
        (lambda: V.ColorJitter(brightness=-0.1), ArgumentValueError, "`brightness`"),
        (lambda: V.ColorJitter(contrast=[-1, 1]), ArgumentValueError, "`contrast`"),
        (lambda: V.ColorJitter(saturation=[1, 2, 3]), ArgumentTypeError, "`saturation`"),
        (lambda: V.ColorJitter(hue=1), ArgumentValueError, "`hue`"),
        (lambda: V.Normalize(std=0), ArgumentValueError, "`std`"),
        (lambda: V.Normalize(mean="a"), ArgumentTypeError, "`mean`"),
        (lambda: V.GaussianNoise(std=-1), ArgumentValueError, "`std`"),
        (lambda: V.Lighting(-0.1), ArgumentValueError, "`scale`"),
        (lambda: V.ToMode("HWC"), ArgumentValueError, "`mode`"),
    ],
)
def test_argument_errors_name_the_argument(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()
