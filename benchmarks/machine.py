"""What the numbers were measured on: CPU, memory, versions and the library's commit."""

from __future__ import annotations

import multiprocessing
import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import psutil

from dataloader.memory import available_cpus

from .measure import read_lines

# The checkout these benchmarks lie in (benchmarks/ -> the repository).
_CHECKOUT = Path(__file__).resolve().parents[1]


def module_version(module: str) -> str | None:
    """``module.__version__``, or None where it cannot be imported."""
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def torch_version() -> str | None:
    """PyTorch's version, or None where it cannot be imported."""
    return module_version("torch")


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = next((line.split(":", 1)[1].strip() for line in read_lines("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    return {
        "cpu": cpu, "cpus": os.cpu_count(), "cpus_available": available_cpus(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(), "python": platform.python_version(),
        "numpy": np.__version__, "torch": torch_version(), "pillow": module_version("PIL"),
        "opencv": module_version("cv2"), "psutil": psutil.__version__,
        "start_method": multiprocessing.get_start_method(),
        "dataloader_commit": _git("rev-parse", "--short", "HEAD"),
        "dataloader_changed_files": len(
            (_git("status", "--porcelain", "dataloader") or "").splitlines()),
    }


def _git(*args: str) -> str | None:
    """git's answer in the checkout holding this package; None outside one (an installed copy)."""
    try:
        done = subprocess.run(["git", *args], cwd=_CHECKOUT, capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
