"""Runs a page's doc examples each on its own, as a user who copies one into a file would.

tests/test_docs.py writes each runnable block of a page to ``block_<page line>.py`` and runs
``python _doc_blocks.py block_12.py block_40.py ...`` once per page (one interpreter start
per page keeps the suite fast). Each block runs as ``__main__`` in a fresh namespace, in a
directory of its own and with the environment as it was, so it cannot lean on names, files or
variables an earlier block left behind. A failing block prints ``BLOCK FAILED: <file>`` and
its traceback; the others still run, and the exit code is 1 if any failed.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from pathlib import Path


def run_alone(block: Path) -> bool:
    """Run one block file as a script in a fresh namespace and directory; True if it passed."""
    workdir = block.with_suffix("")
    workdir.mkdir()
    environ, cwd = dict(os.environ), os.getcwd()
    os.chdir(workdir)
    try:
        runpy.run_path(str(block), run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (None, 0):
            return _failed(block)
    except BaseException:  # KeyboardInterrupt too: report the block, go on with the next
        return _failed(block)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
    return True


def _failed(block: Path) -> bool:
    sys.stdout.flush()
    print(f"BLOCK FAILED: {block.name}", file=sys.stderr)
    traceback.print_exc()
    sys.stderr.flush()
    return False


def main(blocks: list[str]) -> int:
    results = [run_alone(Path(block).resolve()) for block in blocks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
