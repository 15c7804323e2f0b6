"""The columnar bench's files and the pieces its contenders share.

:func:`write_files` makes, once per run, the tabular rows as Parquet (row groups of 65,536),
as an uncompressed Arrow IPC file (``ArrowDataset``) and as an Arrow IPC stream (what
``datasets.Dataset.from_file`` reads), and the JPEGs both as an ImageFolder tree and as
Parquet of ``image`` bytes and ``label``, written by ``write_parquet_shards`` as
``python -m dataloader convert`` writes it. :class:`Crop` and :class:`DecodeCrop` are the
two image contenders' transforms, the crop code shared. :class:`TakeRows` is the map dataset a
user writes by hand for PyTorch's DataLoader: one ``table.take([i])`` per sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from dataloader.columnar import write_parquet_shards
from dataloader.transform import Transform

TABLE_ROW_GROUP = 65_536
IMAGE_ROW_GROUP = 256
IMAGE_SIDE, CROP_SIDE = 256, 160
CLASSES = 10


@dataclass(frozen=True)
class Files:
    """Where one run's files lie."""

    parquet: Path  # tabular rows, Parquet
    arrow: Path  # the same rows, uncompressed Arrow IPC file format
    arrow_stream: Path  # the same rows, Arrow IPC stream format (Hugging Face's cache format)
    image_root: Path  # root/<class>/<n>.jpg
    image_parquet: Path  # a directory of Parquet shards (one here): image (binary), label (int32)


def tabular(rows: int, seed: int = 0) -> pa.Table:
    """``rows`` rows of 4 small numeric columns: 2 float32, 2 int64."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "f0": rng.random(rows, dtype=np.float32), "f1": rng.random(rows, dtype=np.float32),
        "i0": rng.integers(0, 1 << 40, rows), "i1": rng.integers(0, 1000, rows),
    })


def jpegs(count: int, seed: int = 0) -> list[bytes]:
    """``count`` 256x256 JPEGs of smooth random colour plus a little noise, so that they
    compress about as photos do (tens of KB each), not as noise or as flat colour."""
    import cv2

    rng = np.random.default_rng(seed)
    encoded = []
    for _ in range(count):
        coarse = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        smooth = cv2.resize(coarse, (IMAGE_SIDE, IMAGE_SIDE), interpolation=cv2.INTER_CUBIC)
        noisy = smooth + rng.normal(0, 6, smooth.shape)
        ok, data = cv2.imencode(".jpg", np.clip(noisy, 0, 255).astype(np.uint8),
                                [cv2.IMWRITE_JPEG_QUALITY, 90])
        if not ok:
            raise RuntimeError("OpenCV could not encode a generated image as JPEG.")
        encoded.append(data.tobytes())
    return encoded


def write_files(directory: Path, rows: int, images: int) -> Files:
    """Every file of the run, in ``directory``."""
    files = Files(directory / "rows.parquet", directory / "rows.arrow", directory / "rows.arrows",
                  directory / "images", directory / "images-parquet")
    table = tabular(rows)
    pq.write_table(table, files.parquet, row_group_size=TABLE_ROW_GROUP)
    feather.write_feather(table, files.arrow, compression="uncompressed")
    with pa.ipc.new_stream(files.arrow_stream, table.schema) as writer:
        writer.write_table(table)
    encoded = jpegs(images)
    labels = np.arange(images, dtype=np.int32) % CLASSES
    for n, (data, label) in enumerate(zip(encoded, labels)):
        folder = files.image_root / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{n}.jpg").write_bytes(data)
    # Written as `python -m dataloader convert` writes an ImageFolder: uncompressed, and with no
    # dictionary for the bytes (pq.write_table's default, which a reader decodes, as large as the data).
    write_parquet_shards(pa.table({"image": pa.array(encoded, pa.binary()), "label": labels}),
                         files.image_parquet, row_group_size=IMAGE_ROW_GROUP, compression="none")
    return files


def crop(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random ``CROP_SIDE`` square of ``image`` (a view)."""
    top = rng.integers(0, image.shape[0] - CROP_SIDE + 1)
    left = rng.integers(0, image.shape[1] - CROP_SIDE + 1)
    return image[top:top + CROP_SIDE, left:left + CROP_SIDE]


class Crop(Transform):
    """``(image, label)`` from ImageFolder (already decoded) -> ``(crop, label)``."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def apply(self, input: Any) -> Any:
        image, label = input
        return crop(image, self.rng), label


class DecodeCrop(Crop):
    """``{"image": bytes, "label": int}`` from a Parquet row -> ``(crop, label)``, decoded as
    ImageFolder decodes (``cv2.imdecode``, BGR)."""

    def apply(self, input: Any) -> Any:
        import cv2

        image = cv2.imdecode(np.frombuffer(input["image"], np.uint8), cv2.IMREAD_COLOR)
        return crop(image, self.rng), input["label"]


class TakeRows:
    """A map dataset over an Arrow table, one ``table.take([i])`` per sample, each column
    turned into a NumPy scalar: the by-hand recipe for ``torch.utils.data.DataLoader``."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> dict:
        row = self.table.take([i])
        return {name: row.column(name).to_numpy()[0] for name in row.column_names}
