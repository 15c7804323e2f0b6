"""The printed report: the main table, the tables of the workloads that compare our loader's
settings, the targets and the machine the numbers came from."""

from __future__ import annotations

from .output import aligned, cell
from .workloads import BASELINE, LOAD_ONLY, MONITOR, OURS, PRELOAD, STEP_ONLY, THREAD

# (title, row key, format spec); the (min-max) column has no key of its own.
_COLUMNS = [
    ("workload", "workload", ""), ("loader", "loader", ""), ("workers", "num_workers", ""),
    ("quiet", "quiet_reps", ""), ("samples/s", "samples_per_s", ",.0f"),
    ("x no-loader", "vs_no_loader", ".2f"),
    ("(min-max)", None, None), ("ours/torch", "vs_torch", ".2f"),
    ("x serial", "vs_serial", ".2f"),
    ("1st batch ms", "first_batch_ms", ".0f"), ("peak PSS MiB", "peak_pss_mib", ".0f"),
    ("peak mem MiB", "peak_memory_mib", ".0f"),
    ("CPU us/sample", "cpu_us_per_sample", ".2f"),
    ("timed CPU us/sample", "timed_cpu_us_per_sample", ".2f"), ("others' CPUs", "others_cpus", ".2f"),
    ("GB/s", "bytes_per_s", ".2f"), ("x memcpy", "vs_memcpy", ".2f"),
]


def _cell(row: dict | None, key: str | None, spec: str | None) -> str:
    if row is None:
        return "-"
    if key == "quiet_reps":
        return f"{row['quiet_reps']}/{row['reps']}"
    if key is None:
        low, high = row.get("vs_no_loader_min"), row.get("vs_no_loader_max")
        return "" if low is None or row["loader"] == BASELINE else f"{low:.2f}-{high:.2f}"
    value = row.get(key)
    return cell(value / 1e9 if key == "bytes_per_s" and value is not None else value, spec)


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned plain-text table."""
    cells = [[title for title, _, _ in _COLUMNS]]
    cells += [[_cell(row, key, spec) for _, key, spec in _COLUMNS] for row in rows]
    return aligned(cells, "<<<")


def format_settings(rows: list[dict]) -> str:
    """Tables for the preload, threads-vs-processes and monitoring workloads present."""
    find = lambda name, loader, n: next((r for r in rows if (r["workload"], r["loader"],
                                        r["num_workers"]) == (name, loader, n)), None)
    sections = (_preload_table(rows, find), _threads_table(rows, find), _monitor_table(rows, find))
    return "\n\n".join(section for section in sections if section)


def _preload_table(rows: list[dict], find) -> str:
    counts = list(dict.fromkeys(r["num_workers"] for r in rows if r["workload"] == "preload"))
    if not counts:
        return ""
    cells = [["workers", "load ms", "step ms", "preload off ms", "preload on ms",
              "overlap off", "overlap on", "(min-max)", "ceiling here"]]
    for n in counts:
        load, step, off, on = (find("preload", label, n)
                               for label in (LOAD_ONLY, STEP_ONLY, OURS, PRELOAD))
        span = "" if on is None or on.get("overlap_min") is None else \
            f"{on['overlap_min']:.2f}-{on['overlap_max']:.2f}"
        cells.append([str(n)] + [_cell(r, "ms_per_batch", ".1f") for r in (load, step, off, on)]
                     + [_cell(off, "overlap", ".2f"), _cell(on, "overlap", ".2f"), span,
                        _cell(on, "overlap_ceiling", ".2f")])
    return ("preload (decode batches; consumer: touch + a matmul step calibrated to the load, "
            "one BLAS thread; overlap = (step + load) / measured time per batch):\n"
            + aligned(cells, "<"))


def _threads_table(rows: list[dict], find) -> str:
    names = [n for n in ("cv2", "pyloop") if any(r["workload"] == n for r in rows)]
    if not names:
        return ""
    cells = [["workload", "workers", "process samples/s", "thread samples/s", "thread/process",
              "process x no-loader", "thread x no-loader"]]
    for name in names:
        for n in dict.fromkeys(r["num_workers"] for r in rows
                               if r["workload"] == name and r["loader"] == THREAD):
            process, thread = find(name, OURS, n), find(name, THREAD, n)
            cells.append([name, str(n), _cell(process, "samples_per_s", ",.0f"),
                          _cell(thread, "samples_per_s", ",.0f"),
                          _cell(thread, "vs_process", ".2f"),
                          _cell(process, "vs_no_loader", ".2f"),
                          _cell(thread, "vs_no_loader", ".2f")])
    return ("thread vs process workers (cv2: GIL released; pyloop: GIL held):\n"
            + aligned(cells, "<<"))


def _monitor_table(rows: list[dict], find) -> str:
    counts = list(dict.fromkeys(r["num_workers"] for r in rows if r["loader"] == MONITOR))
    if not counts:
        return ""
    cells = [["workers", "default samples/s", "monitor samples/s", "overhead %"]]
    for n in counts:
        default, on = find("monitor", OURS, n), find("monitor", MONITOR, n)
        cells.append([str(n), _cell(default, "samples_per_s", ",.0f"),
                      _cell(on, "samples_per_s", ",.0f"),
                      _cell(on, "monitor_overhead_pct", ".1f")])
    return ("monitoring (DATALOADER_MONITOR=1 into a NullHandler, against the default; "
            "per-batch stats recording is always on in both):\n" + aligned(cells, "<"))


def format_targets(found: list[dict]) -> str:
    lines = []
    for t in found:
        note = t.get("ceiling_note")
        if note is None and t.get("ideal") is not None:  # reports written before ceiling_note
            note = f"{t['ideal']:.2f} for 2 plain processes here"
        lines.append(f"  [{'met' if t['met'] else 'NOT met'}] {t['target']}: {t['value']:.2f} "
                     f"(needs {t['op']} {t['threshold']:g}{'; ' + note if note else ''})")
    return "\n".join(lines)


def format_report(result: dict) -> str:
    config, info = result["config"], result["machine"]
    lines = [
        f"machine: {info['cpu']}, {info['cpus_available']} of {info['cpus']} CPUs, "
        f"{info['memory_gib']} GiB; Python {info['python']}, numpy {info['numpy']}, "
        f"torch {info['torch'] or '(absent)'}; "
        f"memcpy {result['memcpy_bytes_per_s'] / 1e9:.1f} GB/s",
        f"{config['reps']} rep(s), {config['seconds']:g} s per run; medians (of the quiet reps "
        f"where there are any), ratios paired within a rep; {result['wall_s']:.0f} s in all; "
        f"{len(result['discarded_runs'])} runs disturbed by other processes were measured again",
    ]
    if not result["torch"]:
        lines.append(
            "PyTorch not measured (not importable, or --no-torch): ours and the baselines only."
        )
    lines.append("checks (our batches == the plain loop's): "
                 + ", ".join(f"{k} {v}" for k, v in result["checks"].items()))
    lines += ["", format_table(result["rows"])]
    settings = format_settings(result["rows"])
    if settings:
        lines += ["", settings]
    if result["targets"]:
        said = any("workers" in t["target"] for t in result["targets"])
        header = "targets (2 workers unless said):" if said else "targets (2 workers):"
        lines += ["", header, format_targets(result["targets"])]
    for row in result["rows"]:
        if row["leftover_processes"]:
            lines.append(f"warning: {row['loader']} left {row['leftover_processes']} process(es) "
                         f"running after closing its {row['workload']} iterator")
    return "\n".join(lines)
