"""python -m dataloader doctor --scan: every sample read once, the failed ones listed and logged."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dataloader import Dataset, ImageFolder
from dataloader._cli import scan
from dataloader.columnar import write_parquet_shards
from tests._fixtures_images import make_image_folder

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("DATALOADER_ERROR_LOG", None)
    return subprocess.run(
        [sys.executable, "-m", "dataloader", "doctor", *args], capture_output=True, text=True, timeout=120, env=env
    )


def image_folder(root: Path, count: int = 20) -> Path:
    """``count`` real images in root/{cat,dog}: JPEGs and PNGs of a few sizes."""
    rng = np.random.default_rng(0)
    for index in range(count):
        folder = root / ("cat" if index % 2 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        image = rng.integers(0, 256, (8 + index, 12, 3), dtype=np.uint8)  # sizes differ: no stacking
        Image.fromarray(image).save(folder / f"{index:02d}.{'png' if index % 3 == 0 else 'jpg'}")
    return root


def corrupt(root: Path) -> list[str]:
    """Three bad files among the good ones: a truncated JPEG, an empty file, text named .jpg."""
    good = (root / "cat" / "01.jpg").read_bytes()
    (root / "cat" / "05.jpg").write_bytes(good[: len(good) // 3])
    (root / "dog" / "08.jpg").write_bytes(b"")
    (root / "dog" / "10.jpg").write_text("this is not an image\n")
    return [str(root / "cat" / "05.jpg"), str(root / "dog" / "08.jpg"), str(root / "dog" / "10.jpg")]


def table_indices(stdout: str) -> list[int]:
    """The index column of the failures table."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"index\s+stage\s+error\s+message", line))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(int(line.split()[0]))
    return rows


def test_a_folder_with_corrupt_images_exits_1_and_names_them(tmp_path):
    root = image_folder(tmp_path / "images")
    bad_files = corrupt(root)
    folder = ImageFolder(root)
    bad = sorted(i for i in range(len(folder)) if folder.path(i) in bad_files)
    assert len(bad) == 3 and len(folder) == 20
    log = tmp_path / "logs" / "bad.jsonl"
    result = run_cli("--scan", str(root), "--workers", "2", "--error-log", str(log), "--batch-size", "4")
    assert result.returncode == 1, result.stdout + result.stderr
    assert table_indices(result.stdout) == bad
    for index in bad:
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"{index} "))
        assert "fetch" in line and "ImageDecodeError" in line and folder.path(index) in line
    assert f"3 of 20 samples failed; each is a JSON line in {log}" in result.stdout
    assert "scanning" in result.stderr and "failed=3" in result.stderr  # the progress bar
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 3
    assert sorted(r["index"] for r in records) == bad
    assert {r["stage"] for r in records} == {"fetch"} and {r["action"] for r in records} == {"skipped"}
    assert {r["error"] for r in records} == {"ImageDecodeError"}
    assert all(r["worker"] in (0, 1) for r in records)


def test_a_clean_folder_exits_0(tmp_path):
    root = make_image_folder(tmp_path / "images")  # JPEGs, a grayscale PNG, a 16-bit PNG
    result = run_cli("--scan", str(root), "--workers", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 of 9 samples failed" in result.stdout
    assert "index" not in result.stdout


def test_parquet_rows_are_decoded_to_find_corrupt_images(tmp_path, capsys):
    root = image_folder(tmp_path / "images")
    corrupt(root)
    folder = ImageFolder(root)
    dest = tmp_path / "parquet"
    # The rows convert writes, but with the bad files in them: convert itself refuses those.
    paths = [folder.path(i) for i in range(len(folder))]
    rows = {"image": [Path(p).read_bytes() for p in paths], "label": folder.labels, "path": paths}
    write_parquet_shards(rows, dest, 8, compression="none")
    log = tmp_path / "parquet.jsonl"
    assert scan.scan(str(dest), 0, 64, str(log)) == 1
    out = capsys.readouterr().out
    bad = table_indices(out)
    assert [os.path.basename(folder.path(i)) for i in bad] == ["05.jpg", "08.jpg", "10.jpg"]
    assert "3 of 20 samples failed" in out and "DecodeImage" in out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["index"] for r in records] == bad and {r["stage"] for r in records} == {"transform"}


def test_a_path_that_is_no_dataset_exits_2(tmp_path):
    result = run_cli("--scan", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr
    (tmp_path / "file.txt").write_text("x")
    result = run_cli("--scan", str(tmp_path / "file.txt"))
    assert result.returncode == 2 and "neither a directory nor a Parquet file" in result.stderr


class _Aborts(Dataset):
    """Index 6 kills its worker; index 2 raises."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> np.ndarray:
        if index == 6:
            os.kill(os.getpid(), signal.SIGKILL)  # as a crash in native code would (without a core dump)
        if index == 2:
            raise ValueError("bad sample 2")
        return np.zeros(3)


@pytest.mark.skipif(sys.platform != "linux", reason="kills a forked worker")
def test_a_sample_that_kills_its_worker_is_listed_and_the_scan_goes_on(monkeypatch, capsys):
    monkeypatch.setattr(scan, "open_dataset", lambda path: (_Aborts(), None, "a test dataset"))
    assert scan.scan("unused", 2, 4, None) == 1
    out = capsys.readouterr().out
    assert "the scan stopped" not in out
    assert re.search(r"^\s*6\s+fetch\s+WorkerDiedError\b", out, re.M), out
    assert re.search(r"^\s*2\s+fetch\s+ValueError\b", out, re.M), out
    assert re.search(r"^2 of 16 samples failed$", out, re.M), out


def test_without_an_image_library_the_scan_refuses_instead_of_blaming_every_file(tmp_path, monkeypatch, capsys):
    import importlib.util

    root = make_image_folder(tmp_path / "images")
    find_spec = importlib.util.find_spec
    missing = ("cv2", "PIL")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else find_spec(name, *a))
    assert scan.scan(str(root), 0, 64, None) == 2
    assert "pip install 'dataloader[vision]'" in capsys.readouterr().err


# A folder no one can create, root included (os.access says yes to root there; mkdir does not).
_UNCREATABLE = "/proc/no-such-folder/bad.jsonl"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_error_log_in_an_uncreatable_folder_is_refused_before_the_scan(tmp_path, monkeypatch, capsys):
    from dataloader.__main__ import main

    root = image_folder(tmp_path / "images", count=4)
    monkeypatch.delenv("DATALOADER_ERROR_LOG", raising=False)
    with pytest.raises(SystemExit) as stop:
        main(["doctor", "--scan", str(root), "--workers", "0", "--error-log", _UNCREATABLE])
    captured = capsys.readouterr()
    assert stop.value.code == 2 and "scanning" not in captured.out
    assert (f"argument --error-log: cannot write {_UNCREATABLE!r}: cannot create the folder "
            "'/proc/no-such-folder': ") in captured.err
    monkeypatch.setenv("DATALOADER_ERROR_LOG", _UNCREATABLE)  # the variable is tried too
    assert main(["doctor", "--scan", str(root), "--workers", "0"]) == 2
    captured = capsys.readouterr()
    assert "scanning" not in captured.out
    assert captured.err.startswith(f"python -m dataloader doctor: error: DATALOADER_ERROR_LOG: cannot write "
                                   f"{_UNCREATABLE!r}")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (every write to it: ENOSPC)")
def test_a_log_that_could_not_be_written_is_not_claimed(tmp_path, caplog, capsys):
    root = image_folder(tmp_path / "images", count=4)
    (root / "cat" / "01.jpg").write_text("not an image")
    with caplog.at_level("WARNING", logger="dataloader"):
        assert scan.scan(str(root), 0, 64, "/dev/full") == 1
    out = capsys.readouterr().out
    assert "each is a JSON line" not in out
    assert "1 of 4 samples failed; the error log /dev/full could not be written (see the warning above)" in out
    assert "the error log '/dev/full' cannot be written (ENOSPC" in caplog.text


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (every write to it: ENOSPC)")
def test_past_the_listed_failures_a_log_that_could_not_be_written_is_not_claimed(tmp_path, monkeypatch, capsys):
    from dataloader import _failure_book

    monkeypatch.setattr(_failure_book, "KEPT", 1)  # stats() keeps the first record only
    monkeypatch.setattr(scan, "_LISTED", 1)
    root = image_folder(tmp_path / "images", count=4)
    for name in ("01.jpg", "03.png"):
        (root / "cat" / name).write_text("not an image")
    assert scan.scan(str(root), 0, 64, "/dev/full") == 1
    out = capsys.readouterr().out
    assert "... and 1 more (the first 1 are listed; --error-log PATH writes every one)" in out
    assert "the error log has every one" not in out
