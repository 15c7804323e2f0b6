"""dataloader.torch.DataLoader against torch.utils.data.DataLoader: the same script, the same
batches (values, dtypes, order), the same argument errors, and the same draws from torch's
random generator; plus the hint the plain loader gives a torch dataset, and the error that
``import dataloader.torch`` gives without torch."""

import pickle
import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="dataloader.torch is the drop-in for PyTorch: it needs torch")

from torch.utils.data import DataLoader as TorchLoader  # noqa: E402
from torch.utils.data import Dataset, IterableDataset, SubsetRandomSampler, get_worker_info  # noqa: E402

import dataloader  # noqa: E402
from dataloader import FrameworkWarning  # noqa: E402
from dataloader.torch import DataLoader  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Squares(Dataset):
    """(features, label) pairs; PyTorch's default collate makes a list of them, ours a tuple."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i, i * i], dtype=torch.float32), i


class Records(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"x": torch.full((2,), i, dtype=torch.int16), "name": f"s{i}", "weight": i / 2}


class Numbers(IterableDataset):
    """Sharded by the worker's id, with torch's get_worker_info(), as PyTorch users write it."""

    def __iter__(self):
        info = get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(first, 11, step))


def sum_and_names(samples):  # module level: a worker under spawn pickles it
    return torch.stack([s["x"] for s in samples]).sum(0), [s["name"] for s in samples]


def plain(value):
    """``value`` with tensors as (dtype, values) and tuples as lists (PyTorch's default collate
    turns a tuple sample into a list; ours keeps the tuple, as docs/migrating-from-pytorch.md says)."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def run(loader_class, dataset, epochs=2, **kwargs):
    """Two epochs after torch.manual_seed(0), and the next numbers of torch's default generator:
    a loader must draw from it exactly as PyTorch's does, or a training script drifts."""
    torch.manual_seed(0)
    loader = loader_class(dataset, **{k: v() if callable(v) and k == "generator" else v for k, v in kwargs.items()})
    return [plain(list(loader)) for _ in range(epochs)], torch.randn(3).tolist()


def seeded_generator():
    return torch.Generator().manual_seed(7)


def subset_sampler():
    return SubsetRandomSampler([1, 3, 5, 7, 9], generator=torch.Generator().manual_seed(1))


SERIAL_CASES = {
    "default": lambda: (Squares(), {}),
    "batch_size+drop_last": lambda: (Squares(), {"batch_size": 3, "drop_last": True}),
    "shuffle after manual_seed": lambda: (Squares(), {"batch_size": 4, "shuffle": True}),
    "shuffle with generator": lambda: (Squares(), {"batch_size": 3, "shuffle": True, "generator": seeded_generator}),
    "sampler+batch_size": lambda: (Squares(), {"sampler": subset_sampler(), "batch_size": 2}),
    "batch_sampler": lambda: (Squares(), {"batch_sampler": [[1, 2], [0], [9, 8, 7]]}),
    "collate_fn": lambda: (Records(), {"batch_size": 2, "collate_fn": sum_and_names}),
    "dict samples": lambda: (Records(), {"batch_size": 2}),
    "batch_size=None": lambda: (Records(), {"batch_size": None}),
    "iterable dataset": lambda: (Numbers(), {"batch_size": 3}),
}


@pytest.mark.parametrize("case", SERIAL_CASES, ids=list(SERIAL_CASES))
def test_the_same_script_gives_pytorchs_batches(case):
    dataset, kwargs = SERIAL_CASES[case]()
    theirs = run(TorchLoader, dataset, **kwargs)
    dataset, kwargs = SERIAL_CASES[case]()  # a fresh sampler: theirs has run
    assert run(DataLoader, dataset, **kwargs) == theirs


def test_batches_are_tensors_with_pytorchs_dtypes():
    features, labels = next(iter(DataLoader(Squares(), batch_size=4)))
    assert (features.dtype, labels.dtype, features.shape) == (torch.float32, torch.int64, (4, 2))
    record = next(iter(DataLoader(Records(), batch_size=2)))
    assert (record["x"].dtype, record["weight"].dtype, record["name"]) == (torch.int16, torch.float64, ["s0", "s1"])


def test_shuffled_batches_with_persistent_workers_are_pytorchs():
    """Two workers, two epochs: PyTorch draws its base seed once with persistent workers."""
    kwargs = {"batch_size": 3, "shuffle": True, "num_workers": 2, "persistent_workers": True}
    assert run(DataLoader, Squares(), **kwargs) == run(TorchLoader, Squares(), **kwargs)


def test_an_iterable_dataset_is_read_in_each_worker_as_pytorch_reads_it():
    """A copy per worker, sharded by torch's get_worker_info(); batches alternate between
    workers, and each worker drops its own short last batch."""
    kwargs = {"batch_size": 2, "drop_last": True, "num_workers": 2}
    ours = run(DataLoader, Numbers(), epochs=1, **kwargs)
    assert ours == run(TorchLoader, Numbers(), epochs=1, **kwargs)
    assert [ids for _, ids in ours[0][0]] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10]]  # not [9]


class WhoMadeMe(Dataset):
    """Each sample says which worker made it, as torch's get_worker_info() and worker_init_fn saw it."""

    init_id = None

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([get_worker_info().id, self.init_id])


def note_worker(worker_id):
    get_worker_info().dataset.init_id = worker_id


def test_worker_init_fn_gets_the_worker_id_that_get_worker_info_reports():
    loader = DataLoader(WhoMadeMe(), batch_size=2, num_workers=2, worker_init_fn=note_worker)
    pairs = {tuple(row) for batch in loader for row in batch.tolist()}
    assert pairs == {(0, 0), (1, 1)}


@pytest.mark.parametrize("kwargs", [
    {"batch_sampler": [[0]], "batch_size": 2},
    {"batch_sampler": [[0]], "shuffle": True},
    {"batch_sampler": [[0]], "drop_last": True},
    {"batch_sampler": [[0]], "sampler": [0]},
    {"sampler": [0], "shuffle": True},
    {"batch_size": None, "drop_last": True},
    {"prefetch_factor": 2},
    {"persistent_workers": True},
    {"num_workers": -1},
    {"timeout": -1},
], ids=str)
def test_conflicting_options_raise_valueerror_as_pytorchs_do(kwargs):
    with pytest.raises(ValueError):
        TorchLoader(Squares(), **kwargs)
    with pytest.raises(ValueError):
        DataLoader(Squares(), **kwargs)


@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}], ids=str)
def test_an_iterable_dataset_refuses_an_order_as_pytorchs_does(kwargs):
    with pytest.raises(ValueError):
        TorchLoader(Numbers(), **kwargs)
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Numbers(), **kwargs)


def test_options_it_decides_are_refused_and_ours_pass_through():
    with pytest.raises(ValueError, match=r"decides framework itself"):
        DataLoader(Squares(), framework="numpy")
    loader = DataLoader(Squares(), batch_size=5, seed=3, on_error="skip")
    assert (loader.options.seed, loader.options.on_error, len(loader)) == (3, "skip", 2)
    assert isinstance(loader, dataloader.DataLoader)


def test_it_reads_back_pytorchs_attributes():
    loader = DataLoader(Squares(), batch_size=4, shuffle=True, num_workers=2)
    assert type(loader.sampler).__name__ == "RandomSampler" and loader.batch_sampler.batch_size == 4
    assert (loader.batch_size, loader.drop_last, loader.prefetch_factor, len(loader)) == (4, False, 2, 3)
    unbatched = DataLoader(Squares(), batch_size=None)
    assert (unbatched.batch_size, unbatched.batch_sampler, len(unbatched)) == (None, None, 10)


def test_a_pickled_copy_makes_the_same_batches():
    loader = DataLoader(Squares(), batch_size=3, shuffle=True, generator=seeded_generator())
    copy = pickle.loads(pickle.dumps(loader))
    assert plain(list(copy)) == plain(list(loader)) and copy.generator is not loader.generator


def test_the_plain_loader_hints_once_at_framework_torch(monkeypatch):
    monkeypatch.setattr("dataloader._framework_hint._shown", False)
    with pytest.warns(FrameworkWarning, match=r'framework="torch", or use dataloader.torch.DataLoader'):
        dataloader.DataLoader(Squares(), batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataloader.DataLoader(Squares(), batch_size=2)  # once per process
    monkeypatch.setattr("dataloader._framework_hint._shown", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataloader.DataLoader(Squares(), batch_size=2, framework="torch")  # chosen: no hint
        DataLoader(Squares(), batch_size=2)


def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_without_torch_the_import_says_pip_install_torch():
    result = _python(
        "import sys; sys.modules['torch'] = None\n"
        "import dataloader\n"
        "try:\n    import dataloader.torch\n"
        "except ImportError as error:\n    print(error)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install torch" in result.stdout


def test_import_dataloader_does_not_import_torch():
    result = _python("import dataloader, sys; print('torch' in sys.modules)")
    assert result.stdout.strip() == "False", result.stderr


def _migration_example():
    """The training script of docs/migrating-from-pytorch.md, with the one line it changed."""
    page = (ROOT / "docs" / "migrating-from-pytorch.md").read_text(encoding="utf-8")
    scripts = [b for b in re.findall(r"^```python\n(.*?)^```", page, re.S | re.M) if "optimizer.step()" in b]
    assert len(scripts) == 1, "the page's main example is one training script"
    return scripts[0]


def test_the_migration_example_gives_pytorchs_losses(tmp_path, capsys):
    """The page's script, run as shown and with PyTorch's import back: the same losses. Run
    here, as ``__main__``, rather than in two fresh interpreters that would import torch again."""
    ours = _migration_example()
    changed = "from dataloader.torch import DataLoader"
    assert ours.count(changed) == 1
    theirs = ours.replace(changed, "from torch.utils.data import DataLoader")
    losses = []
    for name, script in (("ours.py", ours), ("theirs.py", theirs)):
        (tmp_path / name).write_text(script, encoding="utf-8")
        runpy.run_path(str(tmp_path / name), run_name="__main__")
        losses.append(capsys.readouterr().out)
    assert losses[0].count("loss") == 3 and losses[0] == losses[1]
