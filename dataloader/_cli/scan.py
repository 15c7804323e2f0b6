"""``python -m dataloader doctor --scan DATASET``: read every sample once, list the ones that fail.

The dataset is named by its path, as ``convert`` and ``demo`` name theirs: a directory of
Parquet files (or one ``.parquet`` file) is a :class:`~dataloader.columnar.ParquetDataset`, any
other directory an :class:`~dataloader.ImageFolder`. An ImageFolder decodes each image when it
is read; Parquet rows written by ``convert`` hold the encoded bytes in an ``image`` column,
decoded here by :class:`~dataloader.transform.vision.DecodeImage` as a training job would, so a
corrupt image fails in either case.

The scan is a plain epoch of the loader with ``on_error="skip"`` and ``max_errors=1.0``: every
failed sample is left out, recorded (``loader.stats().failures``) and, with ``--error-log``,
written as a JSON line. A sample that kills its worker is found and listed too (with process
workers; see docs/bad-samples.md); only a worker death no sample explains stops the scan. The
collator keeps only the count of good samples, so decoded images never leave the workers.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import numpy as np

from .. import DataLoader, ImageFolder
from .._image_codec import can_decode
from ..argtypes import unwritable
from ..errors import ArgumentValueError, DataLoaderError, WorkerError

_LISTED = 1000  # loader.stats() keeps the records of the first 1000 failed samples


def count_samples(samples: list[Any]) -> np.ndarray:
    """The scan's collator: a batch is the number of its good samples."""
    return np.array(len(samples), dtype=np.int64)


def open_dataset(path: str) -> tuple[Any, Any, str]:
    """The dataset at ``path``, the transform that decodes its samples (or None), and a description."""
    if not os.path.exists(path):
        raise ArgumentValueError(
            f"DATASET {path!r} does not exist; give an ImageFolder directory or Parquet files."
        )
    if _is_parquet(path):
        import pyarrow as pa

        from ..columnar import ParquetDataset

        dataset = ParquetDataset(path)
        schema = dataset.plan.schema
        kind = schema.field("image").type if "image" in schema.names else None
        if kind is not None and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
            _need_decoder()
            from ..transform.vision import DecodeImage

            described = f"ParquetDataset {path} (columns {dataset.columns}; images decoded with DecodeImage)"
            return dataset, DecodeImage(), described
        return dataset, None, f"ParquetDataset {path} (columns {dataset.columns})"
    if not os.path.isdir(path):
        raise ArgumentValueError(
            f"DATASET {path!r} is neither a directory nor a Parquet file; give an ImageFolder directory "
            "(root/<class>/<images>), a .parquet file, or a directory of them."
        )
    dataset = ImageFolder(path)
    _need_decoder()
    return dataset, None, f"ImageFolder {path} ({len(dataset.classes)} classes)"


def _need_decoder() -> None:
    """Without OpenCV or Pillow every image would fail to decode, and the scan would blame the files."""
    if not can_decode():
        raise DataLoaderError(
            "the scan decodes the images with OpenCV or Pillow, and neither is installed here: "
            "pip install 'dataloader[vision]'."
        )


def _is_parquet(path: str) -> bool:
    from ..columnar._files import PARQUET_SUFFIXES  # .parquet, .parq, .pq, as ParquetDataset reads them

    if os.path.isfile(path):
        return path.lower().endswith(PARQUET_SUFFIXES)
    for _, _, files in os.walk(path, followlinks=True):
        if any(name.lower().endswith(PARQUET_SUFFIXES) for name in files):
            return True
    return False


def scan(path: str, workers: int, batch_size: int, error_log: str | None) -> int:
    """Read every sample of the dataset at ``path`` once and list the failed ones.

    Returns the exit code: 1 if any sample failed, 0 if none did, 2 if the dataset cannot be opened.
    """
    log = error_log or os.environ.get("DATALOADER_ERROR_LOG") or None
    try:
        _check_log(log, error_log)
        dataset, transform, description = open_dataset(path)
    except (DataLoaderError, OSError) as error:
        print(f"python -m dataloader doctor: error: {error}", file=sys.stderr)
        return 2
    total = len(dataset)
    print(f"scanning {description}: {total:,} samples, batches of {batch_size}, {workers} worker(s)")
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        transform=transform,
        collator=count_samples,
        num_workers=workers,
        worker_type="process",  # a sample that kills its worker must not kill the scan (3.14t: threads)
        on_error="skip",
        max_errors=1.0,
        error_log=error_log,
    )
    bar = _progress_bar(total)
    good, stopped = 0, None
    trouble = _LogTrouble()
    logging.getLogger("dataloader").addFilter(trouble)  # removed in the finally below
    try:
        try:
            with iter(loader) as batches:
                for batch in batches:
                    good += int(batch)
                    if bar is not None:
                        bar.update(int(batch))
        except WorkerError as error:  # a death no sample explains (the OOM killer, say): the epoch ends
            stopped = error
        stats = loader.stats()
        if bar is not None:
            bar.set_postfix(failed=stats.failed_samples, refresh=False)
            if stopped is None:
                bar.update(total - bar.n)  # the failed samples were read too
    finally:
        loader.close()
        logging.getLogger("dataloader").removeFilter(trouble)
        if bar is not None:
            bar.close()
    _print_failures(stats.failures, stats.failed_samples, None if trouble.failed else log)
    where = _where_logged(log, stats.failed_samples, trouble)
    if stopped is not None:
        print(
            f"\nthe scan stopped after {good + stats.failed_samples:,} of {total:,} samples: {stopped}\n"
            "A worker died of something no sample explains (the OOM killer, a signal from outside): "
            "the scan cannot go on past it. Run it again with fewer --workers."
        )
        print(f"{stats.failed_samples:,} of {total:,} samples failed before it{where}")
        return 1
    print(f"{stats.failed_samples:,} of {total:,} samples failed{where}")
    return 1 if stats.failed_samples else 0


def _check_log(log: str | None, given: str | None) -> None:
    """Refuse a log that cannot be written before the scan, not after it: ``DATALOADER_ERROR_LOG``,
    which nothing tried before, or ``given`` (``--error-log``, tried as it was read; again here for
    other callers of :func:`scan`)."""
    problem = None if log is None else unwritable(log, make_folders=True)
    if problem is not None:
        named = "--error-log" if given else "DATALOADER_ERROR_LOG"
        raise ArgumentValueError(f"{named}: {problem}; name a file in a folder you can write to.")


class _LogTrouble(logging.Filter):
    """Notes the loader's warning that the error log cannot be written (a record with an
    ``error_log`` attribute), so that the summary never claims a log that was not written.
    A filter on the ``dataloader`` logger, not a handler: the warning is still shown as before."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def filter(self, record: logging.LogRecord) -> bool:
        self.failed = self.failed or hasattr(record, "error_log")
        return True


def _where_logged(log: str | None, failed: int, trouble: _LogTrouble) -> str:
    """Where the failed samples were logged, said only where it is true."""
    if not log or not failed:
        return ""
    if trouble.failed:
        return f"; the error log {log} could not be written (see the warning above)"
    return f"; each is a JSON line in {log}"


def _print_failures(records: tuple, count: int, log: str | None) -> None:
    """The failed samples as a table: index, stage, exception type, message."""
    if not records:
        return
    records = sorted(records, key=lambda r: (r.epoch, r.batch, r.position))
    rows = [("index", "stage", "error", "message")]
    for r in records:
        where = str(r.index) if r.index is not None else f"position {r.position}"
        rows.append((where, r.stage, r.error, r.message))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    print()
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])
    if count > len(records):
        every = "the error log has every one" if log else "--error-log PATH writes every one"
        print(f"... and {count - len(records):,} more (the first {_LISTED} are listed; {every})")
    print()


def _progress_bar(total: int) -> Any:
    """A tqdm bar over the samples on stderr, as the demo's; None without tqdm (the vision
    extra brings it)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="scanning", unit="sample", file=sys.stderr)
