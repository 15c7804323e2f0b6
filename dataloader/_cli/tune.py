"""``python -m dataloader tune MODULE:FACTORY``: how fast your dataset loads with each
``num_workers`` (and ``prefetch_factor``) on this machine, and what ``num_workers="auto"`` picks.

``MODULE`` is imported as ``python -m`` would (the current directory first on the path);
``FACTORY()`` returns a dataset, a ``(dataset, transform)`` pair, or a dict of DataLoader
keyword arguments with at least ``dataset`` (its ``num_workers`` and ``prefetch_factor`` are
replaced by each setting's; without ``sampler`` or ``batch_size``, ``--batch-size`` applies).
Each setting runs one untimed batch and then ``--seconds`` timed, while the peak memory (PSS)
of the process tree is sampled (:mod:`dataloader._cli._timing`). A spec that cannot
be used is one line on stderr and exit code 2; a setting whose run raises shows its error in
the table, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import importlib
import numbers
import os
import sys
import traceback
from typing import Any, Callable

from .. import DataLoader
from ..argtypes import positive_float_at_most, positive_int, worker_count, writable_file
from ..memory import PeakMemory, available_cpus
from ._table import aligned, cell, write_json
from ._timing import MOST_SECONDS, measure_loader

_MIB = 2.0**20
_MAX_DEFAULT_SETTINGS = 8


class _SpecError(Exception):
    """MODULE:FACTORY cannot be used; the message says why, in one line."""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "tune", help="time num_workers settings and num_workers='auto' on your dataset")
    parser.add_argument(
        "spec", metavar="MODULE:FACTORY",
        help="FACTORY() in MODULE (importable from the current directory) returns a dataset, "
        "(dataset, transform) or a dict of DataLoader keyword arguments with 'dataset'")
    parser.add_argument("--batch-size", type=positive_int, default=32, metavar="N",
                        help="samples per batch, where the factory gives no sampler (default 32)")
    parser.add_argument("--seconds", type=positive_float_at_most(MOST_SECONDS), default=3.0, metavar="S",
                        help=f"timed seconds per setting, after one batch (default 3, at most {MOST_SECONDS:g})")
    parser.add_argument("--workers", type=worker_list, metavar="N,N,...",
                        help="fixed num_workers values (default 0,1,2,... up to 2 x usable CPUs, "
                        f"at most {_MAX_DEFAULT_SETTINGS} values)")
    parser.add_argument("--prefetch", type=_int_list(1), metavar="N,N,...",
                        help="prefetch_factor values tried with each num_workers above 0 (default: the "
                        "loader's default only)")
    parser.add_argument("--json", metavar="PATH", type=writable_file,
                        help="also write every setting's run here")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        options = loader_options(make(load_factory(args.spec), args.spec), args.spec, args.batch_size)
    except _SpecError as error:
        print(f"python -m dataloader tune: error: {error}", file=sys.stderr)
        return 2
    workers = args.workers if args.workers is not None else default_workers(available_cpus())
    # prefetch_factor means nothing without workers: num_workers=0 runs once
    settings = [(w, p) for w in workers for p in (args.prefetch if w and args.prefetch else [None])]
    settings.append(("auto", None))
    print(f"tune {args.spec}: {args.seconds:g} s per setting after one batch; "
          f"{available_cpus()} usable CPU(s)", flush=True)
    with PeakMemory() as memory:
        results = [_measure(options, w, p, args.seconds, memory) for w, p in settings]
    print(format_table(results))
    problem = args.json and write_json(args.json, {"spec": args.spec, "seconds": args.seconds, "runs": results})
    if problem:
        print(f"python -m dataloader tune: error: {problem}", file=sys.stderr)
    return 1 if problem or any(r["error"] for r in results) else 0


def default_workers(cpus: int) -> list[int]:
    """0, 1, 2, ... up to 2 x ``cpus``, at most :data:`_MAX_DEFAULT_SETTINGS` values."""
    return list(range(min(2 * cpus + 1, _MAX_DEFAULT_SETTINGS)))


def load_factory(spec: str) -> Callable[[], Any]:
    """``MODULE:FACTORY`` (FACTORY may be dotted: ``Class.method``), imported from the
    current directory or the installed packages."""
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise _SpecError(f"expected MODULE:FACTORY (such as mydata:make); got {spec!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (module_name + ".").startswith(error.name + "."):
            raise _SpecError(_failed(f"importing {module_name!r}", error, f"import {module_name}")) from None
        raise _SpecError(f"no module named {module_name!r} in {here} or the installed packages") from None
    except Exception as error:  # the module raised, or does not parse
        raise _SpecError(_failed(f"importing {module_name!r}", error, f"import {module_name}")) from None
    for part in name.split("."):
        if not hasattr(found, part):
            raise _SpecError(f"module {module_name!r} has no attribute {name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise _SpecError(f"{spec} is not callable (it is of type {type(found).__name__})")
    factory: Callable[[], Any] = found
    return factory


def make(factory: Callable[[], Any], spec: str) -> Any:
    """``factory()``; what it raises is a :class:`_SpecError` of one line."""
    try:
        return factory()
    except Exception as error:
        module, _, name = spec.partition(":")
        raise _SpecError(_failed(f"{spec}()", error, f"import {module}; {module}.{name}()")) from None


def _failed(what: str, error: BaseException, code: str | None) -> str:
    """``what raised T: message (file, line N); ...`` with the command that shows the traceback."""
    message = (str(error).strip().splitlines() or [""])[0]
    raised = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frames = traceback.extract_tb(error.__traceback__)
    # A SyntaxError names its line itself; a frame of this file is the call (FACTORY takes arguments)
    if frames and not isinstance(error, SyntaxError) and frames[-1].filename != __file__:
        raised += f" ({frames[-1].filename}, line {frames[-1].lineno})"
    if code is None:
        return f"{what} raised {raised}; fix the code there"
    return f"{what} raised {raised}; fix it, or run python -c {code!r} to see the whole traceback"


def loader_options(made: Any, spec: str, batch_size: int) -> dict[str, Any]:
    """DataLoader keyword arguments from what the factory returned, checked by building one."""
    expected = ("expected a dataset, a (dataset, transform) tuple or a dict of DataLoader "
                "keyword arguments with 'dataset'")
    if isinstance(made, dict):
        if "dataset" not in made:
            raise _SpecError(f"{spec}() returned a dict without 'dataset'; {expected}")
        options = {k: v for k, v in made.items() if k not in ("num_workers", "prefetch_factor")}
    elif isinstance(made, tuple):
        if len(made) != 2 or not _is_dataset(made[0]):
            raise _SpecError(f"{spec}() returned a tuple of {len(made)} that is not "
                             f"(dataset, transform); {expected}")
        options = {"dataset": made[0], "transform": made[1]}
    elif _is_dataset(made):
        options = {"dataset": made}
    else:
        raise _SpecError(f"{spec}() returned {type(made).__name__}; {expected}")
    if "sampler" not in options and "batch_size" not in options:
        options["batch_size"] = batch_size
    try:
        DataLoader(**options).close()
    except (TypeError, ValueError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise _SpecError(f"DataLoader refused what {spec}() returned: {message}") from None
    except Exception as error:  # the dataset's own code (its __len__, say) raised
        raise _SpecError(_failed(f"building a DataLoader of what {spec}() returned", error, None)) from None
    return options


def _is_dataset(value: Any) -> bool:
    """Whether ``value`` could be a dataset: indexable with a length, or iterable (a stream)."""
    if value is None or isinstance(value, (str, bytes, numbers.Number)):
        return False
    kind = type(value)
    return (hasattr(kind, "__getitem__") and hasattr(kind, "__len__")) or hasattr(kind, "__iter__")


def _measure(options: dict[str, Any], workers: int | str, prefetch: int | None, seconds: float,
             memory: PeakMemory) -> dict[str, Any]:
    label = f"num_workers={workers}"
    label += f", prefetch_factor={prefetch}" if prefetch is not None else ""
    result: dict[str, Any] = {"setting": label, "num_workers": workers,
                              "prefetch_factor": prefetch, "error": None}
    setting: dict[str, Any] = {"num_workers": workers}
    if prefetch is not None:
        setting["prefetch_factor"] = prefetch
    try:
        got = measure_loader({**options, **setting}, seconds, memory,
                             default_batch=int(options.get("batch_size") or 1))
    except Exception as error:  # shown in its row; the other settings still run
        result["error"] = f"{type(error).__name__}: {error}".splitlines()[0]
        return result
    result.update(samples_per_s=got.rate, peak_pss_mib=got.peak_pss / _MIB,
                  chosen_workers=got.num_workers, chosen_prefetch=got.prefetch,
                  reason=got.reason, tuning=got.tuning, batches=got.batches, epochs=got.epochs)
    return result


def format_table(results: list[dict[str, Any]]) -> str:
    """A row per setting; the best fixed one and auto's marked, auto's choice beside it."""
    fixed = [r for r in results if r["num_workers"] != "auto" and not r["error"]
             and r.get("samples_per_s") == r.get("samples_per_s")]  # NaN: no timed batch
    best = max(fixed, key=lambda r: r["samples_per_s"], default=None)
    cells = [["setting", "samples/s", "peak MiB", "x best", "", "auto chose / error"]]
    for r in results:
        auto = r["num_workers"] == "auto"
        ratio = None if best is None or r["error"] else r["samples_per_s"] / best["samples_per_s"]
        chose = ""
        if auto and not r["error"]:
            chose = f"num_workers={r['chosen_workers']}"
            if r["chosen_prefetch"] is not None:
                chose += f", prefetch {r['chosen_prefetch']}"
            chose += f": {r['reason']}" if r["reason"] else " (no tuning decision)"
        mark = "<- auto" if auto else ("<- best fixed" if r is best else "")
        cells.append([r["setting"], cell(r.get("samples_per_s"), ",.0f"),
                      cell(r.get("peak_pss_mib"), ",.0f"), cell(ratio, ".2f"), mark,
                      r["error"] or chose])
    table = aligned(cells, "<>>><<")
    epochs = max((r.get("epochs") or 1 for r in results), default=1)
    if epochs > 1:
        table += (f"\n(the data ran out: runs took up to {epochs} epochs; auto's choice is "
                  "that of the last one)")
    return table


def _int_list(minimum: int) -> Callable[[str], list[int]]:
    def parse(text: str) -> list[int]:
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not values or not all(v.isdigit() and int(v) >= minimum for v in values):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated integers >= {minimum}; got {text!r}")
        return [int(v) for v in values]

    return parse


def worker_list(text: str) -> list[int]:
    """An argparse type: comma-separated ``num_workers`` values, each as :func:`worker_count` reads it
    (``tune`` and ``bench`` take it)."""
    values = [worker_count(v) for v in text.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers of workers; got {text!r}")
    return values
