"""``python -m dataloader bench``: the main bench of :mod:`dataloader.bench`."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(commands: Any) -> None:
    # Its options are the bench's own: the command line passes them through (see main()).
    parser = commands.add_parser("bench", help="compare with PyTorch's DataLoader (options: bench --help)")
    parser.set_defaults(run=run, options=[])


def run(args: argparse.Namespace) -> int:
    from ..bench.cli import main  # imported here: the other commands need none of it

    return int(main(args.options) or 0)
