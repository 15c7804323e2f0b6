"""Variable-length samples: our PackedStream against Grain's packers, and length buckets.

On the same token lengths (:mod:`benchmarks.packing_data`: a log-normal of mean 300 with a
tail past 4,000, and ``cpython-defs``, the top-level functions and classes of this
interpreter's standard library), cut into pieces of at most ``seq_len`` for both, for each
``--seq-lens`` x ``--buffers`` (Grain's ``num_packing_bins`` == our ``buffer_size``):

- padding fraction (padding tokens over all row tokens, counted from the rows' segment ids)
  and throughput (input samples/s and tokens/s, every row consumed, from ``iter()`` to the
  end) of Grain's ``FirstFitPackIterDataset`` and ``BestFitPackIterDataset`` and of our
  ``PackedStream`` with ``first_fit``, ``best_fit`` and ``concat``; the contenders of a
  setting run one after another, in an order rotating each of ``--reps`` repetitions, and
  the ratios to Grain are paired within a repetition (medians quoted);
- targets: our best fit's padding <= Grain's best fit's at the same buffer, and our packing
  throughput >= 2x Grain's (first fit over first fit, best fit over best fit);
- buckets: the padding of ``BucketSampler(max_tokens=...)`` batches (each padded to its
  longest sample) against ``RandomSampler`` batches of the same mean size, and of
  ``BucketSampler(batch_size=...)`` against ``RandomSampler(batch_size=...)``, on the lengths
  cut at the smallest ``seq_len``, over one epoch (seed 0).

Memory: Grain holds ``num_packing_bins`` open rows; ours packs a window of ``buffer_size``
rows' worth of tokens, so both hold about ``buffer_size`` rows. Grain is left out, with the
reason printed, where it is not importable (``pip install grain``).

Usage: ``python -m benchmarks.packing [--distributions lognormal,cpython-defs] [--samples 20000]
[--seq-lens 2048,4096] [--buffers 16,64,128] [--reps 5] [--quick] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from dataloader.argtypes import positive_int
from . import packing_data as data
from .machine import machine, module_version
from .options import add_json, add_quick, add_reps, comma_list, new_parser
from .output import aligned, cell, write_json
from .packing_contenders import (
    CONTENDERS, GRAIN_BF, GRAIN_FF, OURS_BF, OURS_CONCAT, OURS_FF, Contender, bucket_rows, measure,
    missing,
)
from .repetitions import median, paired_median, rotated

#: Each of ours against the Grain packer it is compared with.
PEERS = {OURS_FF: GRAIN_FF, OURS_BF: GRAIN_BF, OURS_CONCAT: GRAIN_BF}
SPEEDUP = 2.0


@dataclass
class Run:
    distribution: str
    seq_len: int
    buffer: int
    contender: str
    rep: int
    rows: int
    padding: int
    tokens: int
    expected_tokens: int
    seconds: float
    samples_per_s: float
    tokens_per_s: float
    reported_padding: int | None  # the packer's own count (ours: stats().padding), None for Grain


def setting_runs(distribution: str, seq_len: int, buffer: int, pieces: np.ndarray,
                 present: Sequence[Contender], rep: int) -> list[Run]:
    """One pass of every present contender over the pieces, in repetition ``rep``'s order."""
    samples = data.samples(pieces)
    runs = []
    for contender in rotated(present, rep):
        rows, stats = contender.rows(samples, seq_len, buffer)
        done = measure(rows, seq_len)
        runs.append(Run(distribution, seq_len, buffer, contender.name, rep, done.rows, done.padding,
                        done.tokens, int(pieces.sum()), done.seconds, len(pieces) / done.seconds,
                        done.tokens / done.seconds, None if stats is None else stats()))
    return runs


def _select(runs: Sequence[Run], key: tuple, contender: str) -> list[Run]:
    return [r for r in runs if (r.distribution, r.seq_len, r.buffer) == key and r.contender == contender]


def _speedup(runs: Sequence[Run], key: tuple, contender: str, peer: str) -> float | None:
    base = {r.rep: r for r in _select(runs, key, peer)}
    return paired_median(_select(runs, key, contender), base, lambda r, b: b.seconds / r.seconds)


def summarize(runs: Sequence[Run]) -> tuple[list[dict], list[dict]]:
    """A row per (setting, contender): padding, medians, speed over its Grain peer; and the
    targets per setting with their verdicts ("met", "not met", "-" where a side is missing)."""
    rows, targets = [], []
    for key in dict.fromkeys((r.distribution, r.seq_len, r.buffer) for r in runs):
        for name in dict.fromkeys(r.contender for r in runs if (r.distribution, r.seq_len, r.buffer) == key):
            group = _select(runs, key, name)
            rows.append({
                "distribution": key[0], "seq_len": key[1], "buffer": key[2], "contender": name,
                "rows": group[0].rows, "padding_fraction": median(
                    [r.padding / (r.rows * r.seq_len) for r in group]),
                "all_tokens": all(r.tokens == r.expected_tokens for r in group),
                "stats_agree": all(r.reported_padding in (None, r.padding) for r in group),
                "samples_per_s": median([r.samples_per_s for r in group]),
                "tokens_per_s": median([r.tokens_per_s for r in group]),
                "vs_grain": _speedup(runs, key, name, PEERS[name]) if name in PEERS else None,
            })
        targets += _targets(rows, runs, key)
    return rows, targets


def _targets(rows: list[dict], runs: Sequence[Run], key: tuple) -> list[dict]:
    pad = {r["contender"]: r["padding_fraction"] for r in rows
           if (r["distribution"], r["seq_len"], r["buffer"]) == key}
    ours, grain = pad.get(OURS_BF), pad.get(GRAIN_BF)
    where = {"distribution": key[0], "seq_len": key[1], "buffer": key[2]}
    found = [{**where, "target": f"padding {OURS_BF} <= {GRAIN_BF}", "ours": ours, "grain": grain,
              "verdict": "-" if None in (ours, grain) else "met" if ours <= grain else "not met"}]
    for name in (OURS_FF, OURS_BF):
        ratio = _speedup(runs, key, name, PEERS[name])
        found.append({**where, "target": f"throughput {name} / {PEERS[name]} >= {SPEEDUP:g}",
                      "ours": ratio, "grain": None,
                      "verdict": "-" if ratio is None else "met" if ratio >= SPEEDUP else "not met"})
    return found


def format_tables(rows: list[dict], targets: list[dict], buckets: list[dict],
                  skipped: Sequence[tuple[str, str]] = ()) -> str:
    """The packers' table, the targets, the buckets' padding, and a note per skipped contender."""
    cells = [["distribution", "seq_len", "buffer", "contender", "rows", "padding %", "samples/s",
              "tokens/s", "x grain"]]
    cells += [[r["distribution"], str(r["seq_len"]), str(r["buffer"]), r["contender"], f"{r['rows']:,}",
               cell(100 * r["padding_fraction"], ".2f") + ("" if r["all_tokens"] else " (tokens lost!)")
               + ("" if r["stats_agree"] else " (stats() differs!)"),
               cell(r["samples_per_s"], ",.0f"), cell(r["tokens_per_s"], ",.0f"),
               cell(r["vs_grain"], ".2f")] for r in rows]
    goals = [["distribution", "seq_len", "buffer", "target", "ours", "grain", "verdict"]]
    goals += [[t["distribution"], str(t["seq_len"]), str(t["buffer"]), t["target"],
               _figure(t["ours"], t["target"]), _figure(t["grain"], t["target"]), t["verdict"]]
              for t in targets]
    pads = [["distribution", "sampler", "batches", "samples/batch", "padding %"]]
    pads += [[b["distribution"], b["sampler"], f"{b['batches']:,}", f"{b['mean_samples']:.1f}",
              f"{100 * b['padding_fraction']:.2f}"] for b in buckets]
    notes = "\n".join(f"skipped {name}: {why}" for name, why in skipped)
    parts = (aligned(cells, "<>><"), aligned(goals, "<>><"), aligned(pads, "<<"), notes)
    return "\n\n".join(part for part in parts if part)


def _figure(value: float | None, target: str) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.2f}%" if target.startswith("padding") else f"{value:.2f}x"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options; ``--quick``: 2,000 log-normal samples, every 20th stdlib file, seq_len 2048,
    buffers 16 and 64, one repetition."""
    parser = new_parser(__doc__, "python -m benchmarks.packing")
    parser.add_argument("--distributions", type=comma_list(str.strip, data.DISTRIBUTIONS, "distribution"),
                        default=list(data.DISTRIBUTIONS), help="comma-separated (default: both)")
    parser.add_argument("--samples", type=positive_int, help="log-normal samples (default 20,000; quick 2,000)")
    parser.add_argument("--every", type=positive_int,
                        help="cpython-defs reads every N-th stdlib file (default 1; quick 20)")
    parser.add_argument("--seq-lens", type=comma_list(positive_int, what="seq_len"),
                        help="row lengths (default 2048,4096; quick 2048)")
    parser.add_argument("--buffers", type=comma_list(positive_int, what="buffer"),
                        help="buffer_size == num_packing_bins values (default 16,64,128; quick 16,64)")
    add_reps(parser, None, "repetitions (default 5; quick 1)")
    parser.add_argument("--max-tokens", type=positive_int, default=16384,
                        help="BucketSampler's token budget (default 16384)")
    parser.add_argument("--batch-size", type=positive_int, default=32,
                        help="batch size of the fixed-size bucket and random batches (default 32)")
    add_quick(parser, "small data, one repetition")
    add_json(parser, "also write the machine, options, lengths, runs, rows, targets and buckets")
    args = parser.parse_args(argv)
    quick = args.quick
    args.samples = args.samples or (2_000 if quick else 20_000)
    args.every = args.every or (20 if quick else 1)
    args.seq_lens = args.seq_lens or ([2048] if quick else [2048, 4096])
    args.buffers = args.buffers or ([16, 64] if quick else [16, 64, 128])
    args.reps = args.reps or (1 if quick else 5)
    if args.max_tokens < min(args.seq_lens):
        parser.error(f"--max-tokens must be at least the smallest --seq-lens ({min(args.seq_lens)}): "
                     "the bucketed samples are cut at that length")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: the lengths, every setting's passes in every repetition, the report."""
    args = parse_args(argv)
    skipped = [(c.name, why) for c in CONTENDERS if (why := missing(c))]
    present = [c for c in CONTENDERS if not missing(c)]
    lengths = {name: data.lengths_of(name, args.samples, args.every) for name in args.distributions}
    runs: list[Run] = []
    for rep in range(args.reps):
        for name, raw in lengths.items():
            for seq_len in args.seq_lens:
                pieces = data.split(raw, seq_len)
                for buffer in args.buffers:
                    runs += setting_runs(name, seq_len, buffer, pieces, present, rep)
    rows, targets = summarize(runs)
    buckets = _buckets(lengths, args, skipped)
    for name, raw in lengths.items():
        d = data.describe(raw)
        print(f"{name}: {d['samples']:,} samples, {d['tokens']:,} tokens, mean {d['mean']:.0f}, "
              f"median {d['median']:.0f}, p99 {d['p99']:.0f}, max {d['max']:,}")
    print(f"{args.reps} rep(s); padding from the rows' segment ids; samples/s counts the pieces (cut at "
          "seq_len); ratios paired within a rep, medians")
    print(format_tables(rows, targets, buckets, skipped))
    if args.json:
        write_json(args.json, {
            "machine": {**machine(), "grain": module_version("grain")}, "options": vars(args),
            "lengths": {n: data.describe(raw) for n, raw in lengths.items()},
            "runs": [asdict(r) for r in runs], "rows": rows, "targets": targets, "buckets": buckets})
    return 0


def _buckets(lengths: dict[str, np.ndarray], args: argparse.Namespace,
             skipped: list[tuple[str, str]]) -> list[dict]:
    try:
        import dataloader

        dataloader.BucketSampler
    except AttributeError:
        skipped.append(("buckets", "dataloader has no BucketSampler"))
        return []
    cut = min(args.seq_lens)
    return [{"distribution": name, **row} for name, raw in lengths.items()
            for row in bucket_rows(data.split(raw, cut), args.max_tokens, args.batch_size)]


if __name__ == "__main__":
    sys.exit(main())
