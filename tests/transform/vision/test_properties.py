"""Property tests: image, boxes, mask and keypoints move together under every geometry."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataloader.transform.vision as V

from ._support import mask_boxes, seeded

# VISION_PROPERTY_EXAMPLES=1000 for a deeper search than the default run's.
EXAMPLES = int(os.environ.get("VISION_PROPERTY_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IBMK = ("image", "boxes", "mask", "keypoints", "coords")
# Two far-apart points, never clipped: their distance measures how much a step scaled.
PROBE = np.array([[0.0, 0.0], [1000.0, 1000.0]])
RESIZING = (V.Resize, V.RandomResize, V.ShortestEdgeResize, V.RandomResizedCrop)


@st.composite
def scenes(draw, max_side=40):
    """An image size, integer boxes inside it, keypoints at pixel centres, and a seed."""
    height, width = draw(st.integers(6, max_side)), draw(st.integers(6, max_side))
    boxes = []
    for _ in range(draw(st.integers(1, 4))):
        x0, y0 = draw(st.integers(0, width - 1)), draw(st.integers(0, height - 1))
        boxes.append((x0, y0, draw(st.integers(x0 + 1, width)), draw(st.integers(y0 + 1, height))))
    pixels = draw(
        st.lists(st.tuples(st.integers(0, height - 1), st.integers(0, width - 1)), min_size=1, max_size=3, unique=True)
    )
    keypoints = np.array([[[col + 0.5, row + 0.5, 2.0] for row, col in pixels]], np.float32)
    return height, width, np.array(boxes, np.float32), keypoints, draw(st.integers(0, 2**32 - 1))


def exact_geometry(height: int, width: int):
    """Transforms that move whole pixels (no interpolation), as hypothesis strategies."""
    return st.one_of(
        st.builds(lambda p: V.RandomHorizontalFlip(p, order=IBMK), st.sampled_from([0.0, 0.5, 1.0])),
        st.builds(lambda p: V.RandomVerticalFlip(p, order=IBMK), st.sampled_from([0.0, 0.5, 1.0])),
        st.builds(
            lambda h, w: V.CenterCrop((h, w), order=IBMK), st.integers(1, height), st.integers(1, width)
        ),
        st.builds(
            lambda h, w, pad: V.RandomCrop((h, w), padding_size=pad, order=IBMK),
            st.integers(1, height + 8), st.integers(1, width + 8), st.integers(0, 4),
        ),
        st.builds(lambda pad: V.Pad(pad, order=IBMK), st.tuples(*[st.integers(0, 5)] * 4)),
    )


def resizing_geometry():
    return st.one_of(
        st.builds(lambda h, w: V.Resize((h, w), order=IBMK), st.integers(3, 80), st.integers(3, 80)),
        st.builds(lambda n: V.Resize(n, order=IBMK), st.integers(3, 60)),
        st.builds(lambda: V.RandomResize((0.3, 2.5), order=IBMK)),
        st.builds(lambda: V.ShortestEdgeResize((10, 50), 70, order=IBMK)),
        st.builds(
            lambda h, w: V.RandomResizedCrop((h, w), order=IBMK), st.integers(3, 64), st.integers(3, 64)
        ),
    )


def upscaling_geometry(height: int, width: int):
    """Resizes that never shrink an axis, so a one-pixel spot survives interpolation."""
    side = max(height, width)
    return st.one_of(
        st.builds(
            lambda h, w: V.Resize((h, w), order=IBMK), st.integers(height, 3 * height), st.integers(width, 3 * width)
        ),
        st.builds(lambda: V.RandomResize((1.0, 3.0), order=IBMK)),
        st.builds(
            lambda h, w: V.RandomResizedCrop((h, w), order=IBMK), st.integers(side, 2 * side), st.integers(side, 2 * side)
        ),
    )


def scene_sample(height, width, boxes, keypoints, mask=None, image=None):
    image = np.zeros((height, width, 3), np.uint8) if image is None else image
    mask = np.zeros((height, width, 1), np.uint8) if mask is None else mask
    return image, boxes, mask, keypoints, PROBE


def apply_steps(steps, sample, seed):
    """Apply ``steps`` in turn (as Compose does) and return the output and the mask tolerance.

    Each resize can misplace a mask edge by up to one of its output pixels, and
    later steps scale earlier errors (measured with the probe points).
    """
    tolerance = 0.0
    with seeded(seed):
        for step in steps:
            before = np.abs(np.diff(sample[4], axis=0))
            sample = step.apply(sample)
            scale = np.abs(np.diff(sample[4], axis=0)) / before
            tolerance = tolerance * scale.max() + (1.0 if isinstance(step, RESIZING) else 0.0)
    return sample, tolerance


def check_boxes_match_masks(steps, scene):
    height, width, boxes, keypoints, seed = scene
    for k, (x0, y0, x1, y1) in enumerate(boxes.astype(int)):
        mask = np.zeros((height, width, 1), np.uint8)
        mask[y0:y1, x0:x1] = 1
        sample = scene_sample(height, width, boxes, keypoints, mask)
        (out_image, out_boxes, out_mask, _, _), tolerance = apply_steps(steps, sample, seed)
        out_h, out_w = out_image.shape[:2]
        assert out_mask.shape == (out_h, out_w, 1)
        box = out_boxes[k].astype(np.float64)
        assert 0 <= box[0] <= box[2] <= out_w and 0 <= box[1] <= box[3] <= out_h
        footprint = mask_boxes(out_mask)
        if footprint is None:
            assert min(box[2] - box[0], box[3] - box[1]) <= tolerance + 1e-6, (box, out_image.shape)
        else:
            assert np.abs(footprint - box).max() <= tolerance + 1e-4, (footprint, box, tolerance)


@SETTINGS
@given(scene=scenes(), data=st.data())
def test_exact_geometry_boxes_match_the_mask(scene, data):
    check_boxes_match_masks([data.draw(exact_geometry(scene[0], scene[1]))], scene)


@SETTINGS
@given(scene=scenes(), data=st.data())
def test_resizing_geometry_boxes_match_the_mask_within_a_pixel(scene, data):
    check_boxes_match_masks([data.draw(resizing_geometry())], scene)


@SETTINGS
@given(scene=scenes(), data=st.data())
def test_chained_geometry_keeps_boxes_inside_and_aligned(scene, data):
    height, width = scene[0], scene[1]
    steps = data.draw(
        st.lists(st.one_of(exact_geometry(height, width), resizing_geometry()), min_size=2, max_size=3)
    )
    steps = [step for step in steps if not isinstance(step, V.CenterCrop)]  # size may not fit later
    check_boxes_match_masks(steps, scene)
    # Compose draws each child's parameters in turn from the same generator: the same result.
    sample = scene_sample(height, width, scene[2], scene[3])
    with seeded(scene[4]):
        composed = V.Compose(steps, order=IBMK).apply(sample)
    chained, _ = apply_steps(steps, sample, scene[4])
    assert all(np.array_equal(a, b) for a, b in zip(composed, chained))


def spot_image(height, width, keypoints):
    """One float channel per keypoint, 1.0 at the keypoint's pixel."""
    image = np.zeros((height, width, keypoints.shape[1]), np.float32)
    for k, (x, y, _) in enumerate(keypoints[0]):
        image[int(y), int(x), k] = 1.0
    return image


def _spots_moved(scene: tuple, transform) -> tuple[np.ndarray, np.ndarray]:
    """The image (one bright pixel per keypoint, one channel each) and the keypoints after
    ``transform``."""
    height, width, boxes, keypoints, seed = scene
    with seeded(seed):
        out_image, _, _, out_keypoints, _ = transform.apply(
            scene_sample(height, width, boxes, keypoints, image=spot_image(height, width, keypoints))
        )
    return out_image, out_keypoints


@SETTINGS
@given(scene=scenes(), data=st.data())
def test_keypoints_follow_their_pixel_exactly(scene, data):
    out_image, out_keypoints = _spots_moved(scene, data.draw(exact_geometry(*scene[:2])))
    out_h, out_w = out_image.shape[:2]
    for k, (x, y, _) in enumerate(out_keypoints[0]):
        if 0 <= x < out_w and 0 <= y < out_h:
            assert out_image[int(y), int(x), k] == 1.0 and out_image[:, :, k].sum() == 1.0
        else:
            assert out_image[:, :, k].sum() == 0.0  # cropped away with its keypoint


@SETTINGS
@given(scene=scenes(max_side=24), data=st.data())
def test_keypoints_follow_their_pixel_through_upscaling(scene, data):
    out_image, out_keypoints = _spots_moved(scene, data.draw(upscaling_geometry(*scene[:2])))
    out_h, out_w = out_image.shape[:2]
    for k, (x, y, _) in enumerate(out_keypoints[0]):
        if 0 <= x < out_w and 0 <= y < out_h and out_image[:, :, k].max() > 0:
            # The brightest value sits within a pixel of the keypoint (ties allowed: at the
            # border, OpenCV's replicated edge makes a plateau).
            spot = out_image[:, :, k]
            row, col = int(y), int(x)
            near = spot[max(0, row - 1) : row + 2, max(0, col - 1) : col + 2]
            assert near.max() >= spot.max() - 1e-6, (np.argwhere(spot == spot.max()), (x, y))


@SETTINGS
@given(scene=scenes(), horizontal=st.booleans())
def test_flipping_twice_is_the_identity(scene, horizontal):
    height, width, boxes, keypoints, seed = scene
    flip = (V.RandomHorizontalFlip if horizontal else V.RandomVerticalFlip)(1.0, order=IBMK + ("polygons",))
    image = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    mask = image[:, :, :1] // 128
    polygons = [[boxes[:, :2].copy(), boxes[:, 2:].copy()]]
    sample = (image, boxes, mask, keypoints, PROBE, polygons)
    with seeded(seed):
        twice = flip.apply(flip.apply(sample))
    assert np.array_equal(twice[0], image) and np.array_equal(twice[2], mask)
    assert np.allclose(twice[1], boxes, atol=1e-4) and np.allclose(twice[3], keypoints, atol=1e-4)
    for got, want in zip(twice[5][0], polygons[0]):
        assert np.allclose(got, want, atol=1e-4)
    once = flip.apply(sample)
    assert not np.array_equal(once[0], image) or np.array_equal(image, image[:, ::-1] if horizontal else image[::-1])
