"""TarStream end to end on real tar files: exactly once over ranks x workers, resume, the index, errors."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, StreamSampler, TarStream, write_tar_shards
from dataloader.columnar._tar_index import TarIndex, index_shard, read_sidecar
from dataloader.columnar._tar_units import TarReader
from dataloader.errors import ArgumentTypeError, ArgumentValueError, DataFileError, SourceChangedError
import pyarrow.fs as pafs
from tests.harness import as_worker, check_loader_resumes

SMALL = settings(max_examples=25, deadline=None)


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_plain(directory: Path, sizes: list[int], first: int = 0) -> int:
    """Shards ``shard-<k>.tar`` written by tarfile (no index), ids ``first..`` in order; the samples."""
    for number, size in enumerate(sizes):
        with tarfile.open(directory / f"shard-{number:02d}.tar", "w", format=tarfile.PAX_FORMAT) as tar:
            for i in range(first, first + size):
                add(tar, f"{i:06d}.cls", str(i).encode())
                add(tar, f"{i:06d}.jpg", bytes([i % 256]) * (i % 7))
        first += size
    return first


def write_indexed(directory: Path, sizes: list[int]) -> int:
    """Shards of ``sizes`` samples written by write_tar_shards (with their .idx), ids 0.. in order."""
    samples = [{"__key__": f"{i:06d}", "cls": i, "jpg": bytes([i % 256]) * (i % 7)} for i in range(sum(sizes))]
    position = 0
    for number, size in enumerate(sizes):  # one call per shard: uneven sizes
        write_tar_shards(samples[position : position + size], directory / f"d{number:02d}")
        position += size
    return position




def ids(items: list) -> list[int]:
    found: list[int] = []
    for item in items:
        found += [int(i) for i in (item.batch["cls"] if hasattr(item, "batch") else [item["cls"]])]
    return found


@SMALL
@given(sizes=st.lists(st.integers(0, 12), min_size=1, max_size=4), world=st.integers(1, 3), workers=st.integers(0, 2),
       batch_size=st.one_of(st.none(), st.integers(1, 5)), shuffle=st.booleans(),
       shuffle_buffer=st.sampled_from([0, 4]), indexed=st.booleans())
def test_every_sample_exactly_once_per_epoch(sizes, world, workers, batch_size, shuffle, shuffle_buffer, indexed):
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        if indexed and all(sizes):
            total = write_indexed(directory, sizes)
        else:
            total = write_plain(directory, sizes)
        for epoch in (0, 1):
            delivered: list[int] = []
            for rank in range(world):
                stream = TarStream(folder, batch_size=batch_size, shuffle=shuffle, shuffle_buffer=shuffle_buffer,
                                   seed=4, world_size=world, rank=rank)
                stream.set_epoch(epoch)
                for worker in range(max(workers, 1)):
                    with as_worker(worker, workers):
                        delivered += ids(list(stream))
            assert sorted(delivered) == list(range(total))


@pytest.mark.parametrize("world, workers, method", [(1, 2, "fork"), (2, 1, "fork"), (1, 2, "spawn")])
def test_loader_workers_read_every_sample_once(tmp_path, world, workers, method):
    total = write_plain(tmp_path, [13, 4, 20, 9])
    delivered = []
    for rank in range(world):
        stream = TarStream(tmp_path, batch_size=4, shuffle=True, shuffle_buffer=6, world_size=world, rank=rank)
        loader = DataLoader(stream, StreamSampler(), num_workers=workers, parallel_stream=True,
                            multiprocessing_context=method)
        batches = list(loader)
        assert all(b["cls"].dtype == np.int64 for b in batches)
        delivered += [int(i) for batch in batches for i in batch["cls"]]
    assert sorted(delivered) == list(range(total))


def test_rows_are_dicts_of_the_decoded_fields_and_batches_are_arrays(tmp_path):
    samples = [
        {"__key__": "a/0", "cls": 3, "txt": "héllo", "json": {"w": [1, 2]}, "jpg": b"\xff\xd8", "id": 9},
        {"__key__": "a/1", "cls": 5, "jpg": b"\x00"},  # no txt, json, id
    ]
    write_tar_shards(samples, tmp_path)
    rows = list(TarStream(tmp_path))
    assert rows == [
        {"__key__": "a/0", "cls": 3, "id": 9, "jpg": b"\xff\xd8", "json": {"w": [1, 2]}, "txt": "héllo"},
        {"__key__": "a/1", "cls": 5, "id": None, "jpg": b"\x00", "json": None, "txt": None},
    ]
    [batch] = list(TarStream(tmp_path, batch_size=2))
    assert batch.batch["cls"].dtype == np.int64 and list(batch.batch["cls"]) == [3, 5]
    assert batch.batch["txt"].dtype == object and list(batch.batch["txt"]) == ["héllo", None]
    assert list(TarStream(tmp_path, decode=False))[0]["cls"] == b"3"
    upper = list(TarStream(tmp_path, decode={"txt": lambda data: data.decode().upper(), "jpg": len}))
    assert (upper[0]["txt"], upper[0]["jpg"], upper[0]["cls"]) == ("HÉLLO", 2, 3)
    chosen = TarStream(tmp_path, columns=["jpg"])
    assert chosen.columns == ["__key__", "jpg"] and list(chosen)[1] == {"__key__": "a/1", "jpg": b"\x00"}


def test_a_field_that_fails_to_decode_names_the_shard_key_and_field(tmp_path):
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        add(tar, "k0.cls", b"7")
        add(tar, "k1.cls", b"seven")
    stream = TarStream(tmp_path)
    with pytest.raises(DataFileError, match=r"field 'cls' of sample 'k1' in '.*s\.tar'"):
        list(stream)


def test_long_names_and_nested_keys_group_as_webdataset_does(tmp_path):
    key = "deep/" + "d" * 120 + "/" + "n" * 130  # beyond ustar's 100 characters: pax headers
    with tarfile.open(tmp_path / "s.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo("deep")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)  # a directory: skipped
        add(tar, f"{key}.seg.png", b"png")
        add(tar, f"{key}.cls", b"1")
        add(tar, "deep/._junk.cls", b"x")  # macOS metadata: skipped
        add(tar, "README", b"no dot: not a sample")
        add(tar, "short.cls", b"2")
    with tarfile.open(tmp_path / "g.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        add(tar, "g" * 150 + ".cls", b"3")
    rows = list(TarStream([str(tmp_path / "s.tar"), str(tmp_path / "g.tar")]))
    assert [(r["__key__"], r["cls"], r["seg.png"]) for r in rows] == [
        (key, 1, b"png"), ("short", 2, None), ("g" * 150, 3, None)
    ]


def test_a_sample_is_one_ranged_read(tmp_path, monkeypatch):
    write_plain(tmp_path, [10, 10])
    reads: list[tuple[int, int]] = []
    original = TarReader._open_file

    class Counting:
        def __init__(self, handle):
            self.handle = handle

        def read_at(self, size, offset):
            reads.append((offset, size))
            return self.handle.read_at(size, offset)

        def close(self):
            self.handle.close()

    monkeypatch.setattr(TarReader, "_open_file", lambda self, fs, path: Counting(original(self, fs, path)))
    got = ids(list(TarStream(tmp_path, world_size=3, rank=1)))  # the end of one shard, the start of the next
    assert got == list(range(got[0], got[0] + len(got))) and got[0] < 10 <= got[-1]
    assert len(reads) == 2


def test_the_sidecar_index_is_the_scanned_index(tmp_path):
    write_tar_shards(({"__key__": f"k{i}", "a": b"x" * i, "b": "y"} for i in range(30)), tmp_path, 11)
    fs = pafs.LocalFileSystem()
    for shard in sorted(tmp_path.glob("*.tar")):
        size = shard.stat().st_size
        sidecar = read_sidecar(fs, str(shard), size)
        assert isinstance(sidecar, TarIndex)
        os.rename(f"{shard}.idx", f"{shard}.off")
        assert index_shard(fs, str(shard), size) == sidecar  # scanned now


def test_a_stale_sidecar_is_ignored_and_the_shard_scanned(tmp_path):
    write_tar_shards([{"__key__": f"old{i}", "cls": i} for i in range(5)], tmp_path)
    shard = tmp_path / "part-00000.tar"
    with tarfile.open(shard, "w") as tar:  # rewritten by another tool; the old .idx stays
        for i in range(8):
            add(tar, f"new{i}.cls", str(i * 10).encode())
    assert [r["__key__"] for r in TarStream(tmp_path)] == [f"new{i}" for i in range(8)]
    Path(f"{shard}.idx").write_text("{not json")
    assert len(list(TarStream(tmp_path))) == 8


def test_a_truncated_or_foreign_shard_is_refused_at_build_naming_it(tmp_path):
    write_plain(tmp_path, [6])
    shard = tmp_path / "shard-00.tar"
    whole = shard.read_bytes()
    end = index_shard(pafs.LocalFileSystem(), str(shard), len(whole)).end
    for cut in (700, 1024 + 512, end, end + 100):  # in a member's data, at a header, before and in the end block
        shard.write_bytes(whole[:cut])
        with pytest.raises(ArgumentValueError, match=r"cannot read '.*shard-00\.tar' as a tar shard"):
            TarStream(tmp_path)
    shard.write_bytes(b"PK\x03\x04 not a tar at all" * 40)
    with pytest.raises(ArgumentValueError, match="shard-00.tar"):
        TarStream(tmp_path)


def test_data_after_the_end_of_archive_is_refused_and_zero_padding_of_any_length_is_read(tmp_path):
    """A scan stops at tar's end-of-archive marker: the samples of a second tar joined on with
    `cat` were dropped without an error. Zeros after the marker (a writer's record padding, any
    blocking factor) are padding; anything else is a DataFileError naming the shard and where."""
    write_plain(tmp_path, [4])
    shard = tmp_path / "shard-00.tar"
    first = shard.read_bytes()
    end = len(first)
    shard.write_bytes(first + bytes(64 * 1024))  # `tar -b 128` pads to 64 KiB records
    assert [int(r["cls"]) for r in TarStream(tmp_path)] == [0, 1, 2, 3]
    write_plain(tmp_path, [3], first=4)
    shard.write_bytes(first + shard.read_bytes())  # `cat a.tar b.tar`: 4 samples, then 3 more
    with pytest.raises(DataFileError, match=rf"cannot index '.*shard-00\.tar': bytes that are not zeros follow "
                                            rf"its end-of-archive marker at byte \d+, from byte {end} of \d+.*--ignore-zeros"):
        TarStream(tmp_path)


@pytest.mark.parametrize("name,compress,command", [
    ("s.tar.gz", "gzip", "gunzip"), ("s.tgz", "gzip", "gunzip"), ("s.tar", "gzip", "gunzip"),
    ("s.tar", "bz2", "bunzip2"), ("s.tar", "lzma", "unxz"),
])
def test_a_compressed_shard_is_named_compressed_not_truncated(tmp_path, name, compress, command):
    """Item 8 of issue 45: a .tar.gz shard was called "truncated" (pyarrow inflated it for the
    index, and the ranged reads then found the compressed bytes). A compressed shard, by any
    name, is a DataFileError at build that names it, its compression and how to undo it."""
    import bz2, gzip, lzma  # noqa: E401

    (tmp_path / "plain").mkdir()
    write_plain(tmp_path / "plain", [3])
    data = (tmp_path / "plain" / "shard-00.tar").read_bytes()
    module = {"gzip": gzip, "bz2": bz2, "lzma": lzma}[compress]
    (tmp_path / name).write_bytes(module.compress(data))
    kind = {"gzip": "gzip", "bz2": "bzip2", "lzma": "xz"}[compress]
    with pytest.raises(DataFileError, match=rf"'.*{name}' is a {kind}-compressed tar, .*`{command} -c FILE > NAME\.tar`"):
        TarStream(str(tmp_path / name))


def test_a_tar_whose_first_member_looks_like_a_magic_number_is_read(tmp_path):
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        add(tar, "BZh.cls", b"1")
        add(tar, "\x1f\x8b.cls", b"2")
    assert [r["cls"] for r in TarStream(tmp_path)] == [1, 2]


def test_keys_that_repeat_apart_are_refused(tmp_path):
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        add(tar, "a.cls", b"1")
        add(tar, "b.cls", b"2")
        add(tar, "a.jpg", b"3")
    with pytest.raises(ArgumentValueError, match=r"'.*s\.tar' is not a WebDataset shard: .* sample 'a'"):
        TarStream(tmp_path)


def test_a_shard_replaced_after_the_build_is_an_error(tmp_path):
    write_plain(tmp_path, [5, 5])
    stream = TarStream(tmp_path)
    assert len(list(stream)) == 10
    replacement = tmp_path / "new"
    replacement.mkdir()
    write_plain(replacement, [7])
    os.replace(replacement / "shard-00.tar", tmp_path / "shard-00.tar")
    with pytest.raises(SourceChangedError, match="shard-00.tar"):
        list(stream)


def test_equal_gives_every_rank_the_same_full_batches(tmp_path):
    total = write_plain(tmp_path, [11, 3, 8])
    counts, seen = [], []
    for rank in range(3):
        stream = TarStream(tmp_path, batch_size=2, equal=True, world_size=3, rank=rank, shuffle=True)
        batches = list(stream)
        counts.append([len(b.batch["cls"]) for b in batches])
        seen += ids(batches)
    assert counts == [[2, 2, 2]] * 3 and len(set(seen)) == 18 and set(seen) <= set(range(total))


@settings(max_examples=12, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3), batch_size=st.integers(1, 4), batched=st.booleans(),
       shuffle=st.booleans(), shuffle_buffer=st.sampled_from([0, 5]), cut=st.integers(0, 100))
def test_a_loader_resumes_mid_epoch_exactly(sizes, batch_size, batched, shuffle, shuffle_buffer, cut):
    with tempfile.TemporaryDirectory() as folder:
        write_plain(Path(folder), sizes)
        options = dict(shuffle=shuffle, seed=3, shuffle_buffer=shuffle_buffer)

        def loader() -> DataLoader:
            if batched:
                return DataLoader(TarStream(folder, batch_size=batch_size, **options), StreamSampler())
            return DataLoader(TarStream(folder, **options), StreamSampler(batch_size))

        check_loader_resumes(loader, "cls", cut)


def test_the_stream_state_resumes_its_own_shard(tmp_path):
    write_plain(tmp_path, [9, 4])
    stream = TarStream(tmp_path, world_size=2, rank=1, shuffle=True, seed=2)
    stream.set_epoch(1)
    whole = ids(list(stream))
    it = iter(stream)
    head = ids([next(it) for _ in range(3)])
    state = stream.state_dict()
    again = TarStream(tmp_path, world_size=2, rank=1, shuffle=True, seed=2)
    again.set_epoch(1)
    again.load_state_dict(state)
    assert {"epoch": 1, "rows": 3}.items() <= state.items() and head + ids(list(again)) == whole


def test_what_tar_shards_cannot_do_is_refused(tmp_path):
    import pyarrow.dataset as ds

    write_plain(tmp_path, [3])
    with pytest.raises(ArgumentValueError, match="TarStream takes no `filter`"):
        TarStream(tmp_path, filter=ds.field("cls") > 1)
    with pytest.raises(ArgumentValueError, match="tar shards carry none"):
        TarStream(tmp_path, verify_checksums=True)
    with pytest.raises(ArgumentTypeError, match="`decode` must be True"):
        TarStream(tmp_path, decode="yes")
    with pytest.raises(ArgumentTypeError, match="TarStream takes no `fill_null`"):
        TarStream(tmp_path, fill_null=0)


def test_brace_patterns_name_the_shards(tmp_path):
    total = write_plain(tmp_path, [3, 4, 5])
    assert ids(list(TarStream(str(tmp_path / "shard-{00..02}.tar")))) == list(range(total))
    assert ids(list(TarStream(str(tmp_path / "shard-{02,00}.tar")))) == list(range(7, 12)) + [0, 1, 2]


def _overwrite_in_place(shard: Path, offset: int, data: bytes) -> None:
    """``data`` written into ``shard`` at ``offset``, its size, inode and modification time kept:
    a change its stamp cannot show (what a cut read or silent damage looks like to a reader)."""
    status = shard.stat()
    with open(shard, "r+b") as file:
        file.seek(offset)
        file.write(data)
    os.utime(shard, ns=(status.st_atime_ns, status.st_mtime_ns))


@pytest.mark.parametrize("sample,damage,message", [
    (0, b"\xff" * 16, r"cannot parse sample 0 of '.*part-00000\.tar' \(at its first sample\): bad checksum\. .*write it again\.$"),
    (1, bytes(512), r"hold 1 samples where its index says 4: .*Delete the \.idx file"),
])
def test_a_local_piece_that_does_not_parse_is_a_data_file_error_read_once(tmp_path, monkeypatch, sample, damage, message):
    """Local files are read once (no retry) and keep their advice; remote ones are read again
    (tests/remote/test_remote_tar.py)."""
    write_tar_shards([{"__key__": f"{i:06d}", "cls": i} for i in range(4)], tmp_path)
    shard = tmp_path / "part-00000.tar"
    stream = TarStream(tmp_path)
    _overwrite_in_place(shard, stream._units.indexes[0].offsets[sample], damage)
    reads = []
    original = TarReader.read
    monkeypatch.setattr(TarReader, "read", lambda self, piece: reads.append(piece) or original(self, piece))
    with pytest.raises(DataFileError, match=message):
        list(stream)
    assert len(reads) == 1
