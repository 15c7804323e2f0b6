"""docs/scale-out.md's complete example runs, where Ray is installed.

tests/test_docs.py does not run its blocks (they are marked ``no-test: ...``: the core suite has no
Ray); the ones marked ``ray-example`` as well run here, as one script in a fresh interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'dataloader[ray]'")
pytest.importorskip("cv2", reason="the example decodes JPEGs with OpenCV: pip install '.[vision]'")

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(
    r"^<!-- ray-example -->\n<!-- no-test: [^\n]* -->\n```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M
)


def test_the_complete_example_runs(tmp_path):
    blocks = _BLOCK.findall((ROOT / "docs" / "scale-out.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    script = tmp_path / "example.py"
    script.write_text("".join(blocks), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("epoch 1:") == 3  # one process, then each of the two ranks
