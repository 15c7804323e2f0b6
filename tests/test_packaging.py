"""The wheel ships the library, not its lab.

A wheel is built (setuptools' own backend, as ``pip wheel`` calls it, ~2 s) from a copy of the
files a build reads, ``benchmarks/`` included, and its file list is checked: no ``benchmarks/``,
no module that runs a peer (``torch.utils.data.DataLoader``, Hugging Face ``datasets``, Ray
outside ``dataloader/raydata/``), and the installed package stays under a size bound.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The package's files, uncompressed: 0.89 MB when dataloader/bench/ moved out to benchmarks/
# (1.04 MB with it); about 1.03 MB with remote data, tar shards and mixing; 1.19 MB with padding,
# length buckets and packing (90 KB of them); 1.29 MB with resuming on another number of ranks and
# weight schedules (about 95 KB); 1.37 MB with PyTorch's worker behaviour in the drop-in (issue 46,
# about 20 KB). Past this bound, look for what does not belong in an install.
MAX_PACKAGE_BYTES = 1_400_000


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "setup.cfg", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("dataloader", "benchmarks"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    build = f"from setuptools import build_meta; print(build_meta.build_wheel({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", build], cwd=source, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return zipfile.ZipFile(out / done.stdout.strip().splitlines()[-1])


def peers_run(path: str, source: str) -> list[str]:
    """What in ``source`` runs a peer loader: an import of ``torch.utils.data.DataLoader``,
    of Hugging Face ``datasets``, or of Ray outside ``dataloader/raydata/``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.data":
            names = [a.name for a in node.names]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            names = [f"import {m}" for m in modules]
        elif isinstance(node, ast.Attribute) and ast.unparse(node) == "torch.utils.data.DataLoader":
            names = ["DataLoader"]
        else:
            continue
        for name in names:
            ray = name in ("import ray",) or name.startswith("import ray.")
            if name == "DataLoader" or name.split(".")[0] == "import datasets" or (
                    ray and not path.startswith("dataloader/raydata/")):
                found.append(f"{path}:{node.lineno}: {name}")
    return found


def test_the_wheel_holds_the_package_and_no_benchmarks(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    top = {name.split("/")[0] for name in names}
    assert "dataloader/__init__.py" in names and "dataloader/_cli/bench.py" in names
    assert top == {"dataloader", *(n for n in top if n.endswith(".dist-info"))}, top
    assert not [n for n in names if "benchmarks" in n or "/bench/" in n or "contender" in n]


def test_no_module_in_the_wheel_runs_a_peer(wheel: zipfile.ZipFile) -> None:
    found = [hit for name in wheel.namelist() if name.endswith(".py")
             for hit in peers_run(name, wheel.read(name).decode("utf-8"))]
    assert not found, f"modules that run a peer loader are in the wheel: {found}"


def test_the_installed_package_stays_small(wheel: zipfile.ZipFile) -> None:
    size = sum(i.file_size for i in wheel.infolist() if i.filename.startswith("dataloader/"))
    assert 100_000 < size < MAX_PACKAGE_BYTES, f"dataloader/ is {size:,} bytes in the wheel"


def test_the_peer_check_catches_what_it_forbids() -> None:
    """The check above is not vacuous: the benchmarks' own contenders fail it."""
    contenders = (ROOT / "benchmarks" / "columnar_contenders.py").read_text(encoding="utf-8")
    assert peers_run("x/columnar_contenders.py", contenders)
    assert peers_run("x/r.py", "import ray.data\n") and not peers_run("dataloader/raydata/_ray.py", "import ray\n")
    assert peers_run("x/h.py", "from datasets import load_dataset\n")
    assert peers_run("x/t.py", "import torch\nloader = torch.utils.data.DataLoader(data)\n")
    assert not peers_run("x/t.py", "from torch.utils.data import IterableDataset\n")
