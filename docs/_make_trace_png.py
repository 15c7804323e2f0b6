"""Draw docs/img/trace.png: the tracks of a DATALOADER_TRACE file as a timeline.

Run from the repository root (needs matplotlib: ``pip install matplotlib``)::

    python docs/_make_trace_png.py [trace.json]

Without an argument it first runs a small loader (2 workers, preload) with
``DATALOADER_TRACE`` set, then draws the trace it wrote. With a path it draws
that trace instead, so the script also works on your own traces.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "img" / "trace.png"
COLORS = {
    "fetch": "#4c72b0",
    "transform": "#dd8452",
    "collate": "#55a868",
    "transport": "#8172b3",
    "wait": "#c44e52",
    "preload": "#937860",
}


def make_trace(path: str) -> None:
    """Run two epochs' worth of a small image workload with the trace switch on."""
    os.environ["DATALOADER_TRACE"] = path
    from dataloader import ArrayDataset, DataLoader, RandomSampler
    from dataloader.transform import Transform

    class Augment(Transform):
        def apply(self, sample):
            image, label = sample
            time.sleep(0.001)  # stands for decoding and augmentation
            return np.ascontiguousarray(image[:, ::-1], dtype=np.float32) / 255, label

    images = np.random.default_rng(0).integers(0, 256, (384, 64, 64, 3), dtype=np.uint8)
    dataset = ArrayDataset(images, np.arange(len(images)))
    loader = DataLoader(
        dataset,
        RandomSampler(dataset, batch_size=32, seed=0),
        transform=Augment(),
        num_workers=2,
        preload=True,
        seed=0,
    )
    for _ in loader:
        time.sleep(0.02)  # stands for the training step
    print(loader.stats().table())


def track_names(events: list[dict]) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}


def draw(trace_path: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    names = track_names(events)
    slices = [e for e in events if e.get("ph") == "X"]
    start = min(e["ts"] for e in slices)
    tids = sorted({e["tid"] for e in slices})
    rows = {tid: len(tids) - 1 - i for i, tid in enumerate(tids)}
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(tids) + 1.4))
    for e in slices:
        x = (e["ts"] - start) / 1e3
        width = max(e["dur"] / 1e3, 0.05)
        row = rows[e["tid"]]
        name = e["name"]
        if name.startswith("batch "):
            ax.broken_barh([(x, width)], (row - 0.42, 0.84), facecolors="none", edgecolors="#333", lw=0.6)
            continue
        kind = name.split(" ")[0]
        ax.broken_barh([(x, width)], (row - 0.3, 0.6), facecolors=COLORS.get(kind, "#999"), lw=0)
    ax.set_yticks(list(rows.values()), [names.get(tid, str(tid)) for tid in rows])
    ax.set_xlabel("milliseconds since the first batch started")
    ax.set_title("DATALOADER_TRACE of one epoch: 2 worker processes, preload")
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in COLORS.items()],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.28),
        ncol=len(COLORS),
        frameon=False,
    )
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv: list[str]) -> int:
    if argv:
        draw(argv[0], OUT)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        make_trace(path)
        draw(path, OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
