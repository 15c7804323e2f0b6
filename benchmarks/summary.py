"""From runs to table rows: medians over the quiet repetitions, ratios paired within a
repetition, the numbers derived for the settings workloads, and the issue's targets."""

from __future__ import annotations

from .measure import Measurement
from .repetitions import median, paired, paired_median
from .workloads import (
    BASELINE, COLLATOR_FLOOR, IDEAL, LOAD_ONLY, MONITOR, OURS, PRELOAD, SMALL, STEP_ONLY, THREAD, TORCH,
    WORKLOADS,
)

_MIB = 2**20
# Row order within a workload; the no-loader baseline comes last.
_ORDER = (LOAD_ONLY, STEP_ONLY, OURS, THREAD, PRELOAD, MONITOR, TORCH, IDEAL, COLLATOR_FLOOR)


def summarize(runs: list[Measurement], memcpy: list[float], cpus: int = 2) -> list[dict]:
    """One row per (workload, loader, num_workers); the baseline's num_workers is None."""
    rows = []
    for name in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == name]
        base = {(r.rep, r.num_workers): r for r in mine if r.loader == BASELINE}
        for loader in _ORDER:
            for count in dict.fromkeys(r.num_workers for r in mine):
                group = [r for r in mine if (r.loader, r.num_workers) == (loader, count)]
                torch_runs = {r.rep: r for r in mine if (r.loader, r.num_workers) == (TORCH, count)}
                if group:
                    rows.append(_row(name, loader, count, group, base, torch_runs, memcpy))
                    _derived(rows[-1], _quiet(group), mine, cpus)
        if base:
            rows.append(_row(name, BASELINE, None, list(base.values()), base, {}, memcpy))
    return rows


def _quiet(group: list[Measurement]) -> list[Measurement]:
    # Runs other processes disturbed say more about them than about the loader: medians
    # are taken over the undisturbed repetitions wherever there is one.
    return [r for r in group if not r.disturbed] or group


def _row(name: str, loader: str, count: int | None, group: list[Measurement], base: dict,
         torch_runs: dict, memcpy: list[float]) -> dict:
    total, quiet = len(group), sum(not r.disturbed for r in group)
    group = _quiet(group)
    rate = lambda r, other: r.rate / other.rate
    by_group = lambda r: (r.rep, r.num_workers)
    vs_base = [v for v in paired(group, base, rate, by_group) if v == v]
    row = {
        "workload": name, "loader": loader, "num_workers": count,
        "reps": total, "quiet_reps": quiet,
        "samples_per_s": median([r.rate for r in group]),
        "vs_no_loader": median(vs_base), "vs_no_loader_min": min(vs_base, default=None),
        "vs_no_loader_max": max(vs_base, default=None),
        "first_batch_ms": median([r.first_batch_s * 1e3 for r in group]),
        "peak_pss_mib": median([r.peak_pss / _MIB for r in group]),
        "peak_rss_mib": median([r.peak_rss / _MIB for r in group]),
        "peak_memory_mib": median([r.peak_memory / _MIB for r in group if r.peak_memory]),
        "cpu_us_per_sample": median([r.cpu_s / r.samples_total * 1e6 for r in group]),
        "timed_cpu_us_per_sample": median([_cpu_per_sample(r) * 1e6 for r in group]),
        "others_cpus": median([r.others_cpus for r in group]),
        "leftover_processes": max((r.leftover_processes for r in group), default=0),
        "vs_torch": None, "first_batch_vs_torch": None, "pss_vs_torch": None,
        "memory_vs_torch": None,
    }
    if loader == OURS and torch_runs:
        row["vs_torch"] = paired_median(group, torch_runs, rate)
        row["first_batch_vs_torch"] = paired_median(
            group, torch_runs, lambda r, t: r.first_batch_s / t.first_batch_s)
        row["pss_vs_torch"] = paired_median(group, torch_runs, lambda r, t: r.peak_pss / t.peak_pss)
        row["memory_vs_torch"] = paired_median(
            group, torch_runs,
            lambda r, t: r.peak_memory / t.peak_memory if r.peak_memory and t.peak_memory else None)
    if name == "images":
        row["bytes_per_s"] = median([r.rate * r.bytes_per_sample for r in group])
        row["vs_memcpy"] = median([r.rate * r.bytes_per_sample / memcpy[r.rep] for r in group])
    stages = [r.stages_ms for r in group if r.stages_ms]
    row["stages_ms"] = stages[-1] if stages else None  # the last repetition's loader.stats()
    return row


def _derived(row: dict, group: list[Measurement], runs: list[Measurement], cpus: int) -> None:
    """The settings workloads' numbers, paired within a repetition: preload's overlap and
    its ceiling on this machine, workers against our serial loader, threads against
    processes, monitoring's overhead."""
    loader, count = row["loader"], row["num_workers"]
    others = lambda label: {r.rep: r for r in runs if (r.loader, r.num_workers) == (label, count)}
    if row["workload"] == "preload":
        size = WORKLOADS["preload"].batch_size
        row["ms_per_batch"] = median([size / r.rate * 1e3 for r in group])
        loads, steps = others(LOAD_ONLY), others(STEP_ONLY)
        reps = [r for r in group if r.rep in loads and r.rep in steps and loader in (OURS, PRELOAD)]
        overlap = [_overlap(r, loads[r.rep], steps[r.rep]) for r in reps]
        ceiling = [_ceiling(loads[r.rep], steps[r.rep], size, cpus) for r in reps]
        row["overlap"], row["overlap_ceiling"] = median(overlap), median(ceiling)
        row["overlap_min"], row["overlap_max"] = min(overlap, default=None), max(overlap, default=None)
    elif loader == OURS and count:
        serial = {r.rep: r for r in runs if (r.loader, r.num_workers) == (OURS, 0)}
        row["vs_serial"] = paired_median(group, serial, lambda r, s: r.rate / s.rate)
    elif loader == THREAD:
        row["vs_process"] = paired_median(group, others(OURS), lambda r, p: r.rate / p.rate)
    elif loader == MONITOR:
        row["monitor_overhead_pct"] = paired_median(
            group, others(OURS), lambda r, default: (default.rate / r.rate - 1) * 100)


def _overlap(run: Measurement, load: Measurement, step: Measurement) -> float:
    """(step time + load time) / measured time per batch: 1 runs them one after the other,
    2 hides the shorter of two equal ones completely."""
    return (1 / load.rate + 1 / step.rate) * run.rate


def _ceiling(load: Measurement, step: Measurement, size: int, cpus: int) -> float:
    """The most overlap ``cpus`` CPUs allow: per batch, neither the load nor the step can take
    less than alone, nor both together less than their CPU time spread over every CPU."""
    t_load, t_step = size / load.rate, size / step.rate
    cpu = (_cpu_per_sample(load) + _cpu_per_sample(step)) * size
    return (t_load + t_step) / max(t_load, t_step, cpu / max(1, cpus))


def _cpu_per_sample(run: Measurement) -> float:
    """CPU seconds per sample in the timed part (whole run for reports that lack it)."""
    if run.timed_cpu_s is not None and run.timed_samples:
        return run.timed_cpu_s / run.timed_samples
    return run.cpu_s / run.samples_total


# (workload, loader, num_workers, column, comparison, threshold, what the issue asked for)
TARGETS = [
    ("images", OURS, 2, "vs_no_loader", ">=", 1.6, "images >= 1.6x the no-loader rate"),
    ("images", OURS, 2, "vs_torch", ">=", 3.0, "images about 3x PyTorch"),
    ("tiny", OURS, 2, "vs_no_loader", ">=", 0.4, "tiny >= 0.4x the no-loader rate"),
    ("tiny", OURS, 2, "vs_torch", ">=", 8.0, "tiny about 8x PyTorch"),
    ("decode", OURS, 2, "vs_no_loader", ">=", 1.8, "decode >= 1.8x the no-loader rate"),
    *[(w, OURS, 2, "first_batch_vs_torch", "<=", 1.0, f"{w}: first batch no later than PyTorch's")
      for w in ("tiny", "images", "decode")],
    *[(w, OURS, 2, "pss_vs_torch", "<=", 1.0, f"{w}: peak PSS of the process tree <= PyTorch's")
      for w in ("tiny", "images", "decode")],
    # Not the wording: PSS misses shared memory no process maps (PyTorch's batches
    # between its worker and its main process); this counts every shared page once.
    *[(w, OURS, 2, "memory_vs_torch", "<=", 1.0,
       f"{w}: peak memory, unmapped shared memory included, <= PyTorch's")
      for w in ("tiny", "images", "decode")],
    # Small samples (issue 23): serial at the plain loop's speed, workers never slower.
    *[(w, OURS, 0, "vs_no_loader", ">=", 0.9, f"{w}: serial >= 0.9x the no-loader rate")
      for w in SMALL],
    *[(w, OURS, 2, "vs_serial", ">=", 1.0, f"{w}: 2 workers >= 1.0x our serial rate")
      for w in SMALL],
    *[(w, OURS, 2, "vs_no_loader", ">=", 0.5, f"{w}: 2 workers >= 0.5x the no-loader rate")
      for w in SMALL],
    *[("preload", PRELOAD, n, "overlap", ">=", 1.8,
       f"preload overlap >= 1.8 with step = load, {n} workers") for n in (0, 2)],
    *[("monitor", MONITOR, n, "monitor_overhead_pct", "<", 5.0,
       f"monitoring on costs < 5% (tiny batches), {n} workers") for n in (0, 2)],
]


def targets(rows: list[dict]) -> list[dict]:
    """The issue's targets this run can judge: value, whether met, and this machine's ceiling."""
    def find(workload: str, loader: str, workers: int) -> dict | None:
        key = (workload, loader, workers)
        found = (r for r in rows if (r["workload"], r["loader"], r["num_workers"]) == key)
        return next(found, None)

    found = []
    for workload, loader, workers, column, op, threshold, text in TARGETS:
        row, ideal = find(workload, loader, workers), find(workload, IDEAL, workers)
        value = None if row is None else row.get(column)
        if value is None:
            continue
        met = {">=": value >= threshold, "<=": value <= threshold, "<": value < threshold}[op]
        ceiling = ideal["vs_no_loader"] if ideal is not None and column == "vs_no_loader" else None
        note = None if ceiling is None else f"{ceiling:.2f} for {workers} plain processes here"
        floor = find(workload, COLLATOR_FLOOR, workers)
        if floor is not None and loader == OURS and column == "vs_no_loader":
            ceiling = floor["vs_no_loader"]
            note = f"{ceiling:.2f} for the plain loop with our collator here"
        if column == "overlap" and row.get("overlap_ceiling") is not None:
            ceiling = row["overlap_ceiling"]
            note = f"at most {ceiling:.2f} with this load's CPU time on these CPUs"
        found.append({"target": text, "column": column, "value": value, "threshold": threshold,
                      "op": op, "met": met, "ideal": ceiling, "ceiling_note": note})
    return found
