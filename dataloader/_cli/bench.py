"""``python -m dataloader bench``: the benchmark workloads of tools/bench.py."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench.py"


def add_parser(commands: Any) -> None:
    # Its options are the tool's own: the command line passes them through (see main()).
    parser = commands.add_parser("bench", help="compare with PyTorch's DataLoader (options as tools/bench.py)")
    parser.set_defaults(run=run, options=[])


def run(args: argparse.Namespace) -> int:
    if not _TOOL.exists():
        print(
            "bench needs the repository's tools/bench.py (it is not installed with the package); "
            "run it from a clone of the repository.",
            file=sys.stderr,
        )
        return 2
    spec = importlib.util.spec_from_file_location("dataloader_bench_tool", _TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return int(module.main(args.options) or 0)
