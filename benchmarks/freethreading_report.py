"""The free-threading bench's summary: a row per (workload, num_workers, configuration), the
targets, and their tables.

Ratios are formed between two runs of the same repetition and quoted as medians
(``repetitions.py``): 3.14t threads over 3.14t processes, and 3.14t threads over 3.14 (GIL)
processes, of samples/s and of peak PSS. The targets, from issue 49, are judged on 3.14t:
threads >= 1.0x processes' samples/s on every workload; >= 1.3x on the pure-Python workload
at 8 workers ("n/a" where 8 workers were not run); threads' peak PSS <= 0.6x processes'. A
verdict measured where the ``ft`` interpreter had the GIL on (a stand-in, or an extension that
turned it on) is marked: it says nothing about free threading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .freethreading_runs import CONFIGS, FT_PROCESSES, FT_THREADS, GIL_PROCESSES, Config, Run
from .freethreading_workloads import PURE_PYTHON
from .output import aligned, cell
from .repetitions import median, paired_median

PURE_PYTHON_WORKERS = 8


@dataclass(frozen=True)
class Target:
    key: str
    what: str
    floor: float | None = None  # the ratio must be >= floor ...
    ceiling: float | None = None  # ... or <= ceiling


TARGETS = (
    Target("speed", "3.14t threads >= 1.0x 3.14t processes' samples/s", floor=1.0),
    Target("python", f"{PURE_PYTHON} at {PURE_PYTHON_WORKERS} workers: 3.14t threads >= 1.3x "
           "3.14t processes' samples/s", floor=1.3),
    Target("memory", "3.14t threads' peak PSS <= 0.6x 3.14t processes'", ceiling=0.6),
)


def _ratio(attribute: str) -> Callable[[Run, Run], float | None]:
    def compare(run: Run, base: Run) -> float | None:
        a, b = getattr(run, attribute), getattr(base, attribute)
        return a / b if a is not None and b else None
    return compare


def _runs(runs: Sequence[Run], workload: str, workers: int, config: Config) -> list[Run]:
    return [r for r in runs if (r.workload, r.workers, r.config) == (workload, workers, config)
            and not r.error]


def _by_rep(runs: Sequence[Run], workload: str, workers: int, config: Config) -> dict[int, Run]:
    return {r.rep: r for r in _runs(runs, workload, workers, config)}


def summarize(runs: Sequence[Run]) -> tuple[list[dict], list[dict]]:
    """Rows per (workload, num_workers, configuration), and the targets' verdicts."""
    rows: list[dict] = []
    targets: list[dict] = []
    for workload in dict.fromkeys(r.workload for r in runs):
        counts = list(dict.fromkeys(r.workers for r in runs if r.workload == workload))
        for workers in counts:
            present = [c for c in CONFIGS if any(r.config == c for r in runs
                                                 if (r.workload, r.workers) == (workload, workers))]
            rows += [_row(runs, workload, workers, c) for c in present]
            targets += _targets(runs, workload, workers)
        if workload == PURE_PYTHON and PURE_PYTHON_WORKERS not in counts:
            targets.append(_target_row(TARGETS[1], workload, PURE_PYTHON_WORKERS, None, "n/a",
                                       f"{PURE_PYTHON_WORKERS} workers not run (--workers "
                                       f"{PURE_PYTHON_WORKERS} on a machine with that many cores)"))
    return rows, targets


def _row(runs: Sequence[Run], workload: str, workers: int, config: Config) -> dict:
    group = _runs(runs, workload, workers, config)
    threads = {} if config == FT_THREADS else _by_rep(runs, workload, workers, FT_THREADS)
    every = [r for r in runs if (r.workload, r.workers, r.config) == (workload, workers, config)]
    rate, pss = _ratio("rate"), _ratio("peak_pss_mib")
    inverse = (lambda f: lambda run, base: f(base, run))  # threads over this configuration
    return {
        "workload": workload, "workers": workers, "config": config.label,
        "role": config.role, "worker_type": config.worker_type,
        "samples_per_s": median(r.rate for r in group),
        "peak_pss_mib": median(r.peak_pss_mib for r in group),
        "threads_vs_this": paired_median(group, threads, inverse(rate)),
        "threads_pss_vs_this": paired_median(group, threads, inverse(pss)),
        "others_cpus": median(r.others_cpus for r in group),
        "gil_enabled": sorted({r.gil_enabled for r in group if r.gil_enabled is not None}),
        "start_method": next((r.start_method for r in group if r.start_method), None),
        "python": next((r.python for r in group if r.python), None),
        "reps": len(group), "errors": [r.error for r in every if r.error],
    }


def _targets(runs: Sequence[Run], workload: str, workers: int) -> list[dict]:
    threads = _runs(runs, workload, workers, FT_THREADS)
    processes = _by_rep(runs, workload, workers, FT_PROCESSES)
    values = {"speed": paired_median(threads, processes, _ratio("rate")),
              "memory": paired_median(threads, processes, _ratio("peak_pss_mib"))}
    values["python"] = values["speed"]
    gil = any(r.gil_enabled for r in threads) or any(r.gil_enabled for r in processes.values())
    chosen = [t for t in TARGETS if t.key != "python"
              or (workload == PURE_PYTHON and workers == PURE_PYTHON_WORKERS)]
    found = []
    for target in chosen:
        value = values[target.key]
        missing = "" if threads and processes else "3.14t threads or processes not measured; "
        note = "; the GIL was on: not a free-threaded measure" if gil else ""
        found.append(_target_row(target, workload, workers, value, _verdict(target, value),
                                 f"{missing}{_x(value)}{note}"))
    return found


def _target_row(target: Target, workload: str, workers: int, value: float | None, verdict: str,
                measured: str) -> dict:
    return {"workload": workload, "workers": workers, "target": target.key, "what": target.what,
            "ratio": value, "verdict": verdict, "value": measured}


def _verdict(target: Target, value: float | None) -> str:
    """PASS or FAIL; "-" where nothing was measured."""
    if value is None:
        return "-"
    if target.floor is not None and value < target.floor:
        return "FAIL"
    if target.ceiling is not None and value > target.ceiling:
        return "FAIL"
    return "PASS"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def format_tables(rows: list[dict], targets: list[dict], whats: dict[str, str]) -> str:
    """A table per workload (``whats``: its description), then the targets' table."""
    parts = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        cells = [["workers", "configuration", "samples/s", "peak PSS MiB", "threads x this",
                  "PSS threads x this", "GIL", "start method", "others' CPUs", "error"]]
        for r in (r for r in rows if r["workload"] == workload):
            gil = "/".join("on" if g else "off" for g in r["gil_enabled"]) or "-"
            cells.append([
                str(r["workers"]), r["config"], cell(r["samples_per_s"], ",.0f"),
                cell(r["peak_pss_mib"], ",.0f"), cell(r["threads_vs_this"], ".2f"),
                cell(r["threads_pss_vs_this"], ".2f"), gil, r["start_method"] or "-",
                cell(r["others_cpus"], ".2f"), "; ".join(r["errors"][:1]),
            ])
        parts.append(f"{workload}: {whats.get(workload, '')}\n"
                     + aligned(cells, ">" + "<" + ">" * 4 + "<<><"))
    goals = [["workload", "workers", "target", "verdict", "measured"]]
    goals += [[t["workload"], str(t["workers"]), t["what"], t["verdict"], t["value"]]
              for t in targets]
    parts.append("targets (3.14t; medians over repetitions of ratios paired within one)\n"
                 + aligned(goals, "<><<<"))
    return "\n\n".join(parts)


def headline(rows: list[dict]) -> list[dict[str, Any]]:
    """Per (workload, num_workers): 3.14t threads over 3.14t processes and over 3.14 processes,
    samples/s and peak PSS (the JSON's ``ratios`` and the docs' table)."""
    found = []
    for r in rows:
        if r["config"] != FT_THREADS.label:
            continue
        by = {x["config"]: x for x in rows if (x["workload"], x["workers"]) ==
              (r["workload"], r["workers"])}
        ft, gil = by.get(FT_PROCESSES.label, {}), by.get(GIL_PROCESSES.label, {})
        found.append({"workload": r["workload"], "workers": r["workers"],
                      "vs_ft_processes": ft.get("threads_vs_this"),
                      "pss_vs_ft_processes": ft.get("threads_pss_vs_this"),
                      "vs_gil_processes": gil.get("threads_vs_this"),
                      "pss_vs_gil_processes": gil.get("threads_pss_vs_this")})
    return found
