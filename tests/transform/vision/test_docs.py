"""The Python examples of docs/vision.md run and print what their comments say."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "vision.md"


def test_examples_run_and_print_what_they_claim():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 3
    namespace: dict = {}
    for block in blocks:
        if 'ImageFolder("train/")' in block:  # no-test: needs an image folder (see test_image_folder)
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, str(DOC), "exec"), namespace)
        claimed = [line.split("#")[1].strip().removeprefix("-> ") for line in block.splitlines()
                   if "print(" in line and "#" in line]
        printed = [line.strip() for line in out.getvalue().splitlines()]
        for claim, line in zip(claimed, printed):
            assert line == claim.split(" ...")[0], (claim, line)
