"""The autotune bench's summary: a row per (workload, setting), the targets, and their tables.

Every ratio is formed between two runs of the same repetition and the tables quote the median
of those ratios (``repetitions.py``). The best fixed setting of a workload is the fixed
``num_workers`` with the highest median rate; a workload is loader-bound where that setting
is at least :data:`LOADER_BOUND` times as fast as ``num_workers=0``. The column "others' CPUs"
is how many CPUs' worth of time other processes used during a run (``measure.CpuClock``): where
it is well above 0, the row's speed says more about the neighbours than about the loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .autotune_runs import AUTO, Run
from .output import aligned, cell
from .repetitions import median, paired_median

LOADER_BOUND = 1.2  # best fixed over num_workers=0, from which a workload is loader-bound
SETTLE_S, SETTLE_BATCHES = 2.0, 200


@dataclass(frozen=True)
class Target:
    key: str
    what: str


TARGETS = (
    Target("vs_best", "auto >= 0.95x the best fixed setting's samples/s"),
    Target("vs_serial", f"auto >= {LOADER_BOUND:g}x num_workers=0 where loader-bound "
           f"(best fixed >= {LOADER_BOUND:g}x num_workers=0)"),
    Target("memory", "auto's peak tree PSS <= the best fixed setting's +10%"),
    Target("settle", f"auto settled (its last decision) within {SETTLE_S:g} s or "
           f"{SETTLE_BATCHES} batches"),
)


def _ratio(attribute: str) -> Callable[[Run, Run], float | None]:
    def compare(run: Run, base: Run) -> float | None:
        a, b = getattr(run, attribute), getattr(base, attribute)
        return a / b if a is not None and b else None
    return compare


def _runs(runs: Sequence[Run], workload: str, setting: str) -> list[Run]:
    return [r for r in runs if r.workload == workload and r.setting == setting and not r.error]


def _by_rep(runs: Sequence[Run], workload: str, setting: str | None) -> dict[Any, Run]:
    return {r.rep: r for r in _runs(runs, workload, setting)} if setting is not None else {}


def best_fixed(runs: Sequence[Run], workload: str) -> str | None:
    """The fixed setting of ``workload`` with the highest median rate, or None."""
    rates = {s: median(r.rate for r in _runs(runs, workload, s))
             for s in dict.fromkeys(r.setting for r in runs if r.workload == workload)
             if s != AUTO}
    known = {s: rate for s, rate in rates.items() if rate is not None}
    return max(known, key=lambda s: known[s]) if known else None


def summarize(runs: Sequence[Run]) -> tuple[list[dict], list[dict]]:
    """Rows per (workload, setting), and per workload each target's value and verdict."""
    rows: list[dict] = []
    targets: list[dict] = []
    for workload in dict.fromkeys(r.workload for r in runs):
        best = best_fixed(runs, workload)
        serial = _by_rep(runs, workload, "0")
        for setting in dict.fromkeys(r.setting for r in runs if r.workload == workload):
            rows.append(_row(runs, workload, setting, best, serial))
        targets += _targets(runs, workload, best, serial)
    return rows, targets


def _row(runs: Sequence[Run], workload: str, setting: str, best: str | None,
         serial: dict[Any, Run]) -> dict:
    group = _runs(runs, workload, setting)
    last = group[-1] if group else None
    errors = [r.error for r in runs if r.workload == workload and r.setting == setting and r.error]
    rate = _ratio("rate")
    return {
        "workload": workload, "setting": setting, "best_fixed": setting == best,
        "samples_per_s": median(r.rate for r in group),
        "vs_serial": paired_median(group, serial, rate),
        "vs_best": paired_median(group, _by_rep(runs, workload, best), rate),
        "peak_pss_mib": median(r.peak_pss_mib for r in group),
        "num_workers": last.num_workers if last else None,
        "prefetch": last.prefetch if last else None,
        "settle_s": median(r.settle_s for r in group),
        "settle_batch": median(r.settle_batch for r in group),
        "reason": last.reason if last else None,
        "epochs": max((r.epochs for r in group), default=None),
        "others_cpus": median(r.others_cpus for r in group),
        "errors": errors,
    }


def _targets(runs: Sequence[Run], workload: str, best: str | None,
             serial: dict[Any, Run]) -> list[dict]:
    auto = _runs(runs, workload, AUTO)
    best_runs = _by_rep(runs, workload, best)
    vs_best = paired_median(auto, best_runs, _ratio("rate"))
    vs_serial = paired_median(auto, serial, _ratio("rate"))
    best_vs_serial = paired_median(_runs(runs, workload, best or ""), serial, _ratio("rate"))
    memory = paired_median(auto, best_runs, _ratio("peak_pss_mib"))
    settle_s = median(r.settle_s for r in auto)
    settle_batch = median(r.settle_batch for r in auto)
    none = "no auto run completed; " if not auto else ""
    verdicts: dict[str, tuple[str, str]] = {
        "vs_best": (_verdict(vs_best, lambda v: v >= 0.95),
                    f"{none}{_x(vs_best)} (best fixed: num_workers={best})"),
        "memory": (_verdict(memory, lambda v: v <= 1.10), f"{none}{_x(memory)}"),
        "settle": (_verdict(settle_s, lambda _: _settled(settle_s, settle_batch)),
                   f"{none}{cell(settle_s, '.2f')} s, batch {cell(settle_batch, '.0f')}"),
    }
    bound = f"best fixed {_x(best_vs_serial)} num_workers=0"
    if not serial:
        verdicts["vs_serial"] = ("n/a", "no num_workers=0 run")
    elif best_vs_serial is not None and best_vs_serial < LOADER_BOUND:
        verdicts["vs_serial"] = ("n/a", f"{none}{_x(vs_serial)}; not loader-bound: {bound}")
    else:
        verdicts["vs_serial"] = (_verdict(vs_serial, lambda v: v >= LOADER_BOUND),
                                 f"{none}{_x(vs_serial)}; {bound}")
    return [{"workload": workload, "target": t.key, "what": t.what,
             "verdict": verdicts[t.key][0], "value": verdicts[t.key][1],
             "ratio": {"vs_best": vs_best, "vs_serial": vs_serial, "memory": memory}.get(t.key),
             "settle_s": settle_s if t.key == "settle" else None,
             "settle_batch": settle_batch if t.key == "settle" else None} for t in TARGETS]


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _settled(seconds: float | None, batch: float | None) -> bool:
    return (seconds is not None and seconds <= SETTLE_S) or (
        batch is not None and batch <= SETTLE_BATCHES)


def _verdict(value: float | None, passes: Callable[[float], bool]) -> str:
    """PASS or FAIL; "-" where nothing was measured (every run of it failed)."""
    if value is None:
        return "-"
    return "PASS" if passes(value) else "FAIL"


def format_tables(rows: list[dict], targets: list[dict], whats: dict[str, str]) -> str:
    """A table per workload (``whats``: its description), then the targets' table."""
    parts = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        cells = [["num_workers", "samples/s", "x w=0", "x best", "peak PSS MiB", "workers",
                  "prefetch", "settle s", "settle batch", "others' CPUs", "",
                  "last decision / error"]]
        for r in (r for r in rows if r["workload"] == workload):
            mark = "best fixed" if r["best_fixed"] else ("<- auto" if r["setting"] == AUTO else "")
            note = "; ".join(r["errors"][:1]) or r["reason"] or ""
            auto = r["setting"] == AUTO
            cells.append([
                r["setting"], cell(r["samples_per_s"], ",.0f"), cell(r["vs_serial"], ".2f"),
                cell(r["vs_best"], ".2f"), cell(r["peak_pss_mib"], ",.0f"),
                cell(r["num_workers"]), cell(r["prefetch"]),
                cell(r["settle_s"], ".2f") if auto else "", cell(r["settle_batch"], ".0f") if auto
                else "", cell(r["others_cpus"], ".2f"), mark, note,
            ])
        table = aligned(cells, "<" + ">" * 9 + "<<")
        parts.append(f"{workload}: {whats.get(workload, '')}\n{table}")
    goals = [["workload", "target", "verdict", "measured"]]
    goals += [[t["workload"], t["what"], t["verdict"], t["value"]] for t in targets]
    parts.append("targets (medians over repetitions of ratios paired within one)\n"
                 + aligned(goals, "<<<<"))
    return "\n\n".join(parts)
