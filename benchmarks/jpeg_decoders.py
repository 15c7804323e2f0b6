"""JPEG decoders at full and reduced scale, and the fused crop against the two-step one, per image.

On the decode bench's photo-like JPEGs (``decode_data``), one thread, best of ``--reps`` passes
over ``--images`` images (the least disturbed pass on a shared machine):

- each decoder that imports, at 1/1, 1/2 and 1/4 scale, as milliseconds per image and as a
  ratio to OpenCV's full decode: OpenCV (``cv2.imdecode``, ``IMREAD_REDUCED_COLOR_*``),
  Pillow (``Image.draft`` then the pixels as a BGR array), simplejpeg and PyTurboJPEG (with
  ``--turbojpeg-lib``, the path of ``libturbojpeg.so``; also its 3/8 scale);
- ``DecodeImage`` + ``RandomResizedCrop(224)`` against ``DecodeRandomResizedCrop(224)`` for the
  same draws: milliseconds per image, the ratio, and the PSNR of the fused output against the
  two-step one (minimum and median over the windows that decoded reduced).

This says what the decoder and the reduced decode are worth before any loader is involved; the
``decode`` bench measures whole pipelines against the peers. Peers install with
``pip install simplejpeg PyTurboJPEG`` (PyTurboJPEG also needs the system's libturbojpeg, such
as Debian's ``libturbojpeg0``).

Usage: ``python -m benchmarks.jpeg_decoders [--sets 1280,500,256] [--images 12] [--reps 9]
[--turbojpeg-lib /usr/lib/x86_64-linux-gnu/libturbojpeg.so.0]``.
"""

from __future__ import annotations

import io
import math
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from .decode_data import SETS, encode, photo
from .options import add_reps, comma_list, new_parser

Decoder = Callable[[bytes], Any]


def _opencv(reduce: int) -> Decoder:
    import cv2

    flag = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4}[reduce]
    return lambda data: cv2.imdecode(np.frombuffer(data, np.uint8), flag)


def _pillow(reduce: int) -> Decoder:
    from PIL import Image

    def decode(data: bytes) -> Any:
        image = Image.open(io.BytesIO(data))
        if reduce > 1:
            image.draft("RGB", (image.width // reduce, image.height // reduce))
        return np.frombuffer(image.tobytes("raw", "BGR"), np.uint8)

    return decode


def _simplejpeg(reduce: int) -> Decoder:
    import simplejpeg

    def decode(data: bytes) -> Any:
        height, width = simplejpeg.decode_jpeg_header(data)[:2]
        return simplejpeg.decode_jpeg(data, "BGR", min_height=height // reduce, min_width=width // reduce)

    return decode


def _turbojpeg(library: str) -> Callable[[tuple[int, int]], Decoder]:
    from turbojpeg import TJPF_BGR, TurboJPEG

    turbo = TurboJPEG(library)
    return lambda factor: (lambda data: turbo.decode(data, pixel_format=TJPF_BGR, scaling_factor=factor))


def decoders(turbojpeg_lib: str | None) -> tuple[dict[str, Decoder], list[str]]:
    """The decoders that import here, by row name, and why the others are missing."""
    found: dict[str, Decoder] = {}
    missing: list[str] = []
    for name, make in (("OpenCV", _opencv), ("Pillow", _pillow), ("simplejpeg", _simplejpeg)):
        try:
            for reduce in (1, 2, 4):
                found[f"{name} 1/{reduce}"] = make(reduce)
        except ImportError as error:
            missing.append(f"{name}: {error}")
    if turbojpeg_lib is None:
        missing.append("PyTurboJPEG: give --turbojpeg-lib PATH (libturbojpeg.so)")
    else:
        try:
            turbo = _turbojpeg(turbojpeg_lib)
            for factor in ((1, 1), (1, 2), (3, 8), (1, 4)):
                found[f"PyTurboJPEG {factor[0]}/{factor[1]}"] = turbo(factor)
        except (ImportError, OSError) as error:
            missing.append(f"PyTurboJPEG: {error}")
    return found, missing


def best_ms(calls: dict[str, Callable[[], Any]], count: int, reps: int) -> dict[str, float]:
    """Milliseconds per image of each call (which handles ``count`` images), best of ``reps``
    passes in rotating order."""
    best = {name: math.inf for name in calls}
    names = list(calls)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            start = time.perf_counter()
            calls[name]()
            best[name] = min(best[name], (time.perf_counter() - start) / count * 1e3)
    return best


def _each(decode: Decoder, blobs: Sequence[bytes]) -> None:
    """Decode each image and let it go, as a pipeline does (keeping them all would time page
    faults of fresh memory, not the decoder)."""
    for data in blobs:
        decode(data)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def fused_against_two_step(blobs: Sequence[bytes], reps: int) -> tuple[dict[str, float], list[float]]:
    """Per-image milliseconds of the two crops for the same draws, and the fused output's PSNR
    against the two-step output where it decoded reduced."""
    from dataloader.transform.vision import DecodeImage, DecodeRandomResizedCrop, RandomResizedCrop

    decode, crop, fused = DecodeImage(), RandomResizedCrop(224), DecodeRandomResizedCrop(224)

    def run(step: Callable[[bytes], Any]) -> list[Any]:
        outputs = []
        for index, data in enumerate(blobs):
            np.random.seed(index)  # outside a loader, batch_rng() is drawn from NumPy's global state
            outputs.append(step(data))
        return outputs

    def two_step(data: bytes) -> Any:
        return crop.apply(decode.apply(data))

    times = best_ms({"two-step": lambda: run(two_step), "fused": lambda: run(fused.apply)}, len(blobs), reps)
    values = [_psnr(a, b) for a, b in zip(run(fused.apply), run(two_step))]
    return times, [v for v in values if v != math.inf]


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser(__doc__, "python -m benchmarks.jpeg_decoders")
    parser.add_argument("--sets", type=comma_list(str.strip, tuple(SETS), "set"), default=["1280", "500", "256"],
                        help="image sets, comma-separated (default 1280,500,256)")
    parser.add_argument("--images", type=int, default=12, help="images per set, generated in memory (default 12)")
    parser.add_argument("--turbojpeg-lib", metavar="PATH", help="libturbojpeg.so, for PyTurboJPEG's rows")
    add_reps(parser, 9, "passes over the images; the best is kept (default 9)")
    args = parser.parse_args(argv)
    try:
        import cv2
    except ImportError:
        print("this bench needs OpenCV (the generated images are drawn with it): pip install '.[vision]'")
        return 2
    cv2.setNumThreads(1)
    found, missing = decoders(args.turbojpeg_lib)
    for line in missing:
        print(f"not measured: {line}")
    for name in args.sets:
        image_set = SETS[name]
        blobs = [encode(photo(image_set, index)) for index in range(args.images)]
        kilobytes = sum(map(len, blobs)) / len(blobs) / 1e3
        print(f"\n## {image_set.width}x{image_set.height}, quality 90, {kilobytes:.0f} KB on average, "
              f"{args.images} images, best of {args.reps}\n")
        calls = {row: (lambda d=decode: _each(d, blobs)) for row, decode in found.items()}
        times = best_ms(calls, len(blobs), args.reps)
        print("| decoder | ms per image | vs OpenCV 1/1 |\n| --- | --: | --: |")
        for row, ms in times.items():
            print(f"| {row} | {ms:.2f} | {times['OpenCV 1/1'] / ms:.2f}x |")
        crop_times, values = fused_against_two_step(blobs, args.reps)
        ratio = crop_times["two-step"] / crop_times["fused"]
        print(f"\nDecodeImage + RandomResizedCrop(224): {crop_times['two-step']:.2f} ms; "
              f"DecodeRandomResizedCrop(224): {crop_times['fused']:.2f} ms; fused {ratio:.2f}x")
        if values:
            print(f"PSNR of the fused output against the two-step one over {len(values)} reduced windows: "
                  f"min {min(values):.1f} dB, median {float(np.median(values)):.1f} dB")
        else:
            print("no window decoded reduced: the fused output equals the two-step one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
