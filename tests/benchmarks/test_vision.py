"""benchmarks.vision (``python -m benchmarks.vision``): it runs, and prints one table row per
transform; the transforms see one seeded generator per thread, as in a loader."""

import threading

import pytest

pytest.importorskip("cv2")

from dataloader import batch_rng  # noqa: E402
from benchmarks import vision as bench  # noqa: E402
from benchmarks import vision_ops  # noqa: E402


def test_every_transform_has_a_row_and_resize_has_a_peer(capsys):
    assert bench.main(["--seconds", "0.01", "--reps", "1", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(vision_ops.ours())
    resize = next(row for row in rows if row.startswith("| `Resize("))
    assert resize.count("x |") == 1  # a ratio against the peer
    assert ("torchvision" in out) and ("Pillow" in out or "importable:" in out)


def test_the_call_sees_one_seeded_generator_in_its_own_thread():
    def draw() -> tuple:
        rng = batch_rng()
        return rng is batch_rng(), int(rng.integers(1 << 30)), threading.get_ident()

    same, first, thread = bench.with_batch_rng(3, draw)
    assert same and thread == threading.get_ident()
    assert bench.with_batch_rng(3, draw)[1] == first  # the seed fixes the stream
    assert bench.with_batch_rng(4, draw)[1] != first
    assert batch_rng() is not batch_rng()  # and nothing is left installed after it
