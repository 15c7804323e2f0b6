import subprocess
import sys

import pytest

from dataloader import _gil

pytest.importorskip("PIL", reason="the demo needs the vision extra (Pillow; OpenCV where it installs)")


def write_png(path, pixels):
    from PIL import Image

    Image.fromarray(pixels).save(path)


def run_demo(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dataloader", "demo", "--tiny", *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_demo_generates_jpegs_and_prints_the_stage_table(tmp_path):
    import os

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    result = run_demo(env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    jpegs = list(tmp_path.glob("dataloader/demo-jpeg-*/*/*.jpg"))
    assert len(jpegs) == 48 and jpegs[0].read_bytes()[:2] == b"\xff\xd8"  # real JPEG files
    assert "48 images in 8 classes" in result.stdout and "decoded and transformed with " in result.stdout
    kind = "threads" if not _gil.gil_enabled() else "processes"  # threads on a free-threaded Python
    assert f"images/s with 2 workers ({kind})" in result.stdout
    assert "\n1 epoch, 48 images decoded" in result.stdout  # --tiny runs one epoch, in the singular
    for stage in ("fetch", "transform", "collate", "transport", "wait", "preload", "verdict:"):
        assert stage in result.stdout
    assert "epoch 0" in result.stderr  # the tqdm bar


def test_demo_runs_on_a_user_directory(tmp_path):
    import numpy as np

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(8):
            write_png(tmp_path / name / f"{i}.png", np.full((40, 40, 3), 30 * i, np.uint8))
    result = run_demo("--data", str(tmp_path), "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "16 images in 2 classes" in result.stdout and "with 1 worker (" in result.stdout


def test_an_unknown_image_backend_is_one_line_naming_the_allowed_values(tmp_path):
    import os

    env = {**os.environ, "DATALOADER_IMAGE_BACKEND": "magick", "XDG_CACHE_HOME": str(tmp_path)}
    result = run_demo(env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "DATALOADER_IMAGE_BACKEND='magick' is not an image backend; set it to one of opencv, pillow" in (
        result.stderr
    )


@pytest.mark.parametrize("args,message", [
    (("--data", "/nonexistent"), "--data must be an existing folder; got '/nonexistent'."),
    (("--workers", "-1"), "argument --workers: expected a number of workers >= 0; got '-1'"),
    (("--batch-size", "0"), "argument --batch-size: expected an integer >= 1; got '0'"),
])
def test_bad_options_are_one_line_and_exit_code_2(args, message):
    result = subprocess.run([sys.executable, "-m", "dataloader", "demo", *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith(("usage:", "python -m dataloader demo"))
    assert result.stderr.splitlines()[-1].startswith("python -m dataloader demo: error: ")
    assert message in result.stderr


def test_a_folder_with_fewer_images_than_a_batch_is_refused(tmp_path):
    import numpy as np

    (tmp_path / "a").mkdir()
    write_png(tmp_path / "a" / "0.png", np.zeros((8, 8, 3), np.uint8))
    result = run_demo("--data", str(tmp_path))  # --tiny: batches of 8
    assert result.returncode == 2 and "more than the 1 images" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_worker_error_names_its_cause_in_the_one_line(tmp_path):
    """A worker's error is a WorkerError whose first line only says where; the cause (here an
    image that does not decode) ends its traceback and used to be cut off."""
    import numpy as np

    (tmp_path / "a").mkdir()
    for i in range(8):
        write_png(tmp_path / "a" / f"{i}.png", np.zeros((8, 8, 3), np.uint8))
    (tmp_path / "a" / "3.png").write_text("not an image")
    result = run_demo("--data", str(tmp_path), "--workers", "1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.splitlines()[-1]
    assert line.startswith("python -m dataloader demo: error: Caught ImageDecodeError in DataLoader worker process 0 ")
    bad = str(tmp_path / "a" / "3.png")
    # The demo reads the bytes (fetch) and decodes in the transform, which names the file all the same.
    assert f"(stage: transform). The cause: dataloader.errors.ImageDecodeError: cannot decode image {bad!r}" in line
