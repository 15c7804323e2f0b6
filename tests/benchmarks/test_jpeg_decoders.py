"""benchmarks.jpeg_decoders (``python -m benchmarks.jpeg_decoders``): it runs, times every decoder
that imports at three scales, and compares the fused crop with the two-step one."""

import pytest

pytest.importorskip("cv2")

from benchmarks import jpeg_decoders as bench  # noqa: E402


def test_each_set_has_decoder_rows_and_the_fused_comparison(capsys):
    assert bench.main(["--sets", "1280,256", "--images", "2", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("| OpenCV 1/1 |") == 2 and out.count("| OpenCV 1/4 |") == 2
    assert out.count("| Pillow 1/2 |") == 2  # Pillow comes with the vision extra
    assert "not measured: PyTurboJPEG: give --turbojpeg-lib PATH" in out
    assert out.count("DecodeRandomResizedCrop(224):") == 2
    # 1280x960 windows decode reduced (a PSNR line); 256x256 ones never do.
    assert "PSNR of the fused output" in out and "no window decoded reduced" in out
