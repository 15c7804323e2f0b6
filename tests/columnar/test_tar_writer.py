"""write_tar_shards: round trips through TarStream, shard cuts, the directory's rules, WebDataset both ways."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import ArrayDataset, TarStream, write_tar_shards
from dataloader.columnar._tar_writer import encode_field
from dataloader.errors import ArgumentTypeError, ArgumentValueError


def samples(count: int) -> list[dict]:
    return [
        {"__key__": f"img/{i:04d}", "jpg": bytes([i % 256]) * (i * 37 % 500), "cls": i % 10,
         "json": {"i": i, "tags": ["a", "b"]}, "txt": f"caption {i} é", "npy": np.arange(i, dtype=np.int16)}
        for i in range(count)
    ]


def test_written_samples_read_back_identical(tmp_path):
    data = samples(45)
    paths = write_tar_shards(data, tmp_path, 10)
    assert [p.rsplit("/", 1)[-1] for p in paths] == [f"part-0000{n}.tar" for n in range(5)]
    assert all((tmp_path / f"part-0000{n}.tar.idx").is_file() for n in range(5))
    assert not (tmp_path / "_WRITE_IN_PROGRESS").exists()
    rows = list(TarStream(tmp_path))
    assert len(rows) == 45
    for row, sample in zip(rows, data):
        assert row["__key__"] == sample["__key__"] and row["jpg"] == sample["jpg"] and row["cls"] == sample["cls"]
        assert row["json"] == sample["json"] and row["txt"] == sample["txt"]
        assert np.array_equal(np.load(io.BytesIO(row["npy"])), sample["npy"])


def test_shards_are_cut_by_bytes_and_keys_default_to_positions(tmp_path):
    dataset = ArrayDataset(np.arange(40, dtype=np.int64))  # tuples, so give dicts through a generator
    write_tar_shards(({"x": int(v[0])} for v in dataset), tmp_path, shard_bytes=4096)
    shards = sorted(tmp_path.glob("*.tar"))
    assert len(shards) > 1
    rows = list(TarStream(tmp_path, decode={"x": int}))
    assert [r["x"] for r in rows] == list(range(40)) and rows[3]["__key__"] == "000000003"


def test_a_missing_value_writes_no_member(tmp_path):
    write_tar_shards([{"__key__": "a", "cls": 1, "txt": None}, {"__key__": "b", "txt": "t"}], tmp_path)
    with tarfile.open(tmp_path / "part-00000.tar") as tar:
        assert tar.getnames() == ["a.cls", "b.txt"]


def test_values_encode_as_webdataset_expects():
    assert encode_field(b"\x00", "k", "bin") == b"\x00"
    assert encode_field(3, "k", "cls") == b"3" and encode_field(np.int64(4), "k", "cls") == b"4"
    assert encode_field(True, "k", "flag") == b"True" and encode_field(0.5, "k", "f") == b"0.5"
    assert json.loads(encode_field({"a": [1]}, "k", "json")) == {"a": [1]}
    assert np.array_equal(np.load(io.BytesIO(encode_field(np.eye(2), "k", "npy"))), np.eye(2))
    with pytest.raises(ArgumentTypeError, match="field 'o' of sample 'k' is a object"):
        encode_field(object(), "k", "o")


def test_bad_samples_and_directories_are_refused(tmp_path):
    with pytest.raises(ArgumentValueError, match="sample 1 has the key 'a', which an earlier sample has"):
        write_tar_shards([{"__key__": "a", "x": 1}, {"__key__": "a", "x": 2}], tmp_path / "dup")
    assert (tmp_path / "dup" / "_WRITE_IN_PROGRESS").exists()  # nothing whole was written
    with pytest.raises(ArgumentValueError, match="without a dot"):
        write_tar_shards([{"__key__": "a.b", "x": 1}], tmp_path / "dot")
    with pytest.raises(ArgumentTypeError, match="writes dict samples"):
        write_tar_shards([(1, 2)], tmp_path / "tuple")
    with pytest.raises(ArgumentValueError, match="holds no samples"):
        write_tar_shards([], tmp_path / "empty")
    write_tar_shards(samples(3), tmp_path / "twice")
    with pytest.raises(ArgumentValueError, match="already holds 1 tar shard"):
        write_tar_shards(samples(3), tmp_path / "twice")
    write_tar_shards(samples(2), tmp_path / "twice", overwrite=True)
    assert len(list(TarStream(tmp_path / "twice"))) == 2
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "other.tar").write_bytes(b"")
    with pytest.raises(ArgumentValueError, match="not shards of write_tar_shards"):
        write_tar_shards(samples(2), tmp_path / "foreign", overwrite=True)


def test_an_unfinished_write_leaves_whole_shards_and_the_marker(tmp_path):
    def failing():
        yield from samples(5)
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke") as caught:
        write_tar_shards(failing(), tmp_path, 2)
    assert "2 whole shard(s)" in " ".join(getattr(caught.value, "__notes__", ["2 whole shard(s)"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "_WRITE_IN_PROGRESS", "part-00000.tar", "part-00000.tar.idx", "part-00001.tar", "part-00001.tar.idx",
    ]
    with pytest.raises(ArgumentValueError, match="write_tar_shards has not finished writing"):
        TarStream(tmp_path)
    with pytest.raises(ArgumentValueError, match="an earlier write to it did not finish"):
        write_tar_shards(samples(5), tmp_path, 2)


def test_shards_written_by_webdataset_read_the_same(tmp_path):
    webdataset = pytest.importorskip("webdataset", reason="webdataset is not installed")
    data = [{"__key__": f"s{i:03d}", "cls": i, "jpg": bytes([i]) * i, "txt": f"t{i}"} for i in range(23)]
    for number, part in enumerate((data[:10], data[10:])):
        with webdataset.TarWriter(str(tmp_path / f"wds-{number}.tar")) as writer:
            for sample in part:
                writer.write(sample)
    rows = list(TarStream(tmp_path))  # no .idx: scanned
    assert [{k: r[k] for k in ("__key__", "cls", "jpg", "txt")} for r in rows] == data


def test_webdataset_reads_shards_written_here(tmp_path):
    webdataset = pytest.importorskip("webdataset", reason="webdataset is not installed")
    data = samples(17)
    paths = write_tar_shards(data, tmp_path, 5)
    theirs = list(webdataset.WebDataset(paths, shardshuffle=False))
    assert [s["__key__"] for s in theirs] == [s["__key__"] for s in data]
    for sample, mine in zip(theirs, data):
        assert sample["jpg"] == mine["jpg"] and int(sample["cls"]) == mine["cls"]
        assert json.loads(sample["json"]) == mine["json"] and sample["txt"].decode() == mine["txt"]


# Keys as write_tar_shards takes them: text with '/'-separated parts, the last without a dot.
_PART = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=30)
_LAST = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/.\x00"), min_size=1, max_size=40)
_KEYS = st.builds(lambda parts, last, root: "/" * root + "/".join([*parts, last]), st.lists(_PART, max_size=2),
                  _LAST, st.integers(0, 1))
_FIELD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1,
                 max_size=20).filter(lambda name: not name.startswith("__"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(_KEYS, min_size=1, max_size=4, unique=True), fields=st.lists(_FIELD, max_size=3, unique=True),
       classes=st.lists(st.one_of(st.integers(-2**70, 2**70), st.integers(-2**63, 2**63 - 1).map(np.int64)),
                        min_size=4, max_size=4))
def test_every_key_and_class_it_accepts_reads_back_equal(tmp_path_factory, keys, fields, classes):
    """Item 8 of issue 45: write_tar_shards wrote keys its reader could not read back (a NUL,
    '//') and cls values it could not decode. Whatever it accepts now reads back the same:
    the key, the int classes, and bytes fields of any name."""
    data = [{"__key__": key, "cls": classes[i], **{f: f"{i}{f}".encode() for f in fields}}
            for i, key in enumerate(keys)]
    directory = tmp_path_factory.mktemp("keys")
    write_tar_shards(data, directory, 3)
    rows = list(TarStream(directory, decode={"cls": int}))  # only cls decoded: the others stay bytes
    assert [r["__key__"] for r in rows] == keys
    assert [r["cls"] for r in rows] == [int(c) for c in classes[: len(keys)]]
    assert [{f: r[f] for f in fields} for r in rows] == [{f: s[f] for f in fields} for s in data]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(st.sampled_from("ab/.\x00\udc80_ \n"), max_size=8),
       cls=st.one_of(st.integers(-5, 5), st.booleans(), st.floats(allow_nan=False), st.text(max_size=2)))
def test_any_key_and_class_read_back_equal_or_are_refused(tmp_path_factory, key, cls):
    """Keys and classes of every kind: write_tar_shards refuses them naming the sample, or they
    read back as they were written (before: 'a\x00b', 'a//b', True and 2.7 were written and read
    back as something else, or not at all)."""
    directory = tmp_path_factory.mktemp("any")
    try:
        write_tar_shards([{"__key__": key, "cls": cls}], directory)
    except (ArgumentValueError, ArgumentTypeError) as error:
        assert "sample 0" in str(error)
        return
    rows = list(TarStream(directory))
    assert [(r["__key__"], r["cls"]) for r in rows] == [(key, cls)]
    assert type(rows[0]["cls"].item()) is type(cls)


@pytest.mark.parametrize("sample,error,message", [
    ({"__key__": "a\x00b", "x": b""}, ArgumentValueError, r"sample 0 has the key 'a\\x00b', which holds a NUL"),
    ({"__key__": "a//b", "x": b""}, ArgumentValueError, "a reader gets back as 'a/b'"),
    ({"__key__": "\udc80", "x": b""}, ArgumentValueError, "lone surrogate"),
    ({"__key__": "k", "x\x00y": b""}, ArgumentValueError, r"\(key 'k'\) has the field name 'x\\x00y', which holds a NUL"),
    ({"__key__": "k", "cls": True}, ArgumentTypeError, r"sample 0 \(key 'k'\) has 'cls' = True, a bool; TarStream"),
    ({"__key__": "k", "cls": 2.7}, ArgumentTypeError, "'cls' = 2.7, a float"),
    ({"__key__": "k", "seg.cls2": "3"}, ArgumentTypeError, "'seg.cls2' = '3', a str"),
    ({"__key__": "k", "id": np.float64(1.0)}, ArgumentTypeError, "'id' = .*, a float64"),
    ({"__key__": "k", "index": np.bool_(True)}, ArgumentTypeError, "'index' = .*, a bool"),
])
def test_keys_and_classes_a_reader_cannot_read_back_are_refused(tmp_path, sample, error, message):
    with pytest.raises(error, match=message):
        write_tar_shards([sample], tmp_path)


def test_a_class_given_as_bytes_or_a_numpy_int_is_written_as_it_is(tmp_path):
    write_tar_shards([{"__key__": "a", "cls": b"7"}, {"__key__": "b", "cls": np.uint8(200)}], tmp_path)
    assert [r["cls"] for r in TarStream(tmp_path)] == [7, 200]
