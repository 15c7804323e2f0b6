"""``--plot out.png``: throughput per workload x loader x workers, and the stage breakdown
of our loader's runs (``loader.stats()`` of the last repetition), in one PNG."""

from __future__ import annotations

# Stages shown, in pipeline order; "preload" only where the run had preload on.
STAGES = ("fetch", "transform", "collate", "transport", "wait", "preload")
_STAGE_COLOURS = dict(zip(STAGES, ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd")))
_LOADER_COLOURS = {
    "ours": "#4c72b0", "ours-thread": "#64b5cd", "ours+preload": "#55a868",
    "ours+monitor": "#8172b2", "load-only": "#8c8c8c", "step-only": "#c7c7c7",
    "torch": "#dd8452", "no-loader": "#937860", "ideal": "#da8bc3",
}


class PlotUnavailable(RuntimeError):
    """matplotlib cannot be imported."""


def pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise PlotUnavailable(
            "--plot needs matplotlib, which is not importable here; install it "
            "(pip install matplotlib) or leave --plot out."
        ) from error
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def plot(rows: list[dict], path: str, title: str = "") -> None:
    """Write the figure for ``rows`` (as :func:`summarize` makes them) to ``path``."""
    plt = pyplot()
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    heights = [max(len([r for r in rows if r["workload"] == w]), 2) for w in workloads]
    figure, axes = plt.subplots(
        len(workloads), 2, figsize=(15, 1.2 + 0.42 * sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights, "width_ratios": (1, 1.25)},
    )
    for (left, right), workload in zip(axes, workloads):
        mine = [r for r in rows if r["workload"] == workload]
        _throughput(left, workload, mine)
        _stages(right, workload, mine)
    handles = [plt.Rectangle((0, 0), 1, 1, color=_STAGE_COLOURS[s]) for s in STAGES]
    figure.legend(handles, STAGES, loc="upper right", ncol=len(STAGES), fontsize=8,
                  title="stages (right-hand panels)", title_fontsize=8, frameon=False)
    if title:
        figure.suptitle(title, fontsize=10, x=0.01, ha="left")
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.5 / figure.get_figheight()))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _label(row: dict) -> str:
    workers = row["num_workers"]
    return row["loader"] if workers is None else f"{row['loader']}, {workers} w"


def _throughput(axis, workload: str, rows: list[dict]) -> None:
    rows = [r for r in rows if r.get("samples_per_s")]
    values = [r["samples_per_s"] for r in rows]
    colours = [_LOADER_COLOURS.get(r["loader"], "#999999") for r in rows]
    positions = range(len(rows))
    axis.barh(positions, values, color=colours)
    axis.set_yticks(list(positions), [_label(r) for r in rows], fontsize=8)
    axis.invert_yaxis()
    top = max(values, default=1)
    for y, value in zip(positions, values):
        axis.text(value + top * 0.01, y, f"{value:,.0f}", va="center", fontsize=7)
    axis.set_xlim(0, top * 1.18)
    axis.xaxis.set_major_formatter(lambda value, _: f"{value:,.0f}")
    axis.set_title(f"{workload}: samples/s", fontsize=9, loc="left")
    axis.tick_params(axis="x", labelsize=7)


def _stages(axis, workload: str, rows: list[dict]) -> None:
    rows = [r for r in rows if r.get("stages_ms")]
    if not rows:
        axis.set_axis_off()
        axis.text(0.5, 0.5, "no stage times (not our loader)", ha="center", va="center")
        return
    present = [s for s in STAGES if any(s in r["stages_ms"] for r in rows)]
    width = 0.8 / len(present)
    top = max(v for r in rows for s, v in r["stages_ms"].items() if s in present) or 1.0
    for k, stage in enumerate(present):
        values = [r["stages_ms"].get(stage, 0.0) for r in rows]
        positions = [i - 0.4 + width * (k + 0.5) for i in range(len(rows))]
        axis.barh(positions, values, height=width, color=_STAGE_COLOURS[stage], label=stage)
        for y, value in zip(positions, values):
            if value >= top * 0.005:
                axis.text(value + top * 0.01, y, f"{value:.2f}", va="center", fontsize=6)
    axis.set_yticks(range(len(rows)), [_label(r) for r in rows], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, top * 1.15)
    axis.set_title(f"{workload}: our loader's stages, mean ms per batch "
                   "(loader.stats() of the last rep)", fontsize=9, loc="left")
    axis.tick_params(axis="x", labelsize=7)
