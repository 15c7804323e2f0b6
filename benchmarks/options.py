"""The command-line options the bench tools share: each spelled, typed and read one way.

Defaults and help differ from tool to tool (a GPU run wants longer runs than a transform's
microbenchmark); the option's name, its type and how a comma-separated list is read do not.
Each type refuses bad values as the options are read (:mod:`dataloader.argtypes`): seconds
that are not finite and > 0, worker counts above the ceiling, a ``--json`` file that cannot be
written; so a tool never measures for minutes and then fails.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from dataloader.argtypes import positive_float, positive_int, worker_count, writable_file


def new_parser(doc: str, prog: str | None = None) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of a tool's docstring; ``prog`` is how the
    usage line names the tool (``python -m benchmarks.compare``, not argparse's ``__main__.py``)."""
    return argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])


def comma_list(
    convert: Callable[[str], Any], among: Sequence[str] | None = None, what: str = "value"
) -> Callable[[str], list]:
    """An argparse type: ``"2,4,8"`` -> ``[convert("2"), convert("4"), convert("8")]``, blanks
    skipped; with ``among``, a value outside it is refused, naming ``what`` it is."""

    def parse(text: str) -> list:
        values = [convert(v) for v in text.split(",") if v.strip()]
        unknown = [v for v in values if among is not None and v not in among]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {what}(s) {unknown}: choose among {','.join(among or ())}"
            )
        return values

    parse.__name__ = f"comma-separated {what}"  # argparse names the type in its errors
    return parse


def add_quick(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--quick", action="store_true", help=help)


def add_reps(parser: argparse.ArgumentParser, default: int | None, help: str | None = None) -> None:
    parser.add_argument("--reps", type=positive_int, default=default,
                        help=help or f"repetitions (default {default})")


def add_seconds(parser: argparse.ArgumentParser, default: float | None, help: str | None = None) -> None:
    parser.add_argument("--seconds", type=positive_float, default=default,
                        help=help or f"measured seconds per run (default {default:g})")


def add_workloads(parser: argparse.ArgumentParser, default: str | None, among: Sequence[str] | None,
                  help: str | None = None) -> None:
    """``--workloads a,b``, read as a list (``among`` them, when given)."""
    parser.add_argument("--workloads", default=default, type=comma_list(str.strip, among, "workload"),
                        help=help or f"comma-separated, among {','.join(among or ())}")


def add_workers(parser: argparse.ArgumentParser, default: Any, help: str | None = None) -> None:
    """``--workers 0,2``: num_workers values, read as a list of ints from 0 to the ceiling."""
    parser.add_argument("--workers", default=default, type=comma_list(worker_count, what="num_workers"),
                        help=help or "num_workers values, comma-separated")


def add_json(parser: argparse.ArgumentParser, help: str = "also write the runs and rows here") -> None:
    """``--json PATH``: a file tried for writing as the options are read."""
    parser.add_argument("--json", metavar="PATH", type=writable_file, help=help)
