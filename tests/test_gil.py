"""The default worker type follows the GIL: threads where it is off, processes elsewhere."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, GILWarning, RandomSampler
from dataloader import _gil
from dataloader.rng import batch_rng
from tests.harness import assert_same_batches, collect


def _data():
    return ArrayDataset(np.arange(40, dtype=np.float32).reshape(20, 2), np.arange(20))


@pytest.fixture
def gil(monkeypatch):
    """Set what the loader sees: (free-threaded build, GIL on now, GIL asked for)."""

    def set_state(build, enabled, requested=False):
        monkeypatch.setattr(_gil, "FREE_THREADED_BUILD", build)
        monkeypatch.setattr(_gil, "gil_enabled", lambda: enabled)
        monkeypatch.setattr(_gil, "gil_requested", lambda: requested)
        monkeypatch.setattr(_gil, "_warned", False)

    return set_state


def test_a_gil_build_defaults_to_process_workers(gil):
    gil(build=False, enabled=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DataLoader(_data(), num_workers=2).options.worker_type == "process"
        assert DataLoader(_data(), num_workers="auto").options.worker_type == "process"


def test_without_the_gil_workers_default_to_threads_unless_told(gil):
    gil(build=True, enabled=False)
    assert DataLoader(_data(), num_workers=2).options.worker_type == "thread"
    assert DataLoader(_data(), num_workers="auto").options.worker_type == "thread"
    assert DataLoader(_data(), num_workers=2, worker_type="process").options.worker_type == "process"
    # A start method asked for means processes.
    assert DataLoader(_data(), num_workers=2, multiprocessing_context="spawn").options.worker_type == "process"


def test_the_pytorch_drop_in_keeps_process_workers_as_pytorch_does(gil):
    pytest.importorskip("torch", reason="the drop-in needs torch (pip install torch)")
    import dataloader.torch as torch_loader
    gil(build=True, enabled=False)
    loader = torch_loader.DataLoader(_data(), batch_size=4, num_workers=2)
    assert loader.options.worker_type == "process"
    assert torch_loader.DataLoader(_data(), num_workers=2, worker_type="thread").options.worker_type == "thread"


def test_a_gil_turned_on_by_an_extension_is_reported_once(gil):
    gil(build=True, enabled=True)
    with pytest.warns(GILWarning, match="turned the GIL on") as caught:
        assert DataLoader(_data(), num_workers=2).options.worker_type == "process"
    assert "PYTHON_GIL=0" in str(caught[0].message) and "worker_type=" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        DataLoader(_data(), num_workers=2)


def test_a_gil_asked_for_or_a_worker_type_given_is_not_reported(gil):
    gil(build=True, enabled=True, requested=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DataLoader(_data(), num_workers=2).options.worker_type == "process"
        gil(build=True, enabled=True)
        assert DataLoader(_data(), num_workers=2, worker_type="thread").options.worker_type == "thread"


def test_the_report_line_says_which_workers_follow(gil):
    gil(build=False, enabled=True)
    assert "processes" in _gil.describe()
    gil(build=True, enabled=False)
    assert _gil.describe().startswith("off") and "threads" in _gil.describe()
    gil(build=True, enabled=True)
    assert "extension module" in _gil.describe()


def test_default_thread_workers_give_the_process_workers_batches(gil):
    gil(build=True, enabled=False)
    data = _data()

    def make(**kwargs):
        return DataLoader(data, RandomSampler(data, batch_size=3, seed=5), seed=7, num_workers=2,
                          transform=lambda s: (s[0] + batch_rng().random(2).astype(np.float32), s[1]), **kwargs)

    threads = make()
    assert threads.options.worker_type == "thread"
    assert_same_batches(collect(threads), collect(make(worker_type="process", multiprocessing_context="fork")))


@pytest.mark.skipif(not _gil.FREE_THREADED_BUILD, reason="needs a free-threaded Python (3.14t)")
def test_on_a_free_threaded_python_the_real_gil_decides():
    script = textwrap.dedent(
        """
        import warnings
        import numpy as np
        from dataloader import ArrayDataset, DataLoader, _gil
        warnings.simplefilter("error")
        data = ArrayDataset(np.arange(8.0), np.arange(8))
        print(_gil.gil_enabled(), DataLoader(data, num_workers=2).options.worker_type)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    off = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert off.stdout.split() == ["False", "thread"], off.stderr
    on = subprocess.run([sys.executable, "-X", "gil=1", "-c", script], env=env, capture_output=True, text=True,
                        timeout=60)
    assert on.stdout.split() == ["True", "process"], on.stderr


_TURN_THE_GIL_ON = """
import importlib.machinery, importlib.util, _testmultiphase
# A module of CPython's own test extension that declares no Py_mod_gil slot: loading it turns the GIL on.
name = "_testmultiphase_null_slots"
loader = importlib.machinery.ExtensionFileLoader(name, _testmultiphase.__file__)
importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, _testmultiphase.__file__, loader=loader))
"""


@pytest.mark.skipif(not _gil.FREE_THREADED_BUILD, reason="needs a free-threaded Python (3.14t)")
def test_on_a_free_threaded_python_an_extension_that_turns_the_gil_on_is_reported():
    pytest.importorskip("_testmultiphase", reason="this Python was built without CPython's test modules")
    script = "import dataloader\n" + _TURN_THE_GIL_ON + textwrap.dedent(
        """
        import warnings
        import numpy as np
        from dataloader import ArrayDataset, DataLoader
        data = ArrayDataset(np.arange(8.0), np.arange(8))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader = DataLoader(data, num_workers=2)
        print(loader.options.worker_type, [w.category.__name__ for w in caught])
        print(caught[0].message)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    first, message = done.stdout.splitlines()[:2]
    assert first == "process ['GILWarning']", done.stderr
    assert "after `import dataloader`" in message and "PYTHON_GIL=0" in message
    assert "has been enabled to load module '_testmultiphase_null_slots'" in done.stderr  # Python's own


def test_no_workers_nothing_reported_and_the_warning_points_at_the_users_line(gil):
    gil(build=True, enabled=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader(_data(), num_workers=0)
    with pytest.warns(GILWarning) as caught:
        DataLoader(_data(), num_workers=2)
    assert caught[0].filename == __file__
