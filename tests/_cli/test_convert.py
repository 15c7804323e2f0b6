"""python -m dataloader convert: an ImageFolder and an .npz file as Parquet shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dataloader import ImageFolder
from dataloader._cli import convert
from dataloader.columnar import _writer
from dataloader.columnar._to_arrow import fixed_shapes
from tests._fixtures_images import make_image_folder

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "dataloader", "convert", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_an_image_folder_becomes_encoded_bytes_labels_and_paths(tmp_path):
    root = make_image_folder(tmp_path / "images")
    dest = tmp_path / "parquet"
    result = run_cli(str(root), str(dest), "--rows-per-shard", "4", "--row-group-size", "3")
    assert result.returncode == 0, result.stderr
    folder = ImageFolder(root)
    assert len(folder) == 9
    assert sorted(p.name for p in dest.iterdir()) == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    table = pq.read_table(dest)
    assert table.column_names == ["image", "label", "path"]
    assert [str(f.type) for f in table.schema] == ["binary", "int32", "string"]
    assert json.loads(table.schema.metadata[b"dataloader.classes"]) == ["cat", "dog"]
    rows = table.to_pylist()
    for index, row in enumerate(rows):
        assert row["path"] == os.path.relpath(folder.path(index), root).replace(os.sep, "/")
        assert row["image"] == Path(folder.path(index)).read_bytes()  # the file's bytes, not decoded
        assert row["label"] == folder.labels[index]
    assert "cat/nested/5.jpg" in [row["path"] for row in rows]
    assert _codecs(dest) == {"UNCOMPRESSED"}  # encoded images are not compressed again
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("9 rows in 3 shard(s),") and "KiB, in " in summary and str(dest) in summary
    assert "row" in result.stderr  # the progress bar


def test_an_npz_file_becomes_one_column_per_array(tmp_path):
    arrays = {
        "label": np.arange(10, dtype=np.int32),
        "x": np.random.default_rng(0).random((10, 2, 3)).astype(np.float32),
        "name": np.array([f"item{i}" for i in range(10)]),
    }
    np.savez(tmp_path / "data.npz", **arrays)
    result = run_cli(str(tmp_path / "data.npz"), str(tmp_path / "out"), "--compression", "none")
    assert result.returncode == 0, result.stderr
    table = pq.read_table(tmp_path / "out")
    assert table.column_names == ["label", "x", "name"]
    assert table.column("label").to_pylist() == list(range(10))
    assert fixed_shapes(table.schema) == {"x": (2, 3)}
    x = table.column("x").combine_chunks().flatten().flatten().to_numpy().reshape(10, 2, 3)
    assert np.array_equal(x, arrays["x"])
    assert table.column("name").to_pylist() == arrays["name"].tolist()
    assert result.stdout.strip().startswith("10 rows in 1 shard(s)")
    assert _codecs(tmp_path / "out") == {"UNCOMPRESSED"}


def test_npz_columns_are_zstd_compressed_by_default(tmp_path):
    np.savez(tmp_path / "data.npz", x=np.zeros(100, dtype=np.float32))
    result = run_cli(str(tmp_path / "data.npz"), str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert _codecs(tmp_path / "out") == {"ZSTD"}


def _codecs(directory: Path) -> set[str]:
    """The compression of every column chunk of every shard in ``directory``."""
    found = set()
    for shard in directory.iterdir():
        meta = pq.ParquetFile(shard).metadata
        for group in range(meta.num_row_groups):
            found |= {meta.row_group(group).column(c).compression for c in range(meta.num_columns)}
    return found


def test_help_lists_every_option():
    result = run_cli("--help")
    assert result.returncode == 0
    for option in ("SOURCE", "DEST", "--rows-per-shard", "--row-group-size", "--compression", "--overwrite", "--kind"):
        assert option in result.stdout
    assert "convert" in run_cli_main_help()


def run_cli_main_help() -> str:
    return subprocess.run([sys.executable, "-m", "dataloader", "--help"], capture_output=True, text=True, timeout=60).stdout


def test_existing_shards_need_overwrite_and_errors_exit_2(tmp_path):
    root = make_image_folder(tmp_path / "images")
    dest = tmp_path / "out"
    assert run_cli(str(root), str(dest)).returncode == 0
    again = run_cli(str(root), str(dest))
    assert again.returncode == 2 and "already holds 1 shard(s)" in again.stderr and "overwrite" in again.stderr
    assert run_cli(str(root), str(dest), "--overwrite").returncode == 0
    (tmp_path / "notes.txt").write_text("x")
    unknown = run_cli(str(tmp_path / "notes.txt"), str(tmp_path / "x"))
    assert unknown.returncode == 2 and "--kind" in unknown.stderr


@pytest.mark.parametrize(
    "arrays,match",
    [
        ({"a": np.arange(3), "b": np.arange(4)}, "arrays of one length"),
        ({"a": np.array(5)}, "arrays of one length"),
        ({"a": np.array([object(), 1], dtype=object)}, "without pickle"),
    ],
)
def test_npz_files_that_are_not_tables_are_refused(tmp_path, arrays, match, capsys):
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    args = type("Args", (), {"source": str(path), "dest": str(tmp_path / "out"), "kind": None, "rows_per_shard": None,
                             "row_group_size": None, "compression": None, "overwrite": False})
    assert convert.run(args) == 2
    assert match in capsys.readouterr().err


def test_a_npy_file_given_as_npz_is_refused(tmp_path, capsys):
    np.save(tmp_path / "a.npy", np.arange(3))
    args = type("Args", (), {"source": str(tmp_path / "a.npy"), "dest": str(tmp_path / "out"), "kind": "npz",
                             "rows_per_shard": None, "row_group_size": None, "compression": None, "overwrite": False})
    assert convert.run(args) == 2
    assert "a .npy file" in capsys.readouterr().err


def test_the_cli_offers_the_writers_codecs():
    assert convert.COMPRESSIONS == _writer.COMPRESSIONS


@pytest.mark.parametrize("where", ["same", "inside", "nested"])
def test_dest_in_the_source_folder_is_refused_before_the_progress_bar(where, tmp_path):
    root = make_image_folder(tmp_path / "images")
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    dest = {"same": root, "inside": root / "parquet", "nested": root / "cat" / ".." / "out"}[where]
    result = run_cli(str(root), str(dest))
    assert result.returncode == 2
    assert result.stderr.startswith(f"python -m dataloader convert: error: DEST {str(dest)!r} is SOURCE ")
    assert "writing Parquet" not in result.stderr and result.stderr.count("\n") == 1
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written there


@pytest.mark.parametrize("dest,message", [
    ("", "DEST is an empty string"),
    ("{file}", "is a file; give a directory"),
    ("{file}/sub", "cannot create DEST"),
])
def test_dest_that_cannot_be_a_directory_is_refused_first(dest, message, tmp_path):
    root = make_image_folder(tmp_path / "images")
    (tmp_path / "file").write_text("x")
    result = run_cli(str(root), dest.format(file=tmp_path / "file"))
    assert result.returncode == 2 and message in result.stderr
    assert "writing Parquet" not in result.stderr and result.stderr.count("\n") == 1


def test_existing_shards_are_refused_before_the_progress_bar(tmp_path):
    root = make_image_folder(tmp_path / "images")
    assert run_cli(str(root), str(tmp_path / "out")).returncode == 0
    again = run_cli(str(root), str(tmp_path / "out"))
    assert again.returncode == 2 and "already holds 1 shard(s)" in again.stderr
    assert "writing Parquet" not in again.stderr


@pytest.mark.parametrize("bad", [b"", b"this is not an image\n"])
def test_an_image_that_does_not_decode_fails_naming_the_file(bad, tmp_path):
    root = make_image_folder(tmp_path / "images")
    (root / "dog" / "bad.jpg").write_bytes(bad)
    result = run_cli(str(root), str(tmp_path / "out"))
    assert result.returncode == 2, result.stdout
    error = result.stderr.splitlines()[-1]
    assert error.startswith("python -m dataloader convert: error: ")
    assert repr(str(root / "dog" / "bad.jpg")) in error and "doctor --scan" in error and "--overwrite" in error
    assert "Traceback" not in result.stderr and not list((tmp_path / "out").glob("*.parquet"))


def test_no_decode_check_writes_undecodable_bytes_but_not_empty_files(tmp_path):
    root = make_image_folder(tmp_path / "images")
    (root / "dog" / "bad.jpg").write_bytes(b"this is not an image\n")
    result = run_cli(str(root), str(tmp_path / "out"), "--no-decode-check")
    assert result.returncode == 0, result.stderr
    assert pq.read_table(tmp_path / "out").num_rows == 10
    (root / "dog" / "empty.jpg").write_bytes(b"")
    result = run_cli(str(root), str(tmp_path / "out"), "--no-decode-check", "--overwrite")
    assert result.returncode == 2 and "is empty (0 bytes)" in result.stderr


def test_an_npz_of_no_rows_is_refused_before_the_progress_bar(tmp_path):
    np.savez(tmp_path / "data.npz", x=np.zeros((0, 3), dtype=np.float32))
    result = run_cli(str(tmp_path / "data.npz"), str(tmp_path / "out"))
    assert result.returncode == 2 and "length 0" in result.stderr
    assert "writing Parquet" not in result.stderr


def test_format_tar_writes_an_image_folder_as_webdataset_shards(tmp_path):
    from dataloader import TarStream

    root = make_image_folder(tmp_path / "images")
    dest = tmp_path / "tar"
    result = run_cli(str(root), str(dest), "--format", "tar", "--rows-per-shard", "4")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.glob("*.tar")) == ["part-00000.tar", "part-00001.tar", "part-00002.tar"]
    assert result.stdout.strip().splitlines()[-1].startswith("9 samples in 3 tar shard(s),")
    folder = ImageFolder(root)
    assert json.loads((dest / "classes.json").read_text()) == list(folder.classes)
    rows = list(TarStream(dest))
    assert len(rows) == len(folder)
    for index, row in enumerate(rows):
        relative = os.path.relpath(folder.path(index), root).replace(os.sep, "/")
        stem, extension = relative.rsplit(".", 1)
        assert row["__key__"] == stem and row["cls"] == folder.labels[index]
        assert row[extension] == Path(folder.path(index)).read_bytes()
    again = run_cli(str(root), str(dest), "--format", "tar")
    assert again.returncode == 2 and "already holds 3 tar shard(s)" in again.stderr and "--overwrite" in again.stderr
    parquet_only = run_cli(str(root), str(tmp_path / "t2"), "--format", "tar", "--compression", "zstd")
    assert parquet_only.returncode == 2 and "--compression apply to Parquet shards only" in parquet_only.stderr


@pytest.mark.parametrize("content,said", [(b"hello\n", "its first bytes are b'hello\\n'"), (b"", "it is empty")])
def test_a_file_named_npz_that_is_no_archive_is_refused_as_such(content, said, tmp_path, capsys):
    """np.load reads anything but a zip or .npy as a pickle: the refusal used to say the file
    "contains pickled data"."""
    from dataloader.__main__ import main

    source = tmp_path / "x.npz"
    source.write_bytes(content)
    assert main(["convert", str(source), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (f"python -m dataloader convert: error: SOURCE {str(source)!r} is not an .npz (zip) archive: "
                   f"{said}. Save the arrays with np.savez(path, name=array, ...), or give an ImageFolder "
                   "directory.\n")
    assert not (tmp_path / "out").exists()


def test_a_dest_uri_that_cannot_be_reached_is_one_line_with_the_fix(tmp_path, monkeypatch, capsys):
    """A URI without a bucket goes to fsspec's s3fs, whose botocore raises NoCredentialsError
    (no OSError): it used to be a raw traceback."""
    from dataloader.__main__ import main

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credentials from an instance either
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    np.savez(tmp_path / "data.npz", x=np.arange(4))
    assert main(["convert", str(tmp_path / "data.npz"), "s3:///x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m dataloader convert: error: cannot reach DEST 's3:///x': NoCredentialsError: ")
    assert err.endswith("Check the URI (bucket, and for a server of your own ?endpoint_override=HOST:PORT), the "
                        "network and the credentials; or convert into a local directory and copy the shards.\n")
    assert err.count("\n") == 1 and "Traceback" not in err
