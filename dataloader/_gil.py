"""Whether this interpreter runs Python threads in parallel, and so which workers a loader
starts when ``worker_type`` is left unset.

On a free-threaded build (3.13t, 3.14t) with the GIL off, thread workers run the user's Python
transforms in parallel with no pickling, no shared memory and no copy-on-write, so they are the
default there. An extension module that does not declare it runs without the GIL turns the GIL
back on when imported (Python says so in a ``RuntimeWarning``); the loader then starts processes
and says why, once per process.
"""

from __future__ import annotations

import os
import sys
import sysconfig

from ._validate import warn_argument
from .errors import GILWarning

#: Built with ``--disable-gil`` (``python3.14t``): the GIL is off unless something turned it on.
FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def gil_enabled() -> bool:
    """Whether the GIL is on now (always, on a build that has one)."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else bool(is_enabled())


_GIL_AT_IMPORT = gil_enabled()
_warned = False


def gil_requested() -> bool:
    """The user asked for the GIL: ``PYTHON_GIL=1`` or ``-X gil=1``."""
    return str(sys._xoptions.get("gil", os.environ.get("PYTHON_GIL", ""))) == "1"


def default_worker_type(multiprocessing_context: object = None) -> str:
    """``"thread"`` where threads run Python in parallel (a free-threaded build, GIL off) and no
    start method was asked for; ``"process"`` elsewhere. A free-threaded build whose GIL an
    extension module turned on is reported once (:class:`~dataloader.GILWarning`)."""
    if multiprocessing_context is not None:
        return "process"
    if not gil_enabled():
        return "thread"
    if FREE_THREADED_BUILD and not gil_requested():
        _warn_gil_turned_on()
    return "process"


def describe() -> str:
    """One line for reports (``python -m dataloader doctor``, the demo)."""
    if not FREE_THREADED_BUILD:
        return "on (this build of Python has a GIL): default workers are processes"
    if not gil_enabled():
        return "off (free-threaded build): default workers are threads"
    if gil_requested():
        return "on (free-threaded build, PYTHON_GIL=1 or -X gil=1): default workers are processes"
    return (
        "on (free-threaded build; an extension module turned it on at import): default workers are "
        "processes"
    )


def _warn_gil_turned_on() -> None:
    global _warned
    if _warned:
        return
    _warned = True
    when = "before `import dataloader`" if _GIL_AT_IMPORT else "after `import dataloader`"
    warn_argument(
        f"this free-threaded Python ({sys.version.split()[0]}t) runs with the GIL on: an extension "
        f"module imported {when} does not declare that it runs without the GIL, and Python turned "
        "the GIL on to load it (its RuntimeWarning at that import names the module). DataLoader "
        "workers are therefore processes, not threads. Use a release of that module built for "
        "free-threading, or run with PYTHON_GIL=0 to keep the GIL off at your own risk; pass "
        "worker_type='process' or 'thread' to choose yourself and silence this warning.",
        GILWarning,
    )
