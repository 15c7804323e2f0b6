"""dataloader.torch.DataLoader against torch.utils.data.DataLoader: the same script, the same
batches (values, dtypes, order), the same argument errors, and the same draws from torch's
random generator; plus the hint the plain loader gives a torch dataset, and the error that
``import dataloader.torch`` gives without torch."""

import os
import pickle
import random
import re
import runpy
import subprocess
import sys
import typing
import warnings
from pathlib import Path

import numpy as np
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


# Each case, PyTorch's exception type and the words of its message that code and tests look for.
REFUSED = [
    ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option is mutually exclusive with"),
    ({"batch_sampler": [[0]], "shuffle": True}, ValueError, "batch_sampler option is mutually exclusive with"),
    ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option is mutually exclusive with"),
    ({"batch_sampler": [[0]], "sampler": [0]}, ValueError, "batch_sampler option is mutually exclusive with"),
    ({"batch_sampler": [[0]], "sampler": [0], "shuffle": 3}, ValueError, "sampler option is mutually exclusive with shuffle"),
    ({"sampler": [0], "shuffle": True}, ValueError, "sampler option is mutually exclusive with shuffle"),
    ({"batch_size": None, "drop_last": True}, ValueError,
     "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified in multiprocessing"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
    ({"multiprocessing_context": "spawn"}, ValueError, r"multi-process loading \(num_workers > 0\), but got"),
    ({"num_workers": 1, "multiprocessing_context": "bad"}, ValueError, "should specify a valid start method in"),
    ({"num_workers": 1, "multiprocessing_context": object()}, TypeError,
     "multiprocessing_context option should be a valid context "),
]


@pytest.mark.parametrize("kwargs, error, words", REFUSED, ids=[str(case[0]) for case in REFUSED])
def test_conflicting_options_raise_pytorchs_errors_in_pytorchs_words(kwargs, error, words):
    with pytest.raises(error, match=words):
        TorchLoader(Squares(), **kwargs)
    with pytest.raises(error, match=words):
        DataLoader(Squares(), **kwargs)


@pytest.mark.parametrize("name, value", [("shuffle", True), ("shuffle", 3), ("sampler", [0]), ("batch_sampler", [[0]])])
def test_an_iterable_dataset_refuses_an_order_as_pytorchs_does(name, value):
    words = f"DataLoader with IterableDataset: expected unspecified {name}"
    with pytest.raises(ValueError, match=words):
        TorchLoader(Numbers(), **{name: value})
    with pytest.raises(ValueError, match=words):
        DataLoader(Numbers(), **{name: value})


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


# -- what PyTorch's own DataLoader tests expect (issue 46), each against torch's loader -------


class OnlyLength(Dataset):
    """A torch Dataset that defines __len__ only: its __getitem__ is torch's, which raises."""

    def __len__(self):
        return 5


@pytest.mark.parametrize("num_workers", [0, 2])
def test_torchs_raising_getitem_raises_at_each_batch_and_the_epoch_goes_on(num_workers):
    def errors(loader_class):
        iterator, raised = iter(loader_class(OnlyLength(), batch_size=2, num_workers=num_workers)), 0
        while True:
            try:
                next(iterator)
            except NotImplementedError:
                raised += 1
            except StopIteration:
                return raised

    assert errors(DataLoader) == errors(TorchLoader) == 3


class SharedCounter(Dataset):
    """Counts its reads in a multiprocessing.Value, which multiprocessing lets a spawned child
    inherit (plain pickle refuses it): under spawn and forkserver it must reach the workers."""

    def __init__(self, method):
        self.reads = torch.multiprocessing.get_context(method).Value("i", 0, lock=True)

    def __len__(self):
        return 6

    def __getitem__(self, i):
        with self.reads.get_lock():
            self.reads.value += 1
        return i


def test_multiprocessing_objects_in_the_dataset_reach_spawned_workers():
    """forkserver here; tests/_workers/test_shutdown.py has spawn too, for the plain loader."""
    counts = []
    for loader_class in (TorchLoader, DataLoader):
        dataset = SharedCounter("forkserver")
        loader = loader_class(dataset, batch_size=2, num_workers=1, multiprocessing_context="forkserver")
        counts.append(([b.tolist() for b in loader], dataset.reads.value))
    assert counts[0] == counts[1] == ([[0, 1], [2, 3], [4, 5]], 6)


def test_the_class_takes_a_type_argument_as_pytorchs_does():
    def annotated() -> DataLoader[list[torch.Tensor]]:
        return DataLoader(Squares())

    assert typing.get_origin(DataLoader[list[torch.Tensor]]) is DataLoader
    assert typing.get_type_hints(annotated)["return"] == DataLoader[list[torch.Tensor]]


class SizedStream(IterableDataset):
    """An IterableDataset whose __len__ (10) undercounts what one copy per worker yields."""

    def __iter__(self):
        return iter(range(10))

    def __len__(self):
        return 10


@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (1, True), (2, False), (3, False), (3, True), (None, False)])
def test_len_of_an_iterable_dataset_with_len_is_pytorchs(batch_size, drop_last):
    def length(loader_class):
        return len(loader_class(SizedStream(), batch_size=batch_size, drop_last=drop_last))

    assert length(DataLoader) == length(TorchLoader)


def test_an_epoch_longer_than_the_reported_length_warns_as_pytorchs_does():
    """Two workers each read all 10 samples: 20 batches against a reported length of 10."""

    def warned_batches(loader_class):
        loader = loader_class(SizedStream(), num_workers=2)
        with warnings.catch_warnings(record=True) as before:
            warnings.simplefilter("always")
            assert len(list(loader)) == 20  # no warning before len() is asked
        assert len(loader) == 10
        warned = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for index, _ in enumerate(loader):
                if any("samples have been fetched" in str(w.message) for w in caught):
                    warned.append(index)
                caught.clear()
        assert not [w for w in before if "samples have been fetched" in str(w.message)]
        return warned

    assert warned_batches(DataLoader) == warned_batches(TorchLoader) == list(range(10, 20))
    with pytest.raises(TypeError):
        len(DataLoader(Numbers()))  # no __len__: no length, as PyTorch's


class WorkerOfEachSample(Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        return (get_worker_info() or dataloader.get_worker_info()).id  # torch's, or the plain loader's


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_worker_i_of_n_makes_batches_i_i_plus_n_and_so_on(num_workers):
    def makers(loader_class, **extras):
        loader = loader_class(WorkerOfEachSample(), batch_size=2, num_workers=num_workers, **extras)
        return [batch.tolist() for batch in loader]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about more workers than CPUs
        theirs = makers(TorchLoader)
    expected = [[i % num_workers] * 2 for i in range(12)]
    assert theirs == makers(DataLoader) == expected
    # the plain loader dispatches to the least busy worker unless asked to take turns
    plain_loader = dataloader.DataLoader(WorkerOfEachSample(), batch_size=2, num_workers=num_workers,
                                         dispatch="round_robin", framework="torch")
    assert [batch.tolist() for batch in plain_loader] == expected


class Draws(Dataset):
    """Each sample draws from torch's, Python's and NumPy's global generators."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return torch.tensor([i, torch.randint(0, 2**31, ()).item(), random.randrange(2**31), np.random.randint(2**31)])


def draws(loader_class, **kwargs):
    """Two epochs, and the next numbers of each generator in the main process after them."""
    torch.manual_seed(0), random.seed(1), np.random.seed(2)
    loader = loader_class(Draws(), batch_size=2, **kwargs)
    epochs = [[batch.tolist() for batch in loader] for _ in range(2)]
    return epochs, torch.rand(1).item(), random.random(), np.random.rand()


@pytest.mark.parametrize("kwargs", [
    {"num_workers": 0},
    {"num_workers": 2},
    {"num_workers": 2, "persistent_workers": True},
    {"num_workers": 2, "generator": seeded_generator},
], ids=str)
def test_random_draws_in_the_dataset_are_pytorchs(kwargs):
    """Each worker seeded once from the iterator's base seed plus its id, as PyTorch seeds
    random, torch and NumPy; with no workers, the program's own generators are used."""
    kwargs_ = {k: v() if k == "generator" else v for k, v in kwargs.items()}
    theirs = draws(TorchLoader, **kwargs_)
    kwargs_ = {k: v() if k == "generator" else v for k, v in kwargs.items()}
    assert draws(DataLoader, **kwargs_) == theirs


def seed_torch_12345(worker_id):
    torch.manual_seed(12345)


class InitialSeed(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.initial_seed()


def test_a_seed_set_in_worker_init_fn_holds_for_every_batch():
    for loader_class in (TorchLoader, DataLoader):
        loader = loader_class(InitialSeed(), batch_size=2, num_workers=2, worker_init_fn=seed_torch_12345)
        assert {seed for batch in loader for seed in batch.tolist()} == {12345}


def test_seeding_by_batch_stays_available_and_ignores_the_worker_count():
    """Our own guarantee, asked for: the same draws for any num_workers (not PyTorch's)."""
    made = [draws(DataLoader, num_workers=n, seeding="batch", seed=5)[0] for n in (0, 1, 3)]
    assert made[0] == made[1] == made[2]


@pytest.mark.parametrize("name", ["batch_size", "sampler", "batch_sampler", "drop_last", "dataset", "persistent_workers"])
def test_setting_an_attribute_fixed_at_construction_raises_valueerror(name):
    for loader_class in (TorchLoader, DataLoader):
        loader = loader_class(Squares(), batch_size=2)
        with pytest.raises(ValueError, match=f"{name} attribute should not be set after DataLoader is initialized"):
            setattr(loader, name, {})
    copy = pickle.loads(pickle.dumps(loader))
    with pytest.raises(ValueError):
        copy.batch_size = 4


@pytest.mark.parametrize("name", ["collate_fn", "worker_init_fn", "in_order", "pin_memory", "num_workers", "timeout"])
def test_an_attribute_read_once_here_says_so_when_set(name):
    """PyTorch reads these again at each iter(loader); this loader reads them when built, and
    refuses a change rather than ignore it."""
    loader = DataLoader(Squares(), batch_size=2)
    with pytest.raises(AttributeError, match=f"{name} cannot be changed on dataloader.torch.DataLoader"):
        setattr(loader, name, getattr(loader, name))
    loader.generator = torch.Generator()  # read at each iter(loader) here too: allowed


def test_more_workers_than_the_machine_has_room_for_warn_as_pytorchs_do():
    words = "excessive worker creation might get DataLoader running slow or even freeze"
    for loader_class in (TorchLoader, DataLoader):
        with pytest.warns(UserWarning, match=words):
            loader_class(Squares(), batch_size=2, num_workers=1000)
    with pytest.raises(ValueError, match="must be at most"):
        DataLoader(Squares(), num_workers=1000, too_many_workers="raise")
    with pytest.raises(ValueError, match="must be at most"):
        dataloader.DataLoader(Squares(), num_workers=1000)  # the plain loader's cap stays


class Ragged(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return ["x"] * (i + 1)


def test_a_failed_default_collate_is_a_runtimeerror_as_pytorchs_is():
    for loader_class in (TorchLoader, DataLoader):
        with pytest.raises(RuntimeError):
            next(iter(loader_class(Ragged(), batch_size=2)))


def test_collate_fn_reads_back_the_function_pytorch_would_call():
    from torch.utils.data import default_collate, default_convert

    for loader_class in (TorchLoader, DataLoader):
        assert loader_class(Squares()).collate_fn is default_collate
        assert loader_class(Squares(), batch_size=None).collate_fn is default_convert
        assert loader_class(Records(), collate_fn=sum_and_names).collate_fn is sum_and_names


class Stuck(Dataset):
    """Waits in its worker for a byte on a pipe, which the test writes after the timeout."""

    def __init__(self):
        self.reader, self.writer = os.pipe()

    def __len__(self):
        return 4

    def __getitem__(self, i):
        os.read(self.reader, 1)
        return i


def test_a_timeout_says_so_in_pytorchs_words():
    for loader_class in (TorchLoader, DataLoader):
        dataset = Stuck()
        try:
            iterator = iter(loader_class(dataset, batch_size=2, num_workers=1, timeout=1, multiprocessing_context="fork"))
            with pytest.raises(RuntimeError, match=r"DataLoader timed out after 1 seconds"):
                next(iterator)
            os.write(dataset.writer, b"go")  # a worker still waiting finishes and stops with the iterator
            del iterator
        finally:
            os.close(dataset.reader), os.close(dataset.writer)


def shuffled_pipe():
    from torch.utils.data.datapipes.iter import IterableWrapper

    return IterableWrapper(range(20)).shuffle().sharding_filter()


@pytest.mark.parametrize("kwargs", [{"num_workers": 0}, {"num_workers": 2}, {"num_workers": 2, "persistent_workers": True}],
                         ids=str)
def test_a_datapipe_is_shuffled_seeded_and_sharded_as_pytorch_does(kwargs):
    """shuffle=True reaches the pipe's shuffler, each epoch draws its seed from torch's
    generator, and each worker reads its shard: the same batches as PyTorch's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's notice that DataPipes are deprecated
        theirs = run(TorchLoader, shuffled_pipe(), batch_size=4, shuffle=True, **kwargs)
        ours = run(DataLoader, shuffled_pipe(), batch_size=4, shuffle=True, **kwargs)
    assert ours == theirs
    assert sorted(i for batch in ours[0][0] for i in batch[1]) == list(range(20))


def test_the_epochs_workers_and_pytorchs_private_flags_read_back():
    """``it._workers`` and ``loader._auto_collation``: PyTorch's private names, which its own tests read."""
    iterator = iter(DataLoader(Squares(), batch_size=2, num_workers=2))
    workers = iterator._workers
    assert len(workers) == 2 and all(worker.is_alive() and worker.pid != os.getpid() for worker in workers)
    assert len(list(iterator)) == 5
    del iterator
    for worker in workers:  # stopped with the epoch; the exit code stays readable
        worker.join(30)
        assert not worker.is_alive() and worker.exitcode is not None
    assert iter(DataLoader(Squares()))._workers == []
    assert (DataLoader(Squares())._auto_collation, DataLoader(Squares(), batch_size=None)._auto_collation) == (True, False)
