"""Remote data: this loader's Parquet and tar streams reading object storage against the local disk and WebDataset.

Two workloads, one whole epoch per run, ``--workers`` (2) worker processes, rows/s (samples/s):

- ``parquet``: ``--files`` Parquet files x 8 row groups of 4 numeric columns (``--rows`` rows
  in all), ``ParquetStream(batch_size=1024)`` in ``DataLoader(stream, StreamSampler(),
  parallel_stream=True)``.
- ``tar jpeg``: ``--images`` JPEGs of random sizes (64 to 224 px a side) with a class label, in
  ``--shards`` WebDataset shards written by ``write_tar_shards`` (with their ``.idx``);
  ``TarStream`` in ``DataLoader(stream, StreamSampler(batch_size=32), transform=DecodeCrop(),
  parallel_stream=True)``: each JPEG is decoded (``cv2.imdecode``) and centre-cropped to 64x64
  in the workers, per sample. WebDataset's own loader reads the same shards and decodes the same
  way, ``WebDataset(urls).map(decode_crop).batched(32)`` in ``torch.utils.data.DataLoader``.
  MosaicML ``streaming`` reads the same samples converted once by its ``MDSWriter`` (columns
  ``jpg``: bytes, ``cls``: int; about as many shards): a ``StreamingDataset`` that decodes and
  crops in ``__getitem__``, in ``torch.utils.data.DataLoader(batch_size=32)``.

Each is read from the local disk (files in the page cache after the first run) and from moto's S3
server on this machine, behind a fault proxy (a child process) that delays every object request
(GET, HEAD) by each of ``--latencies`` ms. Our streams read S3 through ``pyarrow.fs.S3FileSystem``
with the library's defaults (retries, 64 MiB read ahead); WebDataset through ``pipe:curl``;
streaming through its own boto3 downloads (``S3_ENDPOINT_URL``) into an empty ``local=`` directory
per run (locally, ``remote=None`` over the MDS directory); its shared memory is cleaned after each
run. Modes:
``cold`` is a fresh reader's first epoch with no cache; ``cached`` is the second epoch of a reader
made with ``cache_dir=`` (the first filled it) behind the proxy at ``--cache-latency`` ms. The time
of a run is its epoch, from ``iter()`` to the last batch, worker start-up included; building the
stream (listing, footers, tar indexes) is timed apart and shown as ``build s``. ``1st batch s``
is the epoch's time to its first batch (worker start-up, first reads) and ``after 1st rows/s`` the
rate after it.

Every (contender, place) runs once per repetition, in an order that rotates; the table quotes
medians and ratios paired within a repetition: ``x local`` against the same reader's local cold
epoch, ``x webdataset`` against WebDataset's at the same place. The targets (reported, not
asserted): remote at 20 ms >= 0.8x local; the cached epoch >= 0.95x local; our tar stream >=
WebDataset's loader on the same shards, locally and at 20 ms. Ours at 20 ms over streaming's at
20 ms is reported with no target.

Our loader's workers start with ``--start-method`` (``fork`` by default, as the loader's own
default on Linux; each forked worker makes its S3 filesystem again before its first request).

Usage: ``python -m benchmarks.remote [--files 16] [--rows 6000000] [--images 12000]
[--shards 16] [--latencies 0,20,50] [--reps 3] [--workers 2] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from dataloader.argtypes import positive_int, worker_count

from .machine import machine
from .options import add_json, add_quick, add_reps, comma_list, new_parser
from .output import aligned, cell, write_json
from .remote_contenders import (
    LOCAL, OURS, PARQUET, STREAMING, TAR, WDS, Contender, Epoch, Where, contenders, missing,
)
from .remote_data import Proxy, upload, write_data, write_mds
from .repetitions import median, paired_median, rotations

COLD, CACHED = "cold", "cached"


@dataclass(frozen=True)
class Target:
    workload: str
    contender: tuple[str, str, str]  # (reader, mode, place)
    reference: tuple[str, str, str]
    minimum: float | None  # None: a comparison reported, with no target set


@dataclass
class Run:
    workload: str
    reader: str
    mode: str
    place: str
    rep: int
    rows: int
    build_s: float
    epoch_s: float
    first_s: float
    first_rows: int

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.epoch_s

    @property
    def steady_rows_per_s(self) -> float | None:
        """Rows/s after the first batch (start-up and first reads left out)."""
        left = self.epoch_s - self.first_s
        return (self.rows - self.first_rows) / left if left > 0 and self.rows > self.first_rows else None


def targets(cache_latency: int) -> tuple[Target, ...]:
    local, at20, cached = (OURS, COLD, LOCAL), (OURS, COLD, "s3 20 ms"), (OURS, CACHED, f"s3 {cache_latency} ms")
    return (
        Target(PARQUET, at20, local, 0.8), Target(TAR, at20, local, 0.8),
        Target(PARQUET, cached, local, 0.95), Target(TAR, cached, local, 0.95),
        Target(TAR, local, (WDS, COLD, LOCAL), 1.0), Target(TAR, at20, (WDS, COLD, "s3 20 ms"), 1.0),
        Target(TAR, at20, (STREAMING, COLD, "s3 20 ms"), None),
    )


def cases(present: Sequence[Contender], places: Sequence[Where], cache_place: Where) -> list[tuple[Contender, Where]]:
    """Every (contender, place) measured: cold readers everywhere, cached ones at ``cache_place``."""
    return [(c, w) for c in present for w in (places if c.mode == COLD else [cache_place])]


def _key(run: Run) -> tuple[str, str, str]:
    return run.reader, run.mode, run.place


def ratio(runs: Sequence[Run], workload: str, contender: tuple, reference: tuple) -> float | None:
    """The median over repetitions of contender's rows/s over reference's, same workload and rep."""
    group = [r for r in runs if r.workload == workload and _key(r) == contender]
    base = {r.rep: r for r in runs if r.workload == workload and _key(r) == reference}
    return paired_median(group, base, lambda r, b: r.rows_per_s / b.rows_per_s)


def evaluate(value: float | None, minimum: float | None) -> str:
    if value is None or minimum is None:
        return "-"
    return "met" if value >= minimum else "MISSED"


def summarize(runs: Sequence[Run], cache_latency: int) -> tuple[list[dict], list[dict]]:
    """A row per (workload, reader, mode, place), and the targets with their ratios and verdicts."""
    rows = []
    for workload, key in dict.fromkeys((r.workload, _key(r)) for r in runs):
        mine = [r for r in runs if r.workload == workload and _key(r) == key]
        reader, mode, place = key
        rows.append({
            "workload": workload, "reader": reader, "mode": mode, "place": place,
            "rows_per_s": median([r.rows_per_s for r in mine]),
            "steady_rows_per_s": median([r.steady_rows_per_s for r in mine]),
            "build_s": median([r.build_s for r in mine]), "epoch_s": median([r.epoch_s for r in mine]),
            "first_batch_s": median([r.first_s for r in mine]),
            "rows": mine[0].rows,
            "vs_local": ratio(runs, workload, key, (reader, COLD, LOCAL)),
            "vs_webdataset": ratio(runs, workload, key, (WDS, COLD, place)) if workload == TAR else None,
        })
    goals = []
    for t in targets(cache_latency):
        value = ratio(runs, t.workload, t.contender, t.reference)
        goals.append({"workload": t.workload, "contender": " ".join(t.contender),
                      "reference": " ".join(t.reference), "ratio": value, "target": t.minimum,
                      "verdict": evaluate(value, t.minimum)})
    return rows, goals


def format_tables(rows: list[dict], goals: list[dict], notes: Sequence[str] = ()) -> str:
    cells = [["workload", "reader", "mode", "place", "rows/s", "x local", "x webdataset", "epoch s", "1st batch s",
              "after 1st rows/s", "build s"]]
    cells += [[r["workload"], r["reader"], r["mode"], r["place"], cell(r["rows_per_s"], ",.0f"),
               cell(r["vs_local"], ".2f"), cell(r["vs_webdataset"], ".2f"), cell(r["epoch_s"], ".2f"),
               cell(r["first_batch_s"], ".2f"), cell(r["steady_rows_per_s"], ",.0f"), cell(r["build_s"], ".3f")] for r in rows]
    lines = [["workload", "contender", "over", "ratio", "target", "verdict"]]
    lines += [[g["workload"], g["contender"], g["reference"], cell(g["ratio"], ".2f"),
               "-" if g["target"] is None else f">= {g['target']:g}", g["verdict"]] for g in goals]
    parts = [aligned(cells, "<<<<"), aligned(lines, "<<<>><"), "\n".join(notes)]
    return "\n\n".join(part for part in parts if part)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = new_parser(__doc__, "python -m benchmarks.remote")
    parser.add_argument("--files", type=positive_int, help="Parquet files (default 16; quick 4)")
    parser.add_argument("--rows", type=positive_int, help="Parquet rows in all (default 6,000,000; quick 400,000)")
    parser.add_argument("--images", type=positive_int, help="JPEGs (default 12,000; quick 640)")
    parser.add_argument("--shards", type=positive_int, help="tar shards (default 16; quick 4)")
    parser.add_argument("--latencies", type=comma_list(int, what="latency"), default=[0, 20, 50],
                        help="ms added to each object request, comma-separated (default 0,20,50)")
    parser.add_argument("--cache-latency", type=int, default=20,
                        help="ms of the proxy the cached epochs' first epoch fills the cache through (default 20)")
    add_reps(parser, 3, "repetitions (default 3; quick 1)")
    parser.add_argument("--workers", type=worker_count, default=2, help="num_workers of every loader (default 2)")
    parser.add_argument("--start-method", default="fork", choices=["fork", "forkserver", "spawn"],
                        help="how our loader starts its workers (default fork)")
    add_quick(parser, "small data, one repetition")
    add_json(parser, "also write the machine, options, runs, rows and targets here")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every run to stderr as it finishes")
    args = parser.parse_args(argv)
    if args.quick:
        args.reps = 1
    quick = args.quick
    args.files = args.files or (4 if quick else 16)
    args.rows = args.rows or (400_000 if quick else 6_000_000)
    args.images = args.images or (640 if quick else 12_000)
    args.shards = args.shards or (4 if quick else 16)
    if min(args.latencies + [args.cache_latency]) < 0:
        parser.error("--latencies and --cache-latency must be >= 0 ms")
    if args.rows < args.files * 8 or args.images < args.shards:
        parser.error("--rows must give every file at least 8 rows, and --images every shard an image")
    return args


def measure(args: argparse.Namespace, present: Sequence[Contender], directory: Path) -> list[Run]:
    """Write and upload the data, start the server and the proxies, run every case of every rep."""
    from tests.remote.s3 import S3Server

    data = write_data(directory, args.files, args.rows // args.files, args.images, args.shards)
    print(f"data: {data.rows:,} Parquet rows in {args.files} files ({data.parquet_bytes / 2**20:.1f} MiB), "
          f"{data.images:,} JPEGs in {len(data.shards)} tar shards ({data.tar_bytes / 2**20:.1f} MiB)", flush=True)
    if any(c.reader == STREAMING for c in present):
        mds = sorted(write_mds(data).glob("*.mds"))
        print(f"the same JPEGs in {len(mds)} MDS shards ({sum(p.stat().st_size for p in mds) / 2**20:.1f} MiB)",
              flush=True)
    runs: list[Run] = []
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    latencies = list(dict.fromkeys(args.latencies + [args.cache_latency]))
    with S3Server() as server:
        upload(server.endpoint, bucket, data)
        proxies = {ms: Proxy(server.endpoint, ms / 1000) for ms in latencies}
        try:
            local = Where(data, bucket)
            remote = {ms: Where(data, bucket, proxy.endpoint, ms) for ms, proxy in proxies.items()}
            places = [local] + [remote[ms] for ms in args.latencies]
            for rep, (contender, where) in rotations(args.reps, cases(present, places, remote[args.cache_latency])):
                epoch: Epoch = contender.run(where, args.workers, args.start_method)
                runs.append(Run(contender.workload, contender.reader, contender.mode, where.label, rep,
                                epoch.rows, epoch.build_s, epoch.epoch_s, epoch.first_s, epoch.first_rows))
                if args.verbose:
                    print(f"  rep {rep} {contender.workload} {contender.reader} {contender.mode} {where.label}: "
                          f"{runs[-1].rows_per_s:,.0f} rows/s", file=sys.stderr, flush=True)
        finally:
            for proxy in proxies.values():
                proxy.stop()
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    everyone = contenders()
    notes = [f"skipped {c.workload} {c.reader} {c.mode}: {', '.join(missing(c))} not importable"
             for c in everyone if missing(c)]
    present = [c for c in everyone if not missing(c)]
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as directory:
        runs = measure(args, present, Path(directory))
    rows, goals = summarize(runs, args.cache_latency)
    print(f"{args.workers} worker(s) ({args.start_method}), {args.reps} rep(s) of one epoch each; medians, "
          "ratios paired within a rep")
    print(format_tables(rows, goals, notes + PEER_NOTES))
    if args.json:
        write_json(args.json, {"machine": machine(), "options": vars(args),
                               "runs": [asdict(r) for r in runs], "rows": rows, "targets": goals})
    return 0


# Peers the issue names that this bench does not run, and why (printed with every report).
PEER_NOTES = [
    "not run: litdata (it installs here). It would need the samples converted with its own writer "
    "(litdata.optimize), uploaded, and read from s3:// through the proxy (AWS_ENDPOINT_URL); MosaicML "
    "streaming is the one of the two this bench runs.",
]

if __name__ == "__main__":
    sys.exit(main())
