"""The decode bench: a tiny run end to end (our contenders; each peer runs or says why not),
its image sets, its crop window, its child runs and its report on made-up runs."""

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import decode as d
from benchmarks import decode_data as data
from benchmarks.decode_contenders import BY_NAME, CONTENDERS, OURS, RATIO, SCALE, UNFUSED, random_box
from tests._cli.test_cli_doc import parser_of

ROOT = Path(__file__).resolve().parents[2]

# The images are written with OpenCV, which the test extra installs below Python 3.14 only.
needs_cv2 = pytest.mark.skipif(importlib.util.find_spec("cv2") is None,
                               reason="the bench writes its JPEGs with OpenCV, not installed here")


@needs_cv2
def test_a_tiny_run_reports_our_contenders_and_why_each_peer_did_not_run(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.decode", "--quick", "--images", "64", "--workers", "0,2",
         "--data", str(tmp_path / "data"), "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    ran = {row["contender"] for row in result["rows"]}
    for contender in CONTENDERS:  # each ran, or the output says why not
        assert (contender.name in ran) != (f"skipped {contender.name}: " in done.stdout), contender.name
    assert UNFUSED in ran  # today's path needs OpenCV only
    for row in result["rows"]:
        assert row["images_per_s"] > 0 and row["cpu_ms_per_image"] >= 0 and not row["failed"], row
    for run in result["runs"]:  # 32 images of 224x224, HWC or CHW
        assert run["shape"] in ([32, 224, 224, 3], [32, 3, 224, 224]), run
    assert {(t["set"], t["workers"]) for t in result["targets"]} == {("256", 0), ("256", 2)}
    by_column = {(row["contender"], row["workers"]) for row in result["rows"]}
    if "ours-auto" in ran:  # num_workers="auto" has a W=0 column of its own, and only that
        assert ("ours-auto", 0) in by_column and ("ours-auto", 2) not in by_column
    assert all(t["verdict"] in ("met", "not met", "-") for t in result["targets"])
    described = result["sets"]["256"]
    assert (described["images"], described["width"], described["height"]) == (64, 256, 256)
    assert "set 256: 256x256, 64 images" in done.stdout and "ours / ours-unfused" in done.stdout


@needs_cv2
def test_a_set_is_written_once_in_imagefolder_layout_and_the_same_every_time(tmp_path):
    small = data.ImageSet("tiny", 48, 64, 1.0)
    root = data.ensure_set(small, 6, tmp_path)
    paths = data.files(root)
    assert [p.relative_to(root).as_posix() for p in paths] == [
        "class0/0.jpg", "class0/4.jpg", "class1/1.jpg", "class1/5.jpg", "class2/2.jpg", "class3/3.jpg"]
    stamp = paths[0].stat().st_mtime_ns
    assert data.ensure_set(small, 6, tmp_path) == root and paths[0].stat().st_mtime_ns == stamp  # reused
    assert paths[5].read_bytes() == data.encode(data.photo(small, 3))  # seeded by size and number
    assert data.encode(data.photo(small, 1)) != data.encode(data.photo(small, 2))
    (root / "class0" / "0.jpg").unlink()
    with pytest.raises(RuntimeError, match="does not hold the 6 images"):
        data.ensure_set(small, 6, tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial folder left


@needs_cv2
def test_the_images_compress_as_photos_do_at_quality_90(tmp_path):
    for name, low, high in (("256", 2.0, 3.2), ("500", 2.0, 3.0)):
        described = data.describe(data.ensure_set(data.SETS[name], 4, tmp_path))
        assert low < described["bits_per_pixel"] < high, (name, described)


def test_the_crop_window_has_randomresizedcrops_area_and_ratio():
    rng = random.Random(0)
    for height, width in ((256, 256), (375, 500), (960, 1280), (40, 300)):
        for _ in range(200):
            top, left, h, w = random_box(height, width, rng)
            assert 0 <= top <= height - h and 0 <= left <= width - w and h > 0 and w > 0
            if (h, w) != (height, width) and top == (height - h) // 2 and left == (width - w) // 2:
                continue  # the central fallback
            assert SCALE[0] * 0.95 <= h * w / (height * width) <= SCALE[1] * 1.05
            assert RATIO[0] * 0.9 <= w / h <= RATIO[1] * 1.1
    assert random_box(10, 1000, _Never()) == (0, 493, 10, 13)  # a strip: the widest window in range


class _Never(random.Random):
    """Draws an area no window fits in, so the central fallback is taken."""

    def uniform(self, a: float, b: float) -> float:
        return 50.0 if a == SCALE[0] else 0.0


def _runs(rates):
    return [d.Run(name, workers, contender, rep, rate, 1.0, 2.0, [32, 224, 224, 3])
            for (name, workers, contender), per_rep in rates.items() for rep, rate in enumerate(per_rep)]


def test_summarize_pairs_ratios_within_a_repetition_and_judges_the_targets():
    runs = _runs({("1280", 2, OURS): [300, 200, 330], ("1280", 2, UNFUSED): [150, 200, 200],
                  ("1280", 2, "torch"): [100, 400, 100], ("1280", 2, "tf.data"): [250, 100, 300]})
    rows, targets = d.summarize(runs)
    torch = next(r for r in rows if r["contender"] == "torch")
    assert torch["images_per_s"] == 100 and torch["ours_over"] == pytest.approx(3.0)  # of 3, 0.5, 3.3
    verdicts = {t["target"]: (t["verdict"], t["against"]) for t in targets}
    assert verdicts["ours / every peer >= 1"] == ("met", "tf.data")  # the median of 1.2, 2, 1.1
    assert verdicts["ours / ours-unfused >= 1.5"] == ("met", UNFUSED)  # 2, 1, 1.65
    runs[0].images_per_s = 100  # rep 0: 0.67x unfused, 0.4x tf.data
    rows, targets = d.summarize(runs)
    assert {t["target"]: t["verdict"] for t in targets}["ours / ours-unfused >= 1.5"] == "not met"
    assert [t["target"] for t in d.summarize(_runs({("256", 0, OURS): [1]}))[1]] == [
        "ours / every peer >= 1", "ours / ours-unfused"]  # no 1.5x goal off the 1280 set


def test_the_report_shows_each_set_and_notes_skipped_and_failed_contenders():
    runs = _runs({("500", 0, OURS): [300], ("500", 0, "dali"): [150]})
    runs.append(d.Run("500", 0, "grain", 0, error="exit code 1: boom"))
    rows, targets = d.summarize(runs)
    sets = {"500": {"width": 500, "height": 375, "images": 64, "mean_kb": 60.0, "min_kb": 50.0,
                    "max_kb": 70.0, "bits_per_pixel": 2.6}}
    text = d.format_tables(rows, targets, sets, [0], {"spdl": "spdl is not installed"})
    assert "set 500: 500x375, 64 images, 60 KB mean (50-70), 2.60 bits/pixel" in text
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in text.splitlines() if line.startswith("| ")}
    assert table["contender"] == ["layout", "decoder", "W=0 images/s", "ours / it", "CPU ms/image"]
    assert table["dali"][0] == "HWC RGB" and table["dali"][2:] == ["150", "2.00", "2.00"]
    assert table["grain"][2:] == ["failed", "-", "-"] and table["ours"][2:] == ["300", "1.00", "2.00"]
    assert "skipped spdl: spdl is not installed" in text
    assert "failed grain (set 500, 0 workers): exit code 1: boom" in text


def test_a_child_that_hangs_is_killed_and_one_without_a_result_is_reported(tmp_path):
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    result, error = d._child(str(hang), ["x"], timeout=0.5)
    assert result is None and error.startswith("timed out after 0 s (killed)")
    quiet = tmp_path / "quiet"
    quiet.write_text("#!/bin/sh\necho nothing here >&2\nexit 3\n")
    quiet.chmod(0o755)
    assert d._child(str(quiet), ["x"], timeout=30) == (None, "exit code 3: nothing here")


def test_options_quick_defaults_and_refusals(monkeypatch, capsys):
    args = d.parse_args(["--quick"])
    assert (args.sets, d.images_for(args, "256"), args.reps, args.workers) == (["256"], 96, 1, [0, 2])
    args = d.parse_args(["--images", "200", "--python", "tf.data=/opt/py"])
    assert args.sets == ["256", "500", "1280"] and d.images_for(args, "1280") == 200
    assert args.python == {"tf.data": "/opt/py"} and d.images_for(d.parse_args([]), "1280") == 2048
    for argv, said in ((["--images", "8"], "at least 32"), (["--python", "jax=/x"], "NAME=PATH"),
                       (["--sets", "300"], "unknown set(s)"),
                       (["--contenders", "ffcv"], "unknown contender(s)")):
        with pytest.raises(SystemExit):
            d.parse_args(argv)
        assert said in capsys.readouterr().err
    parser = parser_of(lambda: d.parse_args([]), monkeypatch)
    assert not [a.option_strings for a in parser._actions if not a.help]
    assert set(BY_NAME) == {c.name for c in CONTENDERS}
