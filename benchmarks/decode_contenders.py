"""The decode bench's contenders: the same pipeline written for each loader.

Every contender does the same work on the same folder of JPEGs: read the file, decode it, cut a
random window of 8-100% of its area with a width/height ratio in [3/4, 4/3] (ten draws, then
the central fallback, as ``RandomResizedCrop``), resize the window to 224x224, flip it
left-right with probability 1/2, and hand over batches of 32 uint8 images. Each gets the setup
its documentation recommends, with its own defaults where the task leaves a choice:

- ``ours``: ``ImageFolder(root, decode=False)`` and ``Compose([DecodeRandomResizedCrop(224),
  RandomHorizontalFlip()])``: the fused path, which decodes at the smallest JPEG scale that
  keeps the window at least 224 pixels (OpenCV's libjpeg-turbo), then resizes (OpenCV
  ``INTER_LINEAR``). HWC, BGR.
- ``ours-threads``: the same with ``worker_type="thread"`` (only with workers).
- ``ours-auto``: the same with ``num_workers="auto"`` (the autotuner sizes the pool), in the
  ``W=0`` column only: what a user who asks for ``auto`` gets, beside Grain's default, whose
  ``W=0`` runs 16 read threads.
- ``ours-unfused``: ``ImageFolder(root)`` (the whole image decoded by ``cv2.imdecode``) and
  ``Compose([RandomResizedCrop(224), RandomHorizontalFlip()])``: today's path. HWC, BGR.
  Ours run as ``DataLoader(..., sampler=Infinite(RandomSampler(dataset, batch_size=32,
  drop_last=True, seed=0)), num_workers=W)``.
- ``torch``: ``torch.utils.data.DataLoader`` over a map dataset that reads the file
  (``torchvision.io.read_file``), decodes it (``torchvision.io.decode_jpeg``, torchvision's
  libjpeg-turbo) and applies ``transforms.v2.Compose([RandomResizedCrop(224, antialias=True),
  RandomHorizontalFlip()])`` to the uint8 tensor; ``batch_size=32``, ``num_workers=W``,
  ``persistent_workers`` with workers, a ``RandomSampler``. Its workers run one intra-op
  thread each (the loader's default); with ``W=0`` the run sets ``torch.set_num_threads(1)``
  too, as tf.data's ``W=0`` has one: PyTorch's default of one OpenMP thread per core made the
  serial run 1.6-7x slower on the busy 2-core machine (340 and 95 images/s against 556 and
  645 on the 500 set, alternating), its threads spinning against each other. CHW, RGB.
- ``tf.data``: the file list, shuffled and repeated; ``tf.io.read_file``,
  ``tf.image.sample_distorted_bounding_box`` (area (0.08, 1), ratio (3/4, 4/3), ten attempts,
  the whole image as the box, ``min_object_covered=0``), ``tf.io.decode_and_crop_jpeg``
  (libjpeg-turbo, decoding only the window's rows and blocks), ``tf.image.resize`` to 224x224
  (bilinear), ``random_flip_left_right``, ``saturate_cast`` to uint8; ``map`` with
  ``num_parallel_calls=AUTOTUNE``, ``batch(32)``, ``prefetch(AUTOTUNE)``; a private thread
  pool of ``max(W, 1)`` threads, and intra-op parallelism 1 with ``W=0``. HWC, RGB.
- ``dali``: a CPU-only pipeline (``device_id=None``): ``fn.readers.file(random_shuffle=True)``,
  ``fn.decoders.image_random_crop(device="cpu")`` (nvImageCodec's CPU JPEG decoder:
  libjpeg-turbo, region of interest), ``fn.resize`` to 224x224 (linear, antialiased, DALI's
  default), ``fn.flip(horizontal=fn.random.coin_flip())``; ``batch_size=32``,
  ``num_threads=max(W, 1)``, the default prefetch queue (2). HWC, RGB.
- ``grain``: ``MapDataset.source(paths).shuffle(seed=0).repeat().random_map(load)`` with a
  ``load`` that reads the file, decodes it with ``cv2.imdecode`` (OpenCV's libjpeg-turbo),
  crops, resizes (``INTER_LINEAR``) and flips; ``to_iter_dataset()`` with Grain's default
  ``ReadOptions`` (16 read threads, a buffer of 500), ``batch(32)``, and with ``W > 0``
  ``mp_prefetch(MultiprocessingOptions(num_workers=W))``. HWC, BGR.
- ``spdl``: ``spdl.pipeline.PipelineBuilder``: a source of shuffled paths, a stage that
  demuxes the file (``spdl.io.demux_image``) and decodes it through an FFmpeg filter graph
  doing the crop, the 224x224 scale (FFmpeg's bilinear ``scale``) and the flip
  (``spdl.io.decode_packets``; FFmpeg's ``mjpeg`` decoder), ``concurrency=max(W, 1)``; a
  stage converting each 32 frames into one batch (``spdl.io.convert_frames``); built with
  ``num_threads=max(W, 1)``. HWC, RGB.

A contender's ``open(root, workers, batches)`` is a context manager giving a continuous
stream of at least ``batches`` batches (epoch after epoch) and stopping what it started when
the run ends; :mod:`benchmarks.decode_child` times it.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import random
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator

import numpy as np

from .decode_data import files

BATCH, SIDE = 32, 224
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
WARMUP_BATCHES = 4

OURS, THREADS, UNFUSED, AUTO = "ours", "ours-threads", "ours-unfused", "ours-auto"
TORCH, TF, DALI, GRAIN, SPDL = "torch", "tf.data", "dali", "grain", "spdl"

Batches = Callable[[Path, int, int], ContextManager[Iterator[Any]]]  # (root, workers, batches)


@dataclass(frozen=True)
class Contender:
    name: str
    open: Batches
    needs: tuple[str, ...]  # "module" or "module:attribute" it cannot run without
    install: str  # how to get what it needs
    layout: str  # what one batch holds
    decoder: str
    workers_only: bool = False  # runs with num_workers > 0 only
    serial_only: bool = False  # runs in the num_workers=0 column only (ours-auto: its own count)
    probe: Callable[[Path], None] | None = None  # raises where an installed peer cannot work


def missing(contender: Contender, jpeg: Path | None = None) -> str | None:
    """Why ``contender`` cannot run in this interpreter, or None. Modules are looked up, not
    imported, except where an attribute is named (ours: the fused transform); with ``jpeg``,
    the contender's probe then opens that file (SPDL loads its FFmpeg libraries lazily)."""
    for need in contender.needs:
        module, _, attribute = need.partition(":")
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not installed ({contender.install})"
            if attribute and not hasattr(importlib.import_module(module), attribute):
                return f"{module} has no {attribute} ({contender.install})"
        except ModuleNotFoundError:  # a parent package missing
            return f"{module} is not installed ({contender.install})"
        except ImportError as error:  # installed, failing to import
            return f"{module} cannot be imported: {error} ({contender.install})"
    if contender.probe is not None and jpeg is not None:
        try:
            contender.probe(jpeg)
        except Exception as error:  # noqa: BLE001 - any failure means it cannot run here
            return f"{type(error).__name__}: {str(error)[:300]} ({contender.install})"
    return None


def random_box(height: int, width: int, rng: Any) -> tuple[int, int, int, int]:
    """``(top, left, h, w)`` of a RandomResizedCrop window: up to ten draws of an area in
    ``SCALE`` and a log-uniform ratio in ``RATIO``, then the largest central window in range.
    ``rng`` is a ``random.Random`` or anything with ``uniform`` and ``randint`` alike."""
    area = height * width
    log_ratio = (math.log(RATIO[0]), math.log(RATIO[1]))
    for _ in range(10):
        target = area * rng.uniform(*SCALE)
        ratio = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * ratio)))
        h = int(round(math.sqrt(target / ratio)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height
    if ratio < RATIO[0]:
        w, h = width, int(round(width / RATIO[0]))
    elif ratio > RATIO[1]:
        h, w = height, int(round(height * RATIO[1]))
    else:
        h, w = height, width
    return (height - h) // 2, (width - w) // 2, h, w


def _labels(paths: list[Path]) -> list[int]:
    return [int(p.parent.name.removeprefix("class")) for p in paths]


# ---- ours ---------------------------------------------------------------------------------


def _ours(fused: bool, worker_type: str | None = None, auto: bool = False) -> Batches:
    @contextmanager
    def open(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
        from dataloader import DataLoader, ImageFolder, Infinite, RandomSampler
        from dataloader.transform import vision as V

        if fused:
            dataset = ImageFolder(root, decode=False)
            transform = V.Compose([V.DecodeRandomResizedCrop(SIDE), V.RandomHorizontalFlip()])
        else:
            dataset = ImageFolder(root)
            transform = V.Compose([V.RandomResizedCrop(SIDE), V.RandomHorizontalFlip()])
        sampler = Infinite(RandomSampler(dataset, batch_size=BATCH, drop_last=True, seed=0))
        loader = DataLoader(dataset, sampler, transform=transform, num_workers="auto" if auto else workers,
                            worker_type=worker_type)
        try:
            with iter(loader) as stream:
                yield stream
        finally:
            loader.close()

    return open


def _ours_probe(jpeg: Path) -> None:
    """ImageFolder of the set with ``decode=False`` (the lead's API lands in two steps)."""
    from dataloader import ImageFolder

    ImageFolder(jpeg.parent.parent, decode=False)


# ---- torch --------------------------------------------------------------------------------


class _TorchFiles:
    """PyTorch's map dataset: item ``i`` is ``(crop, label)``, read and decoded by torchvision."""

    def __init__(self, paths: list[Path]) -> None:
        from torchvision.transforms import v2

        self.paths, self.labels = [str(p) for p in paths], _labels(paths)
        self.transform = v2.Compose([v2.RandomResizedCrop(SIDE, scale=SCALE, ratio=RATIO, antialias=True),
                                     v2.RandomHorizontalFlip()])

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        from torchvision.io import ImageReadMode, decode_jpeg, read_file

        image = decode_jpeg(read_file(self.paths[i]), mode=ImageReadMode.RGB)
        return self.transform(image), self.labels[i]


@contextmanager
def _torch(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
    import torch.utils.data

    if workers == 0:
        torch.set_num_threads(1)  # serial: one thread of work (see the docstring)
    dataset = _TorchFiles(files(root))
    sampler = torch.utils.data.RandomSampler(dataset, num_samples=batches * BATCH)  # permutations
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, sampler=sampler, drop_last=True,
                                         num_workers=workers, persistent_workers=workers > 0)
    stream = iter(loader)
    try:
        yield stream
    finally:
        del stream  # its workers stop when it is collected
        import gc

        gc.collect()


# ---- tf.data ------------------------------------------------------------------------------


@contextmanager
def _tf(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
    import tensorflow as tf

    paths = files(root)
    whole = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])

    def load(path: Any, label: Any) -> tuple[Any, Any]:
        data = tf.io.read_file(path)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.io.extract_jpeg_shape(data), bounding_boxes=whole, min_object_covered=0.0,
            aspect_ratio_range=RATIO, area_range=SCALE, max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        image = tf.io.decode_and_crop_jpeg(data, window, channels=3)
        image = tf.image.resize(image, [SIDE, SIDE])
        image = tf.image.random_flip_left_right(image)
        return tf.saturate_cast(image, tf.uint8), label

    options = tf.data.Options()
    options.threading.private_threadpool_size = max(workers, 1)
    if workers == 0:
        options.threading.max_intra_op_parallelism = 1
    dataset = (tf.data.Dataset.from_tensor_slices(([str(p) for p in paths], _labels(paths)))
               .shuffle(len(paths), seed=0, reshuffle_each_iteration=True).repeat()
               .map(load, num_parallel_calls=tf.data.AUTOTUNE)
               .batch(BATCH, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
               .with_options(options))
    yield iter(dataset)


# ---- DALI ---------------------------------------------------------------------------------


@contextmanager
def _dali(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=max(workers, 1), device_id=None, seed=0)
    def pipeline() -> tuple[Any, Any]:
        jpegs, labels = fn.readers.file(file_root=str(root), random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=list(SCALE), random_aspect_ratio=list(RATIO),
                                               num_attempts=10)
        images = fn.resize(images, resize_x=SIDE, resize_y=SIDE)
        return fn.flip(images, horizontal=fn.random.coin_flip()), labels

    pipe = pipeline()
    pipe.build()

    def stream() -> Iterator[Any]:
        while True:
            images, labels = pipe.run()
            yield images.as_array(), labels.as_array()

    try:
        yield stream()
    finally:
        del pipe


# ---- Grain --------------------------------------------------------------------------------


def _grain_load(path: str, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Grain's per-element map: read, ``cv2.imdecode``, crop, resize, flip."""
    import cv2

    image = cv2.imdecode(np.frombuffer(Path(path).read_bytes(), np.uint8), cv2.IMREAD_COLOR)
    top, left, h, w = random_box(*image.shape[:2], random.Random(int(rng.integers(1 << 62))))
    image = cv2.resize(image[top:top + h, left:left + w], (SIDE, SIDE), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.5:
        image = cv2.flip(image, 1)
    return image, int(Path(path).parent.name.removeprefix("class"))


@contextmanager
def _grain(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
    import grain

    dataset = (grain.MapDataset.source([str(p) for p in files(root)]).shuffle(seed=0).repeat()
               .random_map(_grain_load, seed=0).to_iter_dataset().batch(BATCH, drop_remainder=True))
    if workers > 0:
        dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
    stream = iter(dataset)
    try:
        yield stream
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


# ---- SPDL ---------------------------------------------------------------------------------


def _spdl_load(path: str, rng: random.Random) -> Any:
    """SPDL's per-image stage: demux, then decode through a crop, scale and flip filter."""
    import spdl.io

    packets = spdl.io.demux_image(path)
    top, left, h, w = random_box(packets.height, packets.width, rng)
    steps = [f"crop={w}:{h}:{left}:{top}", f"scale={SIDE}:{SIDE}:flags=bilinear"]
    if rng.random() < 0.5:
        steps.append("hflip")
    return spdl.io.decode_packets(packets, filter_desc=",".join(steps) + ",format=pix_fmts=rgb24")


def _spdl_probe(jpeg: Path) -> None:
    import spdl.io

    spdl.io.demux_image(str(jpeg))


@contextmanager
def _spdl(root: Path, workers: int, batches: int) -> Iterator[Iterator[Any]]:
    import spdl.io
    from spdl.pipeline import PipelineBuilder

    paths = [str(p) for p in files(root)]
    rng = random.Random(0)

    def source() -> Iterator[str]:
        while True:
            yield from rng.sample(paths, len(paths))

    def batch(frames: list) -> np.ndarray:
        return spdl.io.to_numpy(spdl.io.convert_frames(frames))

    threads = max(workers, 1)
    pipeline = (PipelineBuilder().add_source(source())
                .pipe(lambda path: _spdl_load(path, random.Random(rng.random())), concurrency=threads)
                .aggregate(BATCH, drop_last=True).pipe(batch).add_sink(3)
                .build(num_threads=threads))
    with pipeline.auto_stop():
        yield iter(pipeline.get_iterator(timeout=600))


CONTENDERS = (
    Contender(OURS, _ours(fused=True), ("cv2", "dataloader.transform.vision:DecodeRandomResizedCrop"),
              "the fused path is not in this checkout yet", "HWC BGR",
              "OpenCV libjpeg-turbo, reduced scale", probe=_ours_probe),
    Contender(THREADS, _ours(fused=True, worker_type="thread"),
              ("cv2", "dataloader.transform.vision:DecodeRandomResizedCrop"),
              "the fused path is not in this checkout yet", "HWC BGR",
              "OpenCV libjpeg-turbo, reduced scale", workers_only=True, probe=_ours_probe),
    Contender(AUTO, _ours(fused=True, auto=True),
              ("cv2", "dataloader.transform.vision:DecodeRandomResizedCrop"),
              "the fused path is not in this checkout yet", "HWC BGR",
              "OpenCV libjpeg-turbo, reduced scale", serial_only=True, probe=_ours_probe),
    Contender(UNFUSED, _ours(fused=False), ("cv2",), "pip install opencv-python-headless", "HWC BGR",
              "OpenCV libjpeg-turbo (cv2.imdecode)"),
    Contender(TORCH, _torch, ("torch", "torchvision"), "pip install torch torchvision", "CHW RGB",
              "torchvision.io.decode_jpeg"),
    Contender(TF, _tf, ("tensorflow",), "pip install tensorflow-cpu", "HWC RGB",
              "tf.io.decode_and_crop_jpeg"),
    Contender(DALI, _dali, ("nvidia.dali",), "pip install nvidia-dali-cuda120", "HWC RGB",
              "nvImageCodec CPU (libjpeg-turbo), ROI"),
    Contender(GRAIN, _grain, ("grain", "cv2"), "pip install grain opencv-python-headless", "HWC BGR",
              "OpenCV libjpeg-turbo (cv2.imdecode)"),
    Contender(SPDL, _spdl, ("spdl.io", "spdl.pipeline"),
              "pip install spdl, and FFmpeg 4-8's shared libraries", "HWC RGB",
              "FFmpeg mjpeg (filter graph)", probe=_spdl_probe),
)
BY_NAME = {c.name: c for c in CONTENDERS}
