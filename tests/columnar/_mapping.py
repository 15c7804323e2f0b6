"""Whether a file is memory-mapped in the process reading it (Linux's ``/proc/self/maps``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataloader.transform import Transform

MAPS = Path("/proc/self/maps")
needs_maps = pytest.mark.skipif(not MAPS.exists(), reason="needs Linux's /proc/self/maps")


def is_mapped(path: str) -> bool:
    """Whether ``path`` is memory-mapped in this process now."""
    return str(path) in MAPS.read_text()


class TellsIfMapped(Transform):
    """Adds to each row (a dict) whether ``path`` is memory-mapped in the process reading it."""

    def __init__(self, path: str) -> None:
        self.path = str(path)

    def apply(self, row: dict) -> dict:
        return {**row, "mapped": is_mapped(self.path)}
