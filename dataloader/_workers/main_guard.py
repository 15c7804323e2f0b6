"""A script without the ``if __name__ == "__main__":`` guard, under spawn or forkserver.

Those start methods import the main script again in every new process before it runs its
worker. Unguarded, that import runs the script's own loader: the new process then tries to
start workers of its own while it is still starting, multiprocessing refuses, and the worker
exits with code 1. Both sides say so instead: the worker that is still starting
(:func:`refuse_workers_while_starting`) and the main process that saw it die
(:func:`unguarded_main_message`).
"""

from __future__ import annotations

import multiprocessing.process
import re
import sys

from ..errors import DataLoaderError

_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


def _fix(method: str) -> str:
    return (
        f"Under the {method} start method every worker imports your script again before it starts, "
        'so the code that builds and iterates the DataLoader must sit under `if __name__ == "__main__":` '
        "(or in a function called from there). Add the guard, or use "
        'multiprocessing_context="fork" where the platform has it.'
    )


def refuse_workers_while_starting() -> None:
    """Raise if this process is a new process still importing the main script (unguarded)."""
    if getattr(multiprocessing.process.current_process(), "_inheriting", False):
        raise DataLoaderError(
            "DataLoader workers were started while this process was itself starting as a worker: "
            "the script has no main guard. " + _fix("'spawn' or 'forkserver'")
        )


def unguarded_main_script() -> str | None:
    """The main script's path if it is a Python file without a ``__main__`` guard, else None."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as script:
            source = script.read()
    except OSError:
        return None
    return None if _GUARD.search(source) else path


def forkserver_died_message(worker: str, error: BaseException) -> str:
    """Why ``worker`` could not start when the forkserver's connection failed while starting it.

    From Python 3.14 the forkserver authenticates each request, so a server that died importing
    an unguarded script shows as a reset connection in the main process, not as a worker's exit.
    """
    script = unguarded_main_script()
    if script is not None:
        return (
            f"DataLoader {worker} could not start: the forkserver process, which starts the workers, "
            f"exited while importing the script '{script}', which has no "
            '`if __name__ == "__main__":` guard. ' + _fix("'forkserver'")
        )
    return (
        f"DataLoader {worker} could not start: the connection to the forkserver process, which "
        f"starts the workers, failed ({type(error).__name__}: {error}). The forkserver's own error, "
        "if it raised one, is above on standard error; the forkserver imports your main module "
        "first, so an exception there stops it. Fix that, or use multiprocessing_context='spawn'."
    )


def unguarded_main_message(worker: str, method: str, exitcode: int | None) -> str | None:
    """Why ``worker`` exited, where an unguarded main script is the likely cause; else None."""
    if method == "fork" or exitcode != 1:
        return None
    script = unguarded_main_script()
    if script is None:
        return None
    return (
        f"DataLoader {worker} exited with code 1 while starting: the script '{script}' has no "
        '`if __name__ == "__main__":` guard. ' + _fix(f"'{method}'")
    )
