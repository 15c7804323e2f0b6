"""The free-threading bench's interpreters, configurations, and one run in a child interpreter.

Two interpreters: ``ft``, a free-threaded Python 3.14 (``python3.14t``), and ``gil``, Python
3.14 with the GIL. Each is found as ``.ci/run``'s ``find_python`` finds it: ``python3.14t`` /
``python3.14`` on the PATH, then pyenv's ``versions/3.14*``; and, since a bare pyenv build has
no NumPy, also the virtual environments beside this checkout (``../*/bin/python``). The first
of the right version and build that imports what a run needs (``dataloader`` from this checkout,
NumPy, Pillow, psutil) is taken; ``--python-ft`` and ``--python-gil`` name one instead, of any
version (a stand-in: the tables say what it was).

Three configurations: thread and process workers on ``ft``, process workers on ``gil``. A run
is ``freethreading_child.main`` with one JSON argument in a fresh child of that interpreter, with
``PYTHONPATH`` at this checkout, in a session of its own (killed whole if it outlives its
time limit).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .freethreading_child import COMMAND

ROOT = Path(__file__).resolve().parents[1]
FT, GIL = "ft", "gil"
_NEEDS = ("dataloader", "numpy", "PIL", "psutil")
_PROBE = (
    "import importlib, json, sys, sysconfig\n"
    "missing = []\n"
    "for name in {needs!r}:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except ImportError as error:\n"
    "        missing.append(f'{{name}} ({{error}})')\n"
    "if missing:\n"
    "    print(json.dumps({{'missing': missing}}))\n"
    "    sys.exit(0)\n"
    "import benchmarks.freethreading_child as child\n"
    "print(json.dumps({{**child.interpreter(), 'missing': []}}))\n"
)


@dataclass(frozen=True)
class Interpreter:
    """A Python that runs the children: its role (``ft`` or ``gil``) and what it is."""

    role: str
    path: str
    python: str  # its version
    free_threaded: bool
    gil_enabled: bool  # after importing what a run needs
    found: bool  # found here (True) or given by --python-ft / --python-gil

    @property
    def stand_in(self) -> bool:
        """Not what the role asks for: another version, or another build."""
        return (not self.python.startswith("3.14.")
                or self.free_threaded != (self.role == FT))

    def describe(self) -> str:
        build = "free-threaded" if self.free_threaded else "GIL"
        gil = "GIL off" if not self.gil_enabled else "GIL on"
        note = " (a stand-in)" if self.stand_in else ""
        return f"{self.path}: Python {self.python}, {build} build, {gil} after imports{note}"


def _env() -> dict[str, str]:
    """The children's environment: this one, the library's switches left out, PYTHONPATH at
    this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATALOADER_", "MGE_DATA_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def probe(path: str, role: str, found: bool) -> tuple[Interpreter | None, str]:
    """``path`` as an :class:`Interpreter`, or None and why not."""
    got, why = _probe(path)
    if got is None:
        return None, why
    return Interpreter(role, path, got["python"], got["free_threaded"], got["gil_enabled"],
                       found), ""


@functools.lru_cache(maxsize=None)
def _probe(path: str) -> tuple[dict[str, Any] | None, str]:
    """What ``path`` says of itself after importing what a run needs (once per path: one
    interpreter may stand in for both roles), or None and why not."""
    code = _PROBE.format(needs=_NEEDS)
    try:
        done = subprocess.run([path, "-c", code], env=_env(), cwd=tempfile.gettempdir(),
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"{path} cannot be run ({error})"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{path} failed to import the bench ({tail})"
    got = json.loads(lines[-1])
    if got["missing"]:
        return None, f"{path} lacks {', '.join(got['missing'])}"
    return got, ""


def _version_matches(path: str, threaded: bool) -> bool:
    """Python 3.14 of the build asked for (``.ci/run``'s check, without importing anything)."""
    check = ("import sys, sysconfig; assert sys.version_info[:2] == (3, 14); "
             f"assert bool(sysconfig.get_config_var('Py_GIL_DISABLED')) == {threaded}")
    try:
        return subprocess.run([path, "-I", "-c", check], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def candidates(role: str) -> list[str]:
    """Where ``role``'s interpreter may be, in order, each once."""
    name = "python3.14t" if role == FT else "python3.14"
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [shutil.which(name)] + sorted(glob.glob(str(pyenv / "versions/3.14*/bin/python")),
                                          reverse=True)
    found += sorted(glob.glob(str(ROOT.parent / "*/bin/python")))
    return list(dict.fromkeys(p for p in found if p))


def find(role: str) -> tuple[Interpreter | None, list[str]]:
    """The first candidate for ``role`` that runs the bench; why each other 3.14 did not."""
    refused = []
    for path in candidates(role):
        if not _version_matches(path, role == FT):
            continue
        interpreter, why = probe(path, role, True)
        if interpreter is not None:
            return interpreter, refused
        refused.append(why)
    return None, refused


@dataclass(frozen=True)
class Config:
    """Who runs the workers: an interpreter's role and a ``worker_type``."""

    role: str
    worker_type: str

    @property
    def label(self) -> str:
        """"3.14t threads", "3.14t processes", "3.14 processes"."""
        python = "3.14t" if self.role == FT else "3.14"
        return f"{python} {'threads' if self.worker_type == 'thread' else 'processes'}"


CONFIGS = (Config(FT, "thread"), Config(FT, "process"), Config(GIL, "process"))
FT_THREADS, FT_PROCESSES, GIL_PROCESSES = CONFIGS


@dataclass
class Run:
    """One run of (workload, num_workers, configuration) in repetition ``rep``."""

    workload: str
    workers: int
    role: str
    worker_type: str
    rep: int
    rate: float | None = None  # samples/s over the timed part
    peak_pss_mib: float | None = None  # the child's process tree
    peak_rss_mib: float | None = None
    batches: int = 0
    epochs: int = 0
    first_batch_s: float | None = None
    others_cpus: float | None = None
    leftover_processes: int = 0
    start_method: str | None = None
    python: str | None = None
    free_threaded: bool | None = None
    gil_enabled: bool | None = None  # at the end of the run
    warnings: list[str] = field(default_factory=list)  # the child's stderr lines
    error: str | None = None

    @property
    def config(self) -> Config:
        return Config(self.role, self.worker_type)


def run_child(interpreter: Interpreter, run: Run, warmup: float, seconds: float, small: bool,
              start_method: str | None, limit: float) -> Run:
    """Measure ``run`` in a child of ``interpreter``; its figures, or its ``error``."""
    arguments = {"workload": run.workload, "worker_type": run.worker_type,
                 "num_workers": run.workers, "warmup": warmup, "seconds": seconds,
                 "small": small, "start_method": start_method}
    command = [interpreter.path, "-c", COMMAND, json.dumps(arguments)]
    child = subprocess.Popen(command, env=_env(), cwd=tempfile.gettempdir(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        out, err = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the child and any worker it left
        out, err = child.communicate()
        run.error = f"timed out after {limit:g} s (killed); its stderr: {_tail(err)}"
        return run
    run.warnings = [line for line in err.splitlines() if line.strip()][-20:]
    lines = out.strip().splitlines()
    if child.returncode != 0 or not lines:
        run.error = f"exit code {child.returncode}: {_tail(err)}"
        return run
    got: dict[str, Any] = json.loads(lines[-1])
    for name in ("rate", "peak_pss_mib", "peak_rss_mib", "batches", "epochs", "first_batch_s",
                 "others_cpus", "leftover_processes", "start_method", "python",
                 "free_threaded", "gil_enabled"):
        setattr(run, name, got.get(name))
    run.rate = run.rate if run.rate == run.rate else None  # NaN: no batch in the timed part
    return run


def _tail(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "nothing"


def child_limit(warmup: float, seconds: float) -> float:
    """Seconds a child may take: start-up, data, warm-up, the timed part and 5 s of reaping,
    with room for a busy machine."""
    return 120.0 + 2 * (warmup + seconds)

