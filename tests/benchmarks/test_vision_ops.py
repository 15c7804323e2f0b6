"""benchmarks.vision_ops: every peer operation has a row of ours."""

import numpy as np
import pytest

pytest.importorskip("cv2")

from benchmarks import vision_ops  # noqa: E402


def test_peers_cover_the_same_operations():
    assert set(vision_ops.pillow_ops(np.random.default_rng(0))) <= set(vision_ops.ours())
