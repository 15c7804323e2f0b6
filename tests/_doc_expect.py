"""The check behind ``print(...)  # -> TEXT`` in a doc example (tests/test_docs.py).

tests/test_docs.py copies this file beside the page's script and rewrites each such line into
``__import__("_doc_expect").check(line, ["TEXT", ...], ...)``, on the same line.
"""

from __future__ import annotations

import io
import os
from typing import Any

_runs: dict[int, int] = {}
RAN = "_doc_expect_ran.txt"  # beside this file: one page line per run, for the test to count


def check(line: int, expected: list[str], *args: Any, **kwargs: Any) -> None:
    """Print as ``print`` would, then fail unless the text is what the page shows.

    One expected text: every run prints it. Several: run k prints the k-th, and there is no
    run past the last. Runs of spaces and line breaks compare equal.
    """
    out = io.StringIO()
    print(*args, **{**kwargs, "file": out})
    print(out.getvalue(), end="", flush=True)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), RAN), "a") as ran:
        ran.write(f"{line}\n")
    run = _runs[line] = _runs.get(line, -1) + 1
    want = expected[0] if len(expected) == 1 else dict(enumerate(expected)).get(run)
    got = out.getvalue().rstrip("\n")
    if want is None or got.split() != want.split():
        shown = ", then ".join(expected)
        raise AssertionError(
            f"page line {line} printed {got!r} (run {run + 1}); the page shows {shown!r}"
        )
