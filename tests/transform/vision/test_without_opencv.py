"""The NumPy/Pillow path used where OpenCV is missing (free-threaded 3.14t): the same results as
OpenCV within the tolerances docs/vision.md "Without OpenCV" states, and the backend switch.

Comparisons with OpenCV itself skip where cv2 is not installed; the rest runs everywhere.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataloader.transform.vision as V
from dataloader import ImageBackendError, ImageDecodeError
from dataloader import _image_codec as codec
from dataloader.errors import ArgumentValueError
from dataloader.transform.vision import _functional as F
from dataloader.transform.vision import _numpy_color as NC
from dataloader.transform.vision._numpy_resize import resize as numpy_resize

from ._catalog import CATALOG
from ._support import noise_image, run

Image = pytest.importorskip("PIL.Image", reason="decoding without OpenCV needs Pillow (the vision extra)")
ROOT = Path(__file__).resolve().parents[3]
NO_CV2 = "compares with OpenCV, which is not installed here"

# Largest difference from OpenCV 5.0 allowed per interpolation flag for uint8 (in levels) and the
# least share of pixels that must be equal; float32 images stay within FLOAT_TOLERANCE.
RESIZE_TOLERANCE = {
    V.INTER_NEAREST: (0, 1.0),
    V.INTER_LINEAR: (1, 0.9),
    V.INTER_CUBIC: (1, 0.95),
    V.INTER_AREA: (1, 0.99),
    V.INTER_LANCZOS4: (1, 0.99),
    V.INTER_LINEAR_EXACT: (1, 0.7),
}
FLOAT_TOLERANCE = 0.01


def opencv():
    return pytest.importorskip("cv2", reason=NO_CV2)


def _assert_close(out: np.ndarray, expected: np.ndarray, levels: float, equal_share: float) -> None:
    assert out.shape == expected.shape and out.dtype == expected.dtype
    difference = np.abs(out.astype(np.float64) - expected)
    assert difference.max() <= levels, difference.max()
    assert (difference == 0).mean() >= equal_share, (difference == 0).mean()


@settings(max_examples=60, deadline=None)
@given(
    source=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    target=st.tuples(st.integers(1, 60), st.integers(1, 60)),
    channels=st.sampled_from([1, 3, 4]),
    dtype=st.sampled_from([np.uint8, np.float32]),
    flag=st.sampled_from(sorted(RESIZE_TOLERANCE)),
    seed=st.integers(0, 2**16),
)
def test_resize_matches_opencv(source, target, channels, dtype, flag, seed):
    cv2 = opencv()
    image = np.random.default_rng(seed).integers(0, 256, (*source, channels)).astype(dtype)
    expected = cv2.resize(image, target[::-1], interpolation=flag).reshape(*target, channels)
    levels, share = RESIZE_TOLERANCE[flag]
    if dtype == np.float32:
        levels, share = FLOAT_TOLERANCE, 0.0
    # Only the bound holds for tiny images, where a few pixels one level off are a large share.
    share = share if min(source) >= 8 and expected.size >= 500 else 0.0
    _assert_close(numpy_resize(image, *target, flag), expected, levels, share)


@pytest.mark.parametrize("source,target", [((31, 40), (16, 30)), ((64, 64), (224, 224)), ((7, 2), (3, 9))])
def test_nearest_exact_samples_pixel_centres_as_opencv_does_off_ties(source, target):
    cv2 = opencv()
    rows = np.arange(source[0] * source[1], dtype=np.int32).reshape(*source, 1).astype(np.float32)
    expected = cv2.resize(rows, target[::-1], interpolation=cv2.INTER_NEAREST_EXACT).reshape(*target, 1)
    out = numpy_resize(rows, *target, V.INTER_NEAREST_EXACT)
    centres = [((2 * np.arange(n) + 1) * s) % (2 * n) for s, n in zip(source, target)]
    on_a_border = (centres[0][:, None] == 0) | (centres[1][None, :] == 0)
    assert np.array_equal(out[~on_a_border], expected[~on_a_border])


def test_resize_keeps_dtype_for_integers_and_masks():
    mask = np.arange(12, dtype=np.int64).reshape(3, 4, 1)
    assert numpy_resize(mask, 6, 8, V.INTER_NEAREST).dtype == np.int64
    wide = noise_image(5, 6, channels=7).astype(np.uint16) * 200  # more channels than OpenCV takes
    out = numpy_resize(wide, 9, 4, V.INTER_CUBIC)
    assert out.shape == (9, 4, 7) and out.dtype == np.uint16


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_colour_conversions_match_opencv(dtype):
    cv2 = opencv()
    image = noise_image(40, 50).astype(dtype)
    image[0, :] = np.arange(50)[:, None] * 5  # grays, where hue and saturation are 0
    gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)[:, :, None]
    _assert_close(NC.bgr_to_gray(image), gray, 1 if dtype == np.uint8 else 1e-3, 0.99 if dtype == np.uint8 else 0)
    if dtype == np.uint8:
        hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV_FULL)
        _assert_close(NC.bgr_to_hsv_full(image), hsv, 1, 0.99)
        _assert_close(NC.hsv_full_to_bgr(hsv), cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR_FULL), 1, 0.99)
    else:
        unit = image / np.float32(255)
        hsv = cv2.cvtColor(unit, cv2.COLOR_BGR2HSV)
        _assert_close(NC.bgr_to_hsv(unit), hsv, 1e-3, 0)
        _assert_close(NC.hsv_to_bgr(hsv), cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR), 1e-5, 0)


def test_lookup_tables_and_weighted_sums_match_opencv():
    cv2 = opencv()
    image, rng = noise_image(30, 40), np.random.default_rng(1)
    table = rng.integers(0, 256, 256, dtype=np.uint8)
    tables = rng.integers(0, 256, (256, 1, 3), dtype=np.uint8)
    assert np.array_equal(NC.lut(image, table), cv2.LUT(image, table))
    assert np.array_equal(NC.lut(image, tables), cv2.LUT(image, tables))
    noise = rng.normal(0, 20, image.shape).astype(np.float32)
    expected = cv2.addWeighted(noise, 1.3, image, 1.0, 4.5, dtype=cv2.CV_8U)
    _assert_close(NC.add_weighted(noise, 1.3, image, 1.0, 4.5), expected, 1, 0.99)


@pytest.mark.parametrize("name", sorted(CATALOG))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_every_transform_without_opencv_is_within_a_level_of_opencv(name, dtype, monkeypatch):
    """The transforms with _functional's OpenCV calls switched off in this process, against on."""
    opencv()
    transform = CATALOG[name][0](("image",))
    image = noise_image(36, 44).astype(dtype)
    expected = run(transform, image, seed=3)
    monkeypatch.setattr(F, "cv2", None)
    out = run(transform, image, seed=3)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert np.abs(out.astype(np.float64) - expected).max() <= (1.0 if dtype == np.uint8 else 0.02)


def _encoded(kind: str, rgb: np.ndarray | None = None) -> bytes:
    """A photo-like 96x128 image (or ``rgb``, uint8 RGB) encoded as ``kind``, with Pillow (or a
    raw PNG writer)."""
    from tests._fixtures_images import png_bytes

    if rgb is None:
        yy, xx = np.mgrid[0:96, 0:128].astype(np.float32)
        noise = np.random.default_rng(0).normal(0, 8, (96, 128, 3))
        rgb = np.stack([128 + 100 * np.sin(xx / 9), 128 + 90 * np.cos(yy / 7), (xx + yy) % 256], 2) + noise
        rgb = np.clip(rgb, 0, 255).astype(np.uint8)
    if kind == "png16":
        return png_bytes(rgb.astype(np.uint16) * 257 + 100)
    if kind == "gray16":
        return png_bytes(rgb[:, :, 0].astype(np.uint16) * 257 + 100)
    image, options = Image.fromarray(rgb), {}
    converted = {"gray": "L", "rgba": "RGBA", "cmyk": "CMYK", "la": "LA"}
    if kind.split("-")[-1] in converted:
        image = image.convert(converted[kind.split("-")[-1]])
    if kind == "png-palette":
        image = image.quantize(64)
    if kind == "jpeg-progressive":
        options["progressive"] = True
    if "rotated" in kind:
        exif = Image.Exif()
        exif[0x0112] = 6  # "rotate 90 CW to view": OpenCV and exif_transpose both apply it
        options["exif"] = exif
    buffer = io.BytesIO()
    image.save(buffer, kind.split("-")[0].upper(), **options)
    return buffer.getvalue()


LOSSY = ["jpeg", "jpeg-gray", "jpeg-cmyk", "jpeg-progressive", "jpeg-rotated", "jpeg-rotated-cmyk", "webp"]
# A CMYK TIFF stores plain inks, unlike a CMYK JPEG's inverted ones.
LOSSLESS = ["png", "png-rgba", "png-gray", "png-la", "png-palette", "png16", "gray16", "tiff-cmyk"]


@pytest.mark.parametrize("kind", LOSSY + LOSSLESS)
def test_pillow_decodes_as_opencv_does(kind):
    cv2 = opencv()
    if kind == "webp" and "WEBP" not in Image.registered_extensions().values():
        pytest.skip("this Pillow has no WebP")
    data = _encoded(kind)
    expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    out = codec._decode_pillow(np.frombuffer(data, np.uint8), "x")
    assert out.flags.c_contiguous and out.flags.writeable and out.shape == expected.shape  # (128, 96, 3) rotated
    # Equal here (Pillow 13, cv2 5.0); JPEG and WebP decoders of other builds may round apart.
    _assert_close(out, expected, 2 if kind in LOSSY else 0, 0.9 if kind in LOSSY else 1.0)


@pytest.mark.parametrize("backend", ["opencv", "pillow"])
@pytest.mark.parametrize("data", [b"", b"not an image", _encoded("jpeg")[:300], _encoded("png")[:-40]])
def test_undecodable_bytes_are_an_image_decode_error_naming_the_file(data, backend, monkeypatch):
    if backend == "opencv":
        opencv()
    monkeypatch.setattr(codec, "image_backend", lambda: backend)
    with pytest.raises(ImageDecodeError, match=rf"cannot decode image 'a\.jpg' \({len(data)} bytes\).* Remove it\."):
        codec.decode_bgr(data, "image 'a.jpg'", "Remove it.")


def test_an_image_over_pillows_pixel_limit_says_how_to_allow_it(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 96x128 is more than twice that
    with pytest.raises(ImageDecodeError, match="Pillow refuses to decode image 'big.jpg'.*MAX_IMAGE_PIXELS"):
        codec._decode_pillow(np.frombuffer(_encoded("jpeg"), np.uint8), "image 'big.jpg'")


def test_encode_jpeg_round_trips_on_the_backend_in_use():
    image = np.full((16, 24, 3), (200, 120, 40), np.uint8)
    decoded = codec.decode_bgr(codec.encode_jpeg(image, quality=95), "x", "")
    assert decoded.shape == image.shape and np.abs(decoded.astype(int) - image).max() <= 3


@pytest.fixture
def fresh_backend(monkeypatch):
    """image_backend() computed again under this test's environment, and again after it."""
    codec.image_backend.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    codec.image_backend.cache_clear()


def test_the_variable_forces_a_backend_and_rejects_unknown_values(fresh_backend):
    fresh_backend.setenv("DATALOADER_IMAGE_BACKEND", "Pillow")
    assert codec.image_backend() == "pillow"
    codec.image_backend.cache_clear()
    fresh_backend.setenv("DATALOADER_IMAGE_BACKEND", "magick")
    with pytest.raises(ArgumentValueError, match="'magick' is not an image backend; set it to one of opencv, pillow"):
        codec.image_backend()


def test_opencv_asked_for_but_missing_says_what_to_install(fresh_backend):
    fresh_backend.setenv("DATALOADER_IMAGE_BACKEND", "opencv")
    fresh_backend.setitem(sys.modules, "cv2", None)  # import cv2 raises ImportError
    with pytest.raises(ImageBackendError, match=r"pip install opencv-python-headless .*dataloader\[opencv\]"):
        codec.image_backend()
    fresh_backend.delenv("DATALOADER_IMAGE_BACKEND")
    codec.image_backend.cache_clear()
    assert codec.image_backend() == "pillow"  # unset: OpenCV if it imports, else Pillow


_HIDDEN_CV2 = "raise ImportError('cv2 is hidden from this test')\n"
_LOADER = """
import sys
import numpy as np
import dataloader.transform.vision as V
from dataloader import DataLoader, ImageFolder, RandomSampler

def batches(root, workers):
    dataset = ImageFolder(root)
    transform = V.Compose([V.RandomResizedCrop(24), V.RandomHorizontalFlip(), V.HueTransform(0.1)])
    sampler = RandomSampler(dataset, batch_size=4, drop_last=True, seed=0)
    loader = DataLoader(dataset, sampler, transform=transform, num_workers=workers, seed=0)
    try:
        return np.stack([images for images, _ in loader])
    finally:
        loader.close()

if __name__ == "__main__":
    print(V.IMAGE_BACKEND, "cv2" in sys.modules)
    np.save(sys.argv[2], batches(sys.argv[1], 2))
"""


def test_without_opencv_an_image_folder_loads_with_two_process_workers(tmp_path):
    """cv2 made unimportable (a cv2.py that raises, first on PYTHONPATH, so every worker sees it):
    the batches equal this process's own, within a level where this process uses OpenCV."""
    from tests._fixtures_images import make_image_folder

    root = make_image_folder(tmp_path / "images", side=(40, 56))
    (tmp_path / "hide").mkdir()
    (tmp_path / "hide" / "cv2.py").write_text(_HIDDEN_CV2)
    (tmp_path / "hide" / "load.py").write_text(_LOADER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "hide"), str(ROOT)])}
    env.pop("DATALOADER_IMAGE_BACKEND", None)
    out = tmp_path / "batches.npy"
    result = subprocess.run(
        [sys.executable, str(tmp_path / "hide" / "load.py"), str(root), str(out)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["pillow", "False"]
    spec = importlib.util.spec_from_file_location("load", tmp_path / "hide" / "load.py")
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)  # the same code in this process, with its own backend, serially
    expected = load.batches(str(root), 0)
    got = np.load(out)
    assert got.shape == expected.shape == (2, 4, 24, 24, 3) and got.dtype == np.uint8
    assert np.abs(got.astype(int) - expected).max() <= (0 if V.IMAGE_BACKEND == "pillow" else 2)
