import numpy as np
import pytest

import dataloader.transform.vision as V
from dataloader.errors import ArgumentTypeError, ArgumentValueError

from ._support import like_opencv, noise_image, run, seeded

IBM = ("image", "boxes", "mask")


def sample(height=48, width=64):
    mask = np.zeros((height, width, 1), np.uint8)
    mask[10:20, 5:25] = 1
    return noise_image(height, width), np.array([[5.0, 10.0, 25.0, 20.0]], np.float32), mask


def test_pad_four_sides_with_values():
    image, boxes, mask = sample()
    out_image, out_boxes, out_mask = run(V.Pad((1, 2, 3, 4), value=7, mask_value=9, order=IBM), (image, boxes, mask))
    assert out_image.shape == (51, 71, 3) and out_image.dtype == np.uint8
    assert np.array_equal(out_image[1:49, 3:67], image)
    assert (out_image[0] == 7).all() and (out_image[:, -4:] == 7).all()
    assert out_mask.shape == (51, 71, 1) and (out_mask[-1] == 9).all()
    assert np.allclose(out_boxes, [[8, 11, 28, 21]])


def test_pad_forms_and_per_channel_value():
    image = noise_image(4, 5)
    assert run(V.Pad(2), image).shape == (8, 9, 3)
    assert run(V.Pad((1, 3)), image).shape == (5, 8, 3)  # (bottom, right)
    out = run(V.Pad(1, value=(1, 2, 3)), image)
    assert out[0, 0].tolist() == [1, 2, 3]


def test_pad_with_a_float_value_gives_float32():
    assert run(V.Pad(1, value=0.5), noise_image(4, 4)).dtype == np.float32


def test_pad_value_with_too_few_channels_is_an_error():
    with pytest.raises(ArgumentValueError, match="channels"):
        run(V.Pad(1, value=(1, 2)), noise_image(4, 4))


def test_resize_to_height_width():
    image, boxes, mask = sample()
    out_image, out_boxes, out_mask = run(V.Resize((24, 128), order=IBM), (image, boxes, mask))
    assert out_image.shape == (24, 128, 3) and out_mask.shape == (24, 128, 1)
    assert out_image.dtype == np.uint8 and set(np.unique(out_mask)) <= {0, 1}
    assert np.allclose(out_boxes, [[10, 5, 50, 10]])
    assert like_opencv(out_image, lambda cv2: cv2.resize(image, (128, 24), interpolation=cv2.INTER_LINEAR))


def test_resize_short_side_keeps_aspect_ratio():
    assert run(V.Resize(24), noise_image(48, 64)).shape == (24, 32, 3)
    assert run(V.Resize(24), noise_image(70, 48)).shape == (35, 24, 3)
    image = noise_image(24, 40)
    assert run(V.Resize(24), image) is image


def test_resize_keeps_float32_and_single_channel():
    image = noise_image(10, 10, channels=1).astype(np.float32)
    out = run(V.Resize((5, 7)), image)
    assert out.shape == (5, 7, 1) and out.dtype == np.float32


def test_interpolation_sequence_draws_one_per_sample():
    image = noise_image()
    transform = V.Resize((20, 20), interpolation=[V.INTER_NEAREST, V.INTER_AREA])
    outputs = {run(transform, image, seed=s).tobytes() for s in range(20)}
    assert len(outputs) == 2


def test_shortest_edge_resize_range_and_cap():
    transform = V.ShortestEdgeResize((20, 30), max_size=40)
    for seed in range(20):
        h, w, _ = run(transform, noise_image(48, 64), seed=seed).shape
        assert 20 <= min(h, w) <= 30 and max(h, w) <= 40
    capped = V.ShortestEdgeResize(60, max_size=50)
    assert run(capped, noise_image(40, 100)).shape == (20, 50, 3)


def test_shortest_edge_resize_choice():
    transform = V.ShortestEdgeResize((16, 32), max_size=1000, sample_style="choice")
    shorts = {min(run(transform, noise_image(48, 64), seed=s).shape[:2]) for s in range(30)}
    assert shorts == {16, 32}


def test_random_resize_scales_within_range():
    for seed in range(20):
        h, w, _ = run(V.RandomResize((0.5, 2.0)), noise_image(40, 60), seed=seed).shape
        assert 20 <= h <= 80 and abs(w / h - 1.5) < 0.05


def test_random_crop_is_a_window_of_the_padded_image():
    image = noise_image(20, 30)
    padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
    for seed in range(10):
        out = run(V.RandomCrop((16, 20), padding_size=4), image, seed=seed)
        assert out.shape == (16, 20, 3)
        windows = np.lib.stride_tricks.sliding_window_view(padded, (16, 20, 3))[..., 0, :, :, :]
        assert (windows == out).all(axis=(-3, -2, -1)).any()


def test_random_crop_pads_up_to_the_output_size():
    image = noise_image(10, 12)
    out = run(V.RandomCrop((16, 20), padding_value=(5, 5, 5)), image)
    assert out.shape == (16, 20, 3)
    assert np.array_equal(out[:10, :12], image) and (out[10:] == 5).all() and (out[:, 12:] == 5).all()


def test_random_resized_crop_output_and_fallback():
    for seed in range(10):
        assert run(V.RandomResizedCrop((24, 32)), noise_image(), seed=seed).shape == (24, 32, 3)
    # No window with ratio in [4, 5] fits a square: fall back to the central 100x25 window.
    image, boxes, mask = sample(100, 100)
    transform = V.RandomResizedCrop(10, scale_range=(0.9, 1.0), ratio_range=(4, 5), order=IBM)
    out_image, out_boxes, _ = run(transform, (image, boxes, mask))
    assert like_opencv(out_image, lambda cv2: cv2.resize(image[37:62, 0:100], (10, 10)))


def test_center_crop_takes_the_middle():
    image = noise_image(10, 12)
    out = run(V.CenterCrop((4, 6)), image)
    assert np.array_equal(out, image[3:7, 3:9])


def test_center_crop_larger_than_image_is_an_error():
    with pytest.raises(ArgumentValueError, match="larger than the image"):
        run(V.CenterCrop(20), noise_image(10, 30))


def test_flips_mirror_pixels_and_coordinates():
    image, boxes, mask = sample()
    out = run(V.RandomHorizontalFlip(1.0, order=IBM), (image, boxes, mask))
    assert np.array_equal(out[0], image[:, ::-1]) and np.array_equal(out[2], mask[:, ::-1])
    assert np.allclose(out[1], [[39, 10, 59, 20]])
    out = run(V.RandomVerticalFlip(1.0, order=IBM), (image, boxes, mask))
    assert np.array_equal(out[0], image[::-1]) and np.allclose(out[1], [[5, 28, 25, 38]])


def test_flip_probability():
    image = noise_image(4, 4)
    assert np.array_equal(run(V.RandomHorizontalFlip(0.0), image), image)
    with seeded(0):
        flips = sum(not np.array_equal(V.RandomVerticalFlip(0.3).apply(image), image) for _ in range(400))
    assert 80 < flips < 160


def test_flip_works_for_many_channels():
    image = noise_image(5, 6, channels=7)
    assert np.array_equal(run(V.RandomHorizontalFlip(1.0), image), image[:, ::-1])


def test_crop_clips_boxes_and_keeps_every_box():
    image = noise_image(40, 40)
    boxes = np.array([[0, 0, 40, 40], [0, 0, 2, 2]], np.float32)
    out = run(V.CenterCrop(20, order=("image", "boxes")), (image, boxes))
    assert np.allclose(out[1], [[0, 0, 20, 20], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    "make, error, pattern",
    [
        (lambda: V.Resize(0), ArgumentValueError, "`output_size`"),
        (lambda: V.Resize((1, 2, 3)), ArgumentTypeError, "`output_size`"),
        (lambda: V.Resize(10, interpolation=99), ArgumentValueError, "`interpolation`"),
        (lambda: V.Resize(10, interpolation=[]), ArgumentValueError, "`interpolation`"),
        (lambda: V.Pad(-1), ArgumentValueError, "`size`"),
        (lambda: V.Pad((1, 2, 3)), ArgumentTypeError, "`size`"),
        (lambda: V.Pad(1, value="x"), ArgumentTypeError, "`value`"),
        (lambda: V.Pad(1, mask_value=0.5), ArgumentTypeError, "`mask_value`"),
        (lambda: V.RandomCrop(0), ArgumentValueError, "`output_size`"),
        (lambda: V.RandomCrop(4, padding_maskvalue=None), ArgumentTypeError, "`padding_maskvalue`"),
        (lambda: V.RandomResizedCrop(4, scale_range=(1.0, 0.5)), ArgumentValueError, "`scale_range`"),
        (lambda: V.RandomResizedCrop(4, ratio_range=(0, 1)), ArgumentValueError, "`ratio_range`"),
        (lambda: V.RandomResize((0, 1)), ArgumentValueError, "`scale_range`"),
        (lambda: V.RandomResize(2), ArgumentTypeError, "`scale_range`"),
        (lambda: V.ShortestEdgeResize((3, 2), 10), ArgumentValueError, "`min_size`"),
        (lambda: V.ShortestEdgeResize("a", 10), ArgumentTypeError, "`min_size`"),
        (lambda: V.ShortestEdgeResize(3, 0), ArgumentValueError, "`max_size`"),
        (lambda: V.ShortestEdgeResize(3, 10, sample_style="x"), ArgumentValueError, "`sample_style`"),
        (lambda: V.CenterCrop((2, "a")), ArgumentTypeError, "`output_size`"),
        (lambda: V.RandomHorizontalFlip(1.5), ArgumentValueError, "`prob`"),
        (lambda: V.RandomVerticalFlip("a"), ArgumentTypeError, "`prob`"),
    ],
)
def test_argument_errors_name_the_argument(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()


@pytest.mark.parametrize("dtype", [np.bool_, np.int64, np.uint8, np.float32])
def test_masks_of_any_dtype_go_through_every_geometry(dtype):
    mask = (noise_image(20, 30, 1) > 128).astype(dtype)
    transform = V.Compose(
        [V.RandomCrop(16, padding_size=2), V.Resize((40, 50)), V.RandomHorizontalFlip(1.0), V.Pad(1)],
        order=("image", "mask"),
    )
    image, out = run(transform, (noise_image(20, 30), mask))
    assert out.dtype == dtype and out.shape == (42, 52, 1) and image.shape == (42, 52, 3)


def test_mask_resize_samples_pixel_centres():
    mask = np.arange(4, dtype=np.int64).reshape(1, 4, 1)
    out = run(V.Resize((1, 8), order=("image", "mask")), (noise_image(1, 4), mask))[1]
    assert out[0, :, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    out = run(V.Resize((1, 2), order=("image", "mask")), (noise_image(1, 4), mask))[1]
    assert out[0, :, 0].tolist() == [1, 3]


def test_pad_and_flip_many_channels_and_other_dtypes():
    image = noise_image(5, 6, channels=6).astype(np.int64)
    out = run(V.Compose([V.Pad(2, value=list(range(6))), V.RandomVerticalFlip(1.0)]), image)
    assert out.shape == (9, 10, 6) and out.dtype == np.int64
    assert out[0, 0].tolist() == list(range(6)) and np.array_equal(out[2:7, 2:8], image[::-1])
