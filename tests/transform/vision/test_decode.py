"""DecodeImage: bytes written by `convert` decode to exactly what ImageFolder gives, in workers too."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from dataloader import DataLoader, Dataset, ImageDecodeError, ImageFolder, RandomSampler
from dataloader.__main__ import main
from dataloader.errors import ArgumentTypeError, ArgumentValueError, WorkerError
from dataloader.transform.vision import Compose, DecodeImage, RandomHorizontalFlip
from tests._fixtures_images import make_image_folder


class Rows(Dataset):
    """Parquet rows read with pyarrow.parquet, held in a list."""

    def __init__(self, rows: list) -> None:
        self.rows = rows

    def __getitem__(self, index: int):
        return self.rows[index]

    def __len__(self) -> int:
        return len(self.rows)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """(the ImageFolder, its rows as `python -m dataloader convert` wrote them)."""
    base = tmp_path_factory.mktemp("decode")
    root = make_image_folder(base / "images")
    assert main(["convert", str(root), str(base / "parquet"), "--rows-per-shard", "4"]) == 0
    return ImageFolder(root), pq.read_table(base / "parquet").to_pylist()


def test_each_row_decodes_to_the_image_folder_item(converted):
    folder, rows = converted
    for index, row in enumerate(rows):
        decoded = DecodeImage().apply(row)
        image, label = folder[index]
        assert decoded["image"].dtype == np.uint8 and decoded["image"].shape == image.shape
        assert np.array_equal(decoded["image"], image)
        assert decoded["label"] == label and decoded["path"] == row["path"]
        assert isinstance(row["image"], bytes)  # the row itself is not changed


def test_fields_make_image_folder_items(converted):
    folder, rows = converted
    image, label = DecodeImage(fields=("image", "label")).apply(rows[2])
    assert np.array_equal(image, folder[2][0]) and label == folder[2][1]
    assert DecodeImage(fields=("label", "image", "path")).apply(rows[2])[2] == rows[2]["path"]


def test_tuples_lists_and_bare_bytes(converted):
    folder, rows = converted
    image = folder[0][0]
    data = rows[0]["image"]
    out = DecodeImage().apply((data, 7, "x"))
    assert isinstance(out, tuple) and np.array_equal(out[0], image) and out[1:] == (7, "x")
    out = DecodeImage(index=1).apply([3, data])
    assert isinstance(out, list) and out[0] == 3 and np.array_equal(out[1], image)
    assert np.array_equal(DecodeImage().apply(data), image)
    assert np.array_equal(DecodeImage().apply(np.frombuffer(data, np.uint8)), image)
    assert np.array_equal(DecodeImage(key="jpeg").apply({"jpeg": memoryview(data)})["jpeg"], image)


def test_a_loader_with_two_workers_gives_what_image_folder_gives(converted):
    folder, rows = converted
    dataset = Rows(rows)

    def batches(data, transform=None):
        sampler = RandomSampler(data, batch_size=4, seed=3)
        loader = DataLoader(data, sampler, transform=transform, num_workers=2, timeout=60, seed=3)
        try:
            return list(loader)
        finally:
            loader.close()

    ours = batches(dataset, DecodeImage())
    theirs = batches(folder)
    assert len(ours) == len(theirs) == 3
    for batch, (images, labels) in zip(ours, theirs):
        assert np.array_equal(batch["image"], images)
        assert np.array_equal(batch["label"], labels)
    # As tuples, followed by a random vision transform: the same draws, the same images.
    ours = batches(dataset, Compose([DecodeImage(fields=("image", "label")), RandomHorizontalFlip()]))
    theirs = batches(folder, Compose([RandomHorizontalFlip()]))
    plain = batches(folder)
    for (images, labels), (their_images, their_labels) in zip(ours, theirs):
        assert np.array_equal(images, their_images) and np.array_equal(labels, their_labels)
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(ours, plain))  # some were flipped


def test_corrupt_bytes_raise_image_decode_error_naming_the_row(converted):
    _, rows = converted
    row = {**rows[1], "image": rows[1]["image"][:40]}
    with pytest.raises(ImageDecodeError, match=rf"the image in field 'image' of '{rows[1]['path']}' \(40 bytes\)"):
        DecodeImage().apply(row)
    with pytest.raises(ImageDecodeError, match=r"the image at position 0 \(0 bytes\)"):
        DecodeImage().apply((b"", 1))
    loader = DataLoader(Rows([row] * 4), RandomSampler(Rows([row] * 4), batch_size=2), transform=DecodeImage(),
                        num_workers=2, timeout=60)
    with pytest.raises(ImageDecodeError) as caught:
        list(loader)
    assert isinstance(caught.value, WorkerError)
    loader.close()


@pytest.mark.parametrize(
    "sample,transform,error,match",
    [
        ({"jpeg": b"x"}, DecodeImage(), ArgumentValueError, "got a row without 'image'; its keys are"),
        ((b"x",), DecodeImage(index=2), ArgumentValueError, "got a sample of 1 fields"),
        ((np.zeros((4, 4, 3), np.uint8),), DecodeImage(), ArgumentTypeError, "looks decoded already"),
        ({"image": "a.jpg"}, DecodeImage(), ArgumentTypeError, "got str"),
        ({"image": b"x"}, DecodeImage(fields=("image", "label")), ArgumentValueError, r"without \['label'\]"),
    ],
)
def test_samples_without_encoded_bytes_are_clear_errors(sample, transform, error, match):
    with pytest.raises(error, match=match):
        transform.apply(sample)


def test_arguments_are_checked():
    with pytest.raises(ArgumentTypeError, match="`key` must be a string"):
        DecodeImage(key=0)
    with pytest.raises(ArgumentTypeError, match="`index` must be an integer"):
        DecodeImage(index="image")
    with pytest.raises(ArgumentTypeError, match="`fields` must be None or a sequence of dict keys"):
        DecodeImage(fields=("label",))
