"""argparse types for command lines that build loaders: bad input refused before any work starts.

Numbers must be finite (a ``> 0`` test lets ``nan`` through, and ``--seconds nan`` then never
ends), worker counts have a ceiling (``--workers 100000`` would start 100,000 processes), and a
file a command will write is tried when the options are read, not after a run of minutes. Each
type raises :class:`argparse.ArgumentTypeError`, which argparse prints as one line
(``prog: error: argument --seconds: ...``) with exit code 2.

The commands of ``python -m dataloader`` and the bench tools use them, and so can a training
script: ``parser.add_argument("--workers", type=dataloader.argtypes.worker_count)``. The worker
ceiling is the loader's own (:func:`dataloader.memory.max_workers`), so a count the command
line accepts is one the ``DataLoader`` accepts too.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from typing import Callable

from . import memory

__all__ = [
    "non_negative_float", "positive_float", "positive_float_at_most", "positive_int", "uncreatable", "unwritable",
    "worker_count", "writable_file", "writable_log",
]

def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (``0``, ``nan`` and ``inf`` refused)."""
    return _finite(text, strict=True)


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0 (``nan`` and ``inf`` refused)."""
    return _finite(text, strict=False)


def positive_float_at_most(most: float) -> Callable[[str], float]:
    """An argparse type: a finite number > 0 and <= ``most``. For durations: ``1e308`` is finite,
    but a run timed that long never ends (and a wait that long overflows ``threading``'s)."""

    def parse(text: str) -> float:
        return _finite(text, strict=True, most=most)

    parse.__name__ = f"positive_float_at_most({most:g})"  # argparse names the type in some errors
    return parse


def _finite(text: str, strict: bool, most: float = math.inf) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (strict and value == 0) or value > most:
        bound = ("> 0" if strict else ">= 0") + (f" and at most {most:g}" if most < math.inf else "")
        raise argparse.ArgumentTypeError(f"expected a finite number {bound}; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = _integer(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1; got {text!r}")
    return value


def _integer(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def worker_count(text: str) -> int:
    """An argparse type: a ``num_workers`` from 0 to :func:`dataloader.memory.max_workers`, refused while the
    options are read rather than when the loader is built."""
    value = _integer(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of workers >= 0; got {text!r}")
    most, why = memory.max_workers()
    if value > most:  # the library's reason, less its advice on num_workers='auto'
        raise argparse.ArgumentTypeError(
            f"expected a number of workers from 0 to {most}; got {text!r}: {why.split('. ')[0]}"
        )
    return value


def writable_file(text: str) -> str:
    """An argparse type: the path of a file the command will write, tried now (see :func:`unwritable`)."""
    return _checked(text, unwritable(text))


def writable_log(text: str) -> str:
    """An argparse type: the path of a log the library appends to, creating its missing folders."""
    return _checked(text, unwritable(text, make_folders=True))


def _checked(text: str, problem: str | None) -> str:
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def unwritable(path: str, make_folders: bool = False) -> str | None:
    """Why ``path`` cannot be written as a file, or None when it can.

    The file is opened for appending (which changes nothing in one that exists) and removed
    again when this created it: that asks the filesystem itself, read-only mounts included.
    With ``make_folders``, missing folders on the way are fine where the nearest existing one
    is a writable directory (the writer creates them).
    """
    if not path:
        return "an empty path; give a file name"
    if os.path.isdir(path):
        return f"{path!r} is a directory; give a file name"
    parent = os.path.dirname(os.path.abspath(path))
    if make_folders and not os.path.exists(parent):
        problem = uncreatable(parent)
        return None if problem is None else f"cannot write {path!r}: {problem}"
    if not os.path.isdir(parent):
        missing = "is not a directory" if os.path.exists(parent) else "does not exist"
        return f"cannot write {path!r}: its directory {parent!r} {missing}"
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block an open() here
        return None if os.access(path, os.W_OK) else f"cannot write {path!r}: permission denied"
    return _try_append(path)


def uncreatable(folder: str) -> str | None:
    """Why ``folder`` cannot be created (with its missing parents) and written into; None when it can.

    The missing folders are created and removed again, or a file is created and removed in an
    existing one: that asks the filesystem itself (``os.access`` says yes to root everywhere,
    ``/proc`` and ``/sys`` included, and a write there fails only later).
    """
    existing, missing = os.path.abspath(folder), []  # relative: dirname() ends at "", never a folder
    while not os.path.exists(existing):
        missing.append(existing)
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{existing!r} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"cannot create folders or files in {existing!r}"
    return _try_folders(missing[::-1]) if missing else _try_file_in(folder)


def _try_folders(missing: list[str]) -> str | None:
    made: list[str] = []
    try:
        for path in missing:
            os.mkdir(path)
            made.append(path)
    except OSError as error:
        return f"cannot create the folder {path!r}: {error.strerror or error}"
    finally:
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass  # an empty folder left behind; the writer creates it anyway
    return None


def _try_file_in(folder: str) -> str | None:
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dataloader-try-"):
            pass
    except OSError as error:
        return f"cannot create files in {folder!r}: {error.strerror or error}"
    return None


def _try_append(path: str) -> str | None:
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        return f"cannot write {path!r}: {error.strerror or error}"
    if not existed:
        try:
            os.remove(path)
        except OSError:
            pass  # an empty file left behind; the run writes it anyway
    return None
