"""DecodeRandomResizedCrop and DecodeResize: RandomResizedCrop's and Resize's windows and draws,
pixels close to the two-step path's (PSNR), today's output for every file the reduced decode
does not stand in for, and the same batches for any workers and after a resume."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

import dataloader._image_codec as codec
import dataloader.transform.vision as V
from dataloader import DataLoader, ImageFolder, RandomSampler
from dataloader.errors import ArgumentTypeError, ArgumentValueError, ImageDecodeError
from dataloader.transform.vision._decode_crop import _reduction
from dataloader.transform.vision._jpeg_header import scalable_jpeg_size

from ._support import run
from .test_without_opencv import LOSSLESS, LOSSY, _encoded

#: The least PSNR (dB) of the reduced decode against the two-step path (docs/vision.md states
#: it). The least measured here (OpenCV 5.0, Pillow 13): 40.4 dB on smooth images (1.3 bits per
#: pixel at quality 90), 31.2 dB on the decode bench's textured ones (2.3-2.6 bits per pixel, as
#: photos), where the two paths' filters alias the fine texture differently.
PSNR_BOUND = 30.0


def photo(height: int, width: int, seed: int = 0, noise: float = 4.0) -> np.ndarray:
    """Smooth colour fields plus per-pixel noise (``noise=12``: about 2.5 bits per pixel at
    quality 90, as a textured photo), RGB uint8."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    scale = 40.0 * max(height, width) / 640
    rng = np.random.default_rng(seed)
    rgb = np.stack(
        [128 + 100 * np.sin(xx / scale + seed), 128 + 90 * np.cos(yy / (0.7 * scale)),
         128 + 80 * np.sin((xx + yy) / (1.3 * scale))], 2,
    ) + rng.normal(0, noise, (height, width, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def jpeg(height: int, width: int, seed: int = 0, noise: float = 4.0, **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(photo(height, width, seed, noise)).save(buffer, "JPEG", quality=90, **options)
    return buffer.getvalue()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape and a.dtype == b.dtype == np.uint8
    mse = float(np.mean((a.astype(np.float64) - b) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def two_step(transform: V.VisionTransform, data: bytes, seed: int) -> np.ndarray:
    return run(transform, V.DecodeImage().apply(data), seed)


@pytest.fixture
def windows(monkeypatch):
    """The windows RandomResizedCrop draws, in order, whoever draws them."""
    drawn = []
    original = V.RandomResizedCrop._window

    def recording(self, height, width, rng):
        drawn.append((height, width, original(self, height, width, rng)))
        return drawn[-1][2]

    monkeypatch.setattr(V.RandomResizedCrop, "_window", recording)
    return drawn


# (height, width): smaller than the output, square, ImageNet-like, large, and extreme ratios.
SIZES = [(20, 30), (100, 500), (224, 224), (375, 500), (960, 1280), (40, 1900), (1900, 40), (1500, 1100)]


@pytest.mark.parametrize("height, width", SIZES)
def test_the_windows_and_draws_are_random_resized_crops(height, width, windows):
    data = jpeg(height, width)
    fused = V.DecodeRandomResizedCrop(96, scale_range=(0.05, 1.0), ratio_range=(0.3, 3.0),
                                      interpolation=[V.INTER_LINEAR, V.INTER_AREA])
    unfused = V.RandomResizedCrop(96, scale_range=(0.05, 1.0), ratio_range=(0.3, 3.0),
                                  interpolation=[V.INTER_LINEAR, V.INTER_AREA])
    reduced = 0
    for seed in range(12):
        fused_out, fused_rng = _with_rng(fused, data, seed)
        fused_window = windows.pop()
        unfused_out, unfused_rng = _with_rng(unfused, V.DecodeImage().apply(data), seed)
        assert windows.pop() == fused_window and fused_window[:2] == (height, width)
        assert fused_rng == unfused_rng  # the same draws, the interpolation's included
        assert fused_out.shape == (96, 96, 3) and fused_out.dtype == np.uint8
        _, _, h, w = fused_window[2]
        if min(h, w) < 192:  # no reduction keeps 96 pixels: the two-step pixels
            assert np.array_equal(fused_out, unfused_out)
        else:
            reduced += 1
            assert psnr(fused_out, unfused_out) >= PSNR_BOUND, (height, width, seed, fused_window)
    assert reduced > 0 or min(height, width) < 960


def _with_rng(transform, sample, seed):
    """The output and the generator's next draw after the call (which tells draws apart)."""
    from dataloader._local import using_batch_rng

    rng = np.random.default_rng(seed)
    with using_batch_rng(rng):
        out = transform.apply(sample)
    return out, int(rng.integers(2**62))


def test_the_reduction_is_the_largest_that_keeps_the_output_resolution():
    plan = V.RandomResizedCrop(224).plan_for_size
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(300):
        window = plan(960, 1280, rng)
        reduce = _reduction(window)
        seen.add(reduce)
        _, _, h, w = window.crop
        assert min(h, w) >= 224 * reduce and (reduce == 8 or min(h, w) < 224 * reduce * 2)
    assert seen == {1, 2, 4}  # 1280x960 has no window of 1792 pixels, so never 1/8


@pytest.mark.parametrize("height, width, noise", [(960, 1280, 4.0), (1280, 720, 4.0), (1001, 1337, 12.0)])
def test_pixels_stay_close_to_the_two_step_path(height, width, noise):
    data = jpeg(height, width, seed=3, noise=noise)
    assert noise < 10 or 8 * len(data) / (height * width) > 2.2  # textured as a photo
    fused, unfused = V.DecodeRandomResizedCrop(224), V.RandomResizedCrop(224)
    values = [psnr(run(fused, data, seed), two_step(unfused, data, seed)) for seed in range(24)]
    assert min(values) >= PSNR_BOUND
    for size in (256, (120, 200), 100):
        resized = V.DecodeResize(size).apply(data)
        expected = V.Resize(size).apply(V.DecodeImage().apply(data))
        assert resized.shape == expected.shape and psnr(resized, expected) >= PSNR_BOUND


def test_decode_resize_leaves_out_the_part_block_past_the_image():
    """1001x1337 at 1/8 is 125.1 x 167.1 reduced pixels: libjpeg gives 126 x 168, the last row
    and column an eighth image. Resizing all of it would stretch the image; the window keeps
    125 x 167, and the output stays as close to the two-step one as an aligned image's."""
    from dataloader.transform.vision._decode_crop import _scaled_plan

    plan = V.Resize((100, 120)).plan_for_size(1001, 1337, None)
    assert _reduction(plan) == 8
    assert _scaled_plan(plan, 126, 168, 8).crop == (0, 0, 125, 167)
    aligned, ragged = jpeg(1000, 1336, seed=4), jpeg(1001, 1337, seed=4)
    values = [psnr(V.DecodeResize((100, 120)).apply(data), V.Resize((100, 120)).apply(V.DecodeImage().apply(data)))
              for data in (aligned, ragged)]
    assert values[1] >= values[0] - 3, values


def test_decode_resize_keeps_the_exact_output_where_it_cannot_reduce():
    data = jpeg(300, 400)
    for size in (224, (200, 380), 300):  # shrinks by less than half, or not at all
        assert np.array_equal(V.DecodeResize(size).apply(data), V.Resize(size).apply(V.DecodeImage().apply(data)))


ODD = [kind for kind in LOSSY + LOSSLESS if kind != "jpeg"]


@pytest.mark.parametrize("kind", ODD)
def test_other_files_take_the_two_step_path_with_its_output(kind):
    if kind == "webp" and "WEBP" not in Image.registered_extensions().values():
        pytest.skip("this Pillow has no WebP")
    data = _odd(kind)
    assert scalable_jpeg_size(data) is None
    for seed in range(3):
        assert np.array_equal(run(V.DecodeRandomResizedCrop(32), data, seed),
                              two_step(V.RandomResizedCrop(32), data, seed))
    assert np.array_equal(V.DecodeResize(40).apply(data), V.Resize(40).apply(V.DecodeImage().apply(data)))


def _odd(kind: str) -> bytes:
    """A 384x512 image encoded as ``kind`` (the kinds of test_without_opencv's decode tests)."""
    return _encoded(kind, photo(384, 512, seed=1))


def test_the_header_reader_finds_plain_jpegs_and_refuses_what_it_cannot_vouch_for():
    data = jpeg(48, 64)
    assert scalable_jpeg_size(data) == (48, 64)
    assert scalable_jpeg_size(np.frombuffer(data, np.uint8)) == (48, 64)
    exif = Image.Exif()
    exif[0x0112] = 1  # "as stored": nothing to rotate
    assert scalable_jpeg_size(jpeg(48, 64, exif=exif)) == (48, 64)
    exif[0x0112] = 3
    assert scalable_jpeg_size(jpeg(48, 64, exif=exif)) is None
    adobe = data[:2] + b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00\x00" + data[2:]
    assert scalable_jpeg_size(adobe) is None
    for broken in (b"", b"\xff\xd8", data[:20], b"\xff\xd8\xff\xe0\x00\x01", b"GIF89a" + data):
        assert scalable_jpeg_size(broken) is None


def test_a_truncated_jpeg_is_an_image_decode_error_naming_the_field():
    data = jpeg(960, 1280)
    with pytest.raises(ImageDecodeError, match="cannot decode the image in field 'image' of 'a.jpg'"):
        run(V.DecodeRandomResizedCrop(224), {"image": data[:400], "path": "a.jpg"})
    with pytest.raises(ArgumentTypeError, match="needs the image at position 0 as encoded bytes"):
        run(V.DecodeRandomResizedCrop(224), (np.zeros((4, 4, 3), np.uint8), 1))


def test_the_fused_transforms_name_themselves_in_their_errors():
    with pytest.raises(ArgumentValueError, match=r"DecodeResize\(key='image'\) got a row without 'image'"):
        V.DecodeResize(64).apply({"jpeg": b""})
    with pytest.raises(ArgumentTypeError, match="DecodeRandomResizedCrop needs the image as encoded bytes.*Drop "
                                                "DecodeRandomResizedCrop"):
        run(V.DecodeRandomResizedCrop(64), np.zeros((4, 4, 3), np.uint8))


def test_a_strided_byte_array_decodes_as_its_bytes():
    data = jpeg(480, 640, seed=1)
    spread = np.zeros(2 * len(data), np.uint8)
    spread[::2] = np.frombuffer(data, np.uint8)
    for transform in (V.DecodeRandomResizedCrop(64), V.DecodeImage()):
        assert np.array_equal(run(transform, spread[::2], 3), run(transform, data, 3))


def test_a_compose_that_moves_boxes_refuses_the_image_only_crop():
    for fused in (V.DecodeRandomResizedCrop(64), V.DecodeResize(64)):
        with pytest.raises(ArgumentValueError, match=rf"{type(fused).__name__} crops and resizes the image only, but "
                                                     r"this Compose's order also names \['boxes'\]"):
            V.Compose([fused, V.RandomHorizontalFlip()], order=("image", "boxes", "image_category"))
        V.Compose([fused, V.RandomHorizontalFlip()], order=("image", "image_category"))  # nothing else moves


def test_the_sample_is_found_and_returned_as_decode_image_does():
    data = jpeg(64, 80)
    image, label = run(V.DecodeRandomResizedCrop(32, fields=("image", "label")), {"image": data, "label": 3})
    assert image.shape == (32, 32, 3) and label == 3
    row = run(V.DecodeResize((20, 30), key="jpeg"), {"jpeg": data, "x": 1})
    assert row["jpeg"].shape == (20, 30, 3) and row["x"] == 1
    out = run(V.DecodeRandomResizedCrop(16, index=1), ["a", data])
    assert out[0] == "a" and out[1].shape == (16, 16, 3)


def test_a_decoder_that_reduces_otherwise_is_not_trusted(monkeypatch):
    """A decoder that ignores the reduction (or picks another) gives the two-step output."""
    import dataloader.transform.vision._decode_crop as fused_module

    data = jpeg(960, 1280, seed=2)
    expected = [two_step(V.RandomResizedCrop(224), data, seed) for seed in range(4)]
    full = fused_module.decode_image
    monkeypatch.setattr(fused_module, "decode_image", lambda data, what, fix, reduce=1: full(data, what, fix))
    assert all(np.array_equal(run(V.DecodeRandomResizedCrop(224), data, seed), expected[seed]) for seed in range(4))
    def odd(data, what, fix, reduce=1):  # a row short of the 1/2 decode's 480 rows
        return full(data, what, fix, 2)[1:] if reduce > 1 else full(data, what, fix)

    monkeypatch.setattr(fused_module, "decode_image", odd)
    assert all(np.array_equal(run(V.DecodeRandomResizedCrop(224), data, seed), expected[seed]) for seed in range(4))


XMP_TURNED = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
              b'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="6"/></rdf:RDF></x:xmpmeta>')


@pytest.mark.parametrize("backend", ["opencv", "pillow"])
def test_an_orientation_only_in_xmp_is_ignored_as_opencv_ignores_it(backend, monkeypatch):
    if backend == "opencv":
        pytest.importorskip("cv2")
    monkeypatch.setattr(codec, "image_backend", lambda: backend)
    data = jpeg(480, 640, xmp=XMP_TURNED)
    assert V.DecodeImage().apply(data).shape == (480, 640, 3)
    assert V.DecodeResize(100).apply(data).shape == (100, 133, 3)


def test_a_decode_turned_from_the_header_takes_the_two_step_draws(monkeypatch):
    """Should a decoder turn the image the header describes (an orientation the header reader
    missed), the fused transforms plan on the decoded image with the two-step path's draws."""
    import dataloader.transform.vision._decode_crop as fused_module

    data = jpeg(960, 1280, seed=6)
    full = fused_module.decode_image
    monkeypatch.setattr(fused_module, "decode_image",
                        lambda data, what, fix, reduce=1: np.ascontiguousarray(full(data, what, fix).transpose(1, 0, 2)))
    turned = np.ascontiguousarray(V.DecodeImage().apply(data).transpose(1, 0, 2))
    for seed in range(6):
        out, after = _with_rng(V.DecodeRandomResizedCrop(224, interpolation=[V.INTER_LINEAR, V.INTER_CUBIC]), data, seed)
        expected, expected_after = _with_rng(V.RandomResizedCrop(224, interpolation=[V.INTER_LINEAR, V.INTER_CUBIC]),
                                             turned, seed)
        assert np.array_equal(out, expected) and after == expected_after
    assert V.DecodeResize(256).apply(data).shape == (341, 256, 3)


def test_the_pillow_backend_reduces_too(monkeypatch):
    data = jpeg(960, 1280, seed=5)
    expected = [two_step(V.RandomResizedCrop(224), data, seed) for seed in range(6)]
    monkeypatch.setattr(codec, "image_backend", lambda: "pillow")
    assert codec.decode_bgr(data, "x", "", reduce=4).shape == (240, 320, 3)
    for seed in range(6):
        assert psnr(run(V.DecodeRandomResizedCrop(224), data, seed), expected[seed]) >= PSNR_BOUND


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """root/{a,b}: 12 JPEGs of 256x320 (windows of 192 pixels and up decode reduced) and a PNG."""
    root = tmp_path_factory.mktemp("decode_crop")
    for index in range(12):
        (root / "ab"[index % 2]).mkdir(exist_ok=True)
        (root / "ab"[index % 2] / f"{index}.jpg").write_bytes(jpeg(256, 320, seed=index))
    Image.fromarray(photo(256, 320, seed=99)).save(root / "b" / "z.png")
    return root


def test_image_folder_without_decoding_gives_the_files_bytes(folder):
    raw, decoded = ImageFolder(folder, decode=False), ImageFolder(folder)
    assert len(raw) == len(decoded) == 13
    for index in (0, 5, 12):
        data, label = raw[index]
        assert data == open(raw.path(index), "rb").read() and label == decoded[index][1]
        assert np.array_equal(V.DecodeImage().apply(data), decoded[index][0])
    assert raw.order_fingerprint() == decoded.order_fingerprint()
    with pytest.raises(ArgumentTypeError, match="`decode` must be"):
        ImageFolder(folder, decode="no")


def test_a_file_that_does_not_decode_is_named_by_the_decoding_transform(folder, tmp_path, no_leaks):
    import pickle
    import shutil

    from dataloader.errors import WorkerError
    from dataloader.image_folder import ImageFile

    root = tmp_path / "copy"
    shutil.copytree(folder, root)
    bad = root / "a" / "2.jpg"
    bad.write_bytes(bad.read_bytes()[:300])  # a header, then nothing
    dataset = ImageFolder(root, decode=False)
    index = [dataset.path(i) for i in range(len(dataset))].index(str(bad))
    data, _ = dataset[index]
    assert isinstance(data, ImageFile) and data.path == str(bad)
    copy = pickle.loads(pickle.dumps(data))
    assert copy == data and copy.path == data.path
    for transform in (V.DecodeRandomResizedCrop(64), V.DecodeResize(64), V.DecodeImage()):
        with pytest.raises(ImageDecodeError, match=rf"cannot decode image '{bad}' \(300 bytes\).*check_valid_func"):
            run(transform, dataset[index])
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=13), num_workers=1, timeout=60,
                        transform=V.DecodeRandomResizedCrop(64))
    with pytest.raises(WorkerError, match=rf"cannot decode image '{bad}'"):
        list(loader)


def test_a_vision_transform_given_encoded_bytes_says_to_decode_first(folder):
    with pytest.raises(ArgumentValueError, match=r"RandomHorizontalFlip got the image still encoded \(\d+ bytes"):
        run(V.RandomHorizontalFlip(), ImageFolder(folder, decode=False)[0])


def _epoch(folder, transform, num_workers=0, worker_type="process", state=None, stop_after=None):
    dataset = ImageFolder(folder, decode=False)
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=3, seed=4), transform=transform,
                        num_workers=num_workers, worker_type=worker_type, seed=11, timeout=60)
    if state is not None:
        loader.load_state_dict(state)
    batches, saved = [], None
    for batch in loader:
        batches.append(tuple(np.array(part, copy=True) for part in batch))
        if stop_after is not None and len(batches) == stop_after:
            saved = loader.state_dict()
            break
    return batches, saved


def _fused():
    return V.Compose([V.DecodeRandomResizedCrop(64), V.RandomHorizontalFlip()])


@pytest.mark.parametrize("num_workers, worker_type", [(2, "process"), (2, "thread")])
def test_batches_are_the_same_for_any_workers(folder, num_workers, worker_type, no_leaks):
    serial, _ = _epoch(folder, _fused())
    assert len(serial) == 5 and serial[0][0].shape == (3, 64, 64, 3)
    parallel, _ = _epoch(folder, _fused(), num_workers, worker_type)
    assert all(np.array_equal(a, b) for x, y in zip(serial, parallel) for a, b in zip(x, y))
    assert len(parallel) == len(serial)


def test_a_resumed_epoch_continues_with_the_same_batches(folder, no_leaks):
    whole, _ = _epoch(folder, _fused(), 2)
    first, state = _epoch(folder, _fused(), 2, stop_after=2)
    rest, _ = _epoch(folder, _fused(), 2, state=state)
    assert len(first) + len(rest) == len(whole)
    assert all(np.array_equal(a, b) for x, y in zip(first + rest, whole) for a, b in zip(x, y))


def test_small_windows_give_the_two_step_batches_exactly(folder):
    """Output 160: no window of 256x320 is 320 pixels both ways, so nothing decodes reduced."""
    fused, _ = _epoch(folder, V.Compose([V.DecodeRandomResizedCrop(160), V.RandomHorizontalFlip()]))
    dataset = ImageFolder(folder)
    loader = DataLoader(dataset, RandomSampler(dataset, batch_size=3, seed=4), seed=11,
                        transform=V.Compose([V.RandomResizedCrop(160), V.RandomHorizontalFlip()]))
    two_step = list(loader)
    assert len(fused) == len(two_step) == 5
    assert all(np.array_equal(a, b) for x, y in zip(fused, two_step) for a, b in zip(x, y))
