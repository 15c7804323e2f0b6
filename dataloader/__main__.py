"""``python -m dataloader {demo,bench,doctor,convert,tune}``."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import dataloader

from ._cli import bench, convert, demo, doctor, tune


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataloader", description="Fast, robust batch loading.")
    parser.add_argument("--version", action="version", version=f"dataloader {dataloader.__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (demo, bench, doctor, convert, tune):
        module.add_parser(commands)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
