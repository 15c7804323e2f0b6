"""Scenarios run in a fresh interpreter: a test module's ``SCRIPTS`` table, one JSON line back.

A scenario that sets a process limit (``RLIMIT_NOFILE``, ``RLIMIT_AS``) or starts loaders
under one must not run in the test process. Its module keeps ``SCRIPTS = {name: function}``
and calls :func:`main` from its ``run_script()``; the test calls :func:`run` with the module's
name, and gets the dict the function returned and the child's standard error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(scripts: Mapping[str, Callable[..., dict]]) -> None:
    """In the child: run the scenario its command line names, print its result as JSON."""
    scenario, *args = sys.argv[1:]
    print(json.dumps(scripts[scenario](*args)), flush=True)


def run(module: str, scenario: str, *args: Any, timeout: float = 120, env: Mapping[str, str] | None = None) -> tuple[dict, str]:
    """Run ``scenario`` of ``module`` in a fresh interpreter, which must exit cleanly; its JSON
    result and its standard error."""
    code = f"from {module} import run_script; run_script()"
    result = subprocess.run(
        [sys.executable, "-c", code, scenario, *map(str, args)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr
