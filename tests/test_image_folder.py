import os
import pickle

import numpy as np
import pytest
from PIL import Image

from dataloader.dataset import Dataset
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataLoaderError
from dataloader import ImageDecodeError, ImageFolder
from dataloader.image_folder import IMAGE_EXTENSIONS


def write(path, image):
    """Save a BGR (or gray) array as OpenCV's imwrite would, with Pillow (there without OpenCV too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image[:, :, ::-1].copy() if image.ndim == 3 else image).save(path)
    return path


def solid(bgr, size=(6, 8)):
    image = np.zeros(size + (3,), np.uint8)
    image[:] = bgr
    return image


@pytest.fixture
def tree(tmp_path):
    """root/{cat,dog,empty}: nested folders, mixed extensions, a text file."""
    root = tmp_path / "root"
    write(root / "cat" / "a.png", solid((255, 0, 0)))
    write(root / "cat" / "sub" / "deeper" / "b.JPG", solid((0, 0, 255), (10, 12)))
    write(root / "dog" / "c.bmp", solid((0, 255, 0)))
    write(root / "dog" / "d.jpeg", np.full((5, 7), 90, np.uint8))  # grayscale file
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "empty").mkdir()
    (root / "stray.png").write_bytes(b"")  # a file in root is not a class
    return root


def test_classes_are_sorted_subfolders_and_files_are_found_recursively(tree):
    dataset = ImageFolder(tree)
    assert isinstance(dataset, Dataset)
    assert dataset.classes == ("cat", "dog", "empty")
    assert dataset.class_dict == {"cat": 0, "dog": 1, "empty": 2}
    assert len(dataset) == 4
    names = [os.path.relpath(dataset.path(i), tree) for i in range(len(dataset))]
    assert names == ["cat/a.png", "cat/sub/deeper/b.JPG", "dog/c.bmp", "dog/d.jpeg"]
    assert dataset.labels.dtype == np.int32 and dataset.labels.tolist() == [0, 0, 1, 1]


def test_items_are_bgr_uint8_hwc_with_int32_labels(tree):
    dataset = ImageFolder(tree)
    image, label = dataset[0]
    assert image.dtype == np.uint8 and image.shape == (6, 8, 3)
    assert image[0, 0].tolist() == [255, 0, 0]  # blue stays in channel 0 (BGR)
    assert isinstance(label, np.int32) and label == 0
    gray, label = dataset[3]
    assert gray.shape == (5, 7, 3) and label == 1  # grayscale decoded as 3 channels
    assert dataset[-1][1] == 1


def test_class_name_returns_the_folder_name(tree):
    dataset = ImageFolder(tree, class_name=True)
    assert [dataset[i][1] for i in range(len(dataset))] == ["cat", "cat", "dog", "dog"]


def test_check_valid_func_decides_which_files_count(tree):
    dataset = ImageFolder(tree, check_valid_func=lambda path: path.endswith((".png", ".bmp")))
    assert [os.path.basename(dataset.path(i)) for i in range(len(dataset))] == ["a.png", "c.bmp"]
    assert dataset.labels.tolist() == [0, 1]


def test_default_extensions_are_case_insensitive(tree):
    assert ".jpg" in IMAGE_EXTENSIONS
    assert any(ImageFolder(tree).path(i).endswith(".JPG") for i in range(4))


def test_a_corrupt_image_raises_an_error_naming_the_file(tree):
    bad = tree / "dog" / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n this is not really a png")
    dataset = ImageFolder(tree)
    index = [dataset.path(i) for i in range(len(dataset))].index(str(bad))
    with pytest.raises(ImageDecodeError, match="broken.png") as caught:
        dataset[index]
    assert isinstance(caught.value, OSError) and isinstance(caught.value, DataLoaderError)


def test_an_empty_file_is_an_error_too(tree):
    write(tree / "cat" / "z.png", solid((1, 2, 3)))
    (tree / "cat" / "z.png").write_bytes(b"")
    dataset = ImageFolder(tree)
    assert dataset.path(1).endswith("z.png")  # a folder's own files come before its sub-folders
    with pytest.raises(ImageDecodeError, match="z.png"):
        dataset[1]


def test_a_file_deleted_after_the_scan_raises_file_not_found(tree):
    dataset = ImageFolder(tree)
    os.remove(dataset.path(0))
    with pytest.raises(FileNotFoundError):
        dataset[0]


def test_empty_root_is_a_clear_error(tmp_path):
    with pytest.raises(ArgumentValueError, match="no class folders"):
        ImageFolder(tmp_path)


def test_root_without_class_folders_is_a_clear_error(tmp_path):
    write(tmp_path / "a.png", solid((1, 2, 3)))
    with pytest.raises(ArgumentValueError, match="no class folders"):
        ImageFolder(tmp_path)


def test_class_folders_without_images_is_a_clear_error(tmp_path):
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "a.txt").write_text("x")
    with pytest.raises(ArgumentValueError, match="no files"):
        ImageFolder(tmp_path)


def test_missing_root_and_bad_arguments(tmp_path):
    with pytest.raises(ArgumentValueError, match="`root`"):
        ImageFolder(tmp_path / "nope")
    with pytest.raises(ArgumentTypeError, match="`root`"):
        ImageFolder(3)
    with pytest.raises(ArgumentTypeError, match="`check_valid_func`"):
        ImageFolder(tmp_path, check_valid_func="*.png")
    with pytest.raises(ArgumentTypeError, match="`class_name`"):
        ImageFolder(tmp_path, class_name="yes")


def test_index_out_of_range(tree):
    dataset = ImageFolder(tree)
    with pytest.raises(IndexError, match="out of range"):
        dataset[4]
    with pytest.raises(IndexError):
        dataset[-5]


def test_file_list_is_stored_in_numpy_arrays_not_python_objects(tree):
    dataset = ImageFolder(tree)
    for name, value in vars(dataset).items():
        assert not isinstance(value, (list, dict)) or len(value) <= len(dataset.classes), name
    assert isinstance(dataset._paths, np.ndarray) and isinstance(dataset._offsets, np.ndarray)


def test_pickles_for_spawned_workers_even_with_a_lambda_filter(tree):
    dataset = ImageFolder(tree, check_valid_func=lambda path: path.endswith(".png"))
    clone = pickle.loads(pickle.dumps(dataset))
    assert len(clone) == 1 and np.array_equal(clone[0][0], dataset[0][0])


def test_samples_matches_megengine_layout(tree):
    samples = ImageFolder(tree).samples
    assert [label for _, label in samples] == [0, 0, 1, 1]
    assert samples[0][0].endswith("a.png")


def test_loads_through_the_data_loader_with_vision_transforms(tree):
    from dataloader import DataLoader, SequentialSampler
    from dataloader.transform.vision import Compose, Normalize, Resize, ToMode

    dataset = ImageFolder(tree)
    transform = Compose([Resize((4, 4)), Normalize(128, 64), ToMode("CHW")])
    loader = DataLoader(dataset, sampler=SequentialSampler(dataset, batch_size=2), transform=transform)
    batches = list(loader)
    assert len(batches) == 2
    images, labels = batches[0]
    assert images.shape == (2, 3, 4, 4) and images.dtype == np.float32
    assert labels.tolist() == [0, 0]
