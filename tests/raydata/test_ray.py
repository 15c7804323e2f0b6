"""Without ray installed, RayStream says which extra to install (runs everywhere)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataloader import ArgumentValueError, RayStream


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(ArgumentValueError, match=r'pip install "dataloader\[ray\]"'):
        RayStream(object())


def test_importing_dataloader_does_not_import_ray():
    code = "import sys, dataloader; dataloader.RayStream; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
