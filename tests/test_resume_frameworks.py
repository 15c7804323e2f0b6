"""A loader's state goes into the checkpoint a trainer already writes: ``torch.save`` and
``megengine.save`` (each where installed; CI's Python 3.10 job has MegEngine) keep it exact.

Run apart from the hypothesis suites under MegEngine: importing it turns on flush-to-zero.
"""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, RandomSampler


def _loader(num_workers: int) -> DataLoader:
    data = ArrayDataset(np.arange(60))
    return DataLoader(data, RandomSampler(data, batch_size=4, seed=5), num_workers=num_workers, seed=1)


def _resumes_exactly(save, load, path) -> None:
    full = [batch[0].tolist() for batch in _loader(0)]
    first = _loader(0)
    it = iter(first)
    head = [next(it)[0].tolist() for _ in range(6)]
    save({"step": 6, "loader": first.state_dict()}, path)
    it.close()
    restored = _loader(2)
    checkpoint = load(path)
    restored.load_state_dict(checkpoint["loader"])
    assert checkpoint["step"] == 6
    assert head + [batch[0].tolist() for batch in restored] == full


def test_a_state_saved_with_torch_save_resumes_exactly(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is an optional extra")
    _resumes_exactly(torch.save, lambda path: torch.load(path, weights_only=True), tmp_path / "ckpt.pt")


def test_a_state_saved_with_megengine_save_resumes_exactly(tmp_path):
    megengine = pytest.importorskip("megengine", reason="MegEngine installs on Python <= 3.10 only (CI's 3.10 job)")
    _resumes_exactly(megengine.save, megengine.load, str(tmp_path / "ckpt.mge"))  # it takes no Path
