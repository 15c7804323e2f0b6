"""Chrome Trace Event export of a :class:`~dataloader.monitor.Recorder` (opens in Perfetto).

One track per worker (a "batch k" slice with fetch, transform and collate
nested inside it) and one track per main-process stage (transport, wait,
preload, read), with an instant event per bad sample and per autotuner
decision. Times are microseconds on the system-wide monotonic clock.
"""

from __future__ import annotations

import json
import os
from typing import Any

_MAIN_TRACKS = {"transport": 1000, "wait": 1001, "preload": 1002, "read": 1003, "autotune": 1004}


def trace_events(recorder: Any) -> list[dict]:
    """The Trace Event list for ``recorder``'s epoch."""
    pid = os.getpid()
    events = [_meta("process_name", pid, 0, {"name": "dataloader"})]
    workers = sorted({b[0] for b in recorder.batches})
    for worker in workers:
        name = "main process" if worker < 0 else f"worker {worker}"
        events.append(_meta("thread_name", pid, _tid(worker), {"name": name}))
    for track, tid in _MAIN_TRACKS.items():
        events.append(_meta("thread_name", pid, tid, {"name": f"main: {track}"}))
    for worker, index, start, fetched, transformed, collated, samples, received, _ in recorder.batches:
        tid = _tid(worker)
        events.append(_slice(f"batch {index}", pid, tid, start, collated, {"samples": samples}))
        events.append(_slice("fetch", pid, tid, start, fetched))
        events.append(_slice("transform", pid, tid, fetched, transformed))
        events.append(_slice("collate", pid, tid, transformed, collated))
        if received > collated:
            events.append(_slice(f"transport {index}", pid, _MAIN_TRACKS["transport"], collated, received))
    book = getattr(recorder, "book", None)
    for record, at in zip(book.records, book.times) if book is not None else ():
        # An instant where the main process learnt of it, on the track of the worker that met it.
        name = f"bad sample {record.index if record.index is not None else record.position} ({record.action})"
        events.append({"name": name, "ph": "i", "s": "t", "pid": pid, "tid": _tid(record.worker), "ts": at * 1e6, "args": record.as_json()})
    for change in getattr(recorder, "tuning", ()):
        events.append({
            "name": f"autotune: {change.workers} workers, prefetch {change.prefetch}", "ph": "i", "s": "p",
            "pid": pid, "tid": _MAIN_TRACKS["autotune"], "ts": (recorder.started + change.seconds) * 1e6,
            "args": {"batch": change.batch, "reason": change.reason},
        })
    for start, end in recorder.waits:
        events.append(_slice("wait", pid, _MAIN_TRACKS["wait"], start, end))
    for start, end in recorder.preloads:
        events.append(_slice("preload", pid, _MAIN_TRACKS["preload"], start, end))
    for start, end in recorder.reads:
        events.append(_slice("read", pid, _MAIN_TRACKS["read"], start, end))
    return events


def write_trace(recorder: Any, path: str) -> None:
    """Write the trace JSON to ``path`` (``{"traceEvents": [...]}``)."""
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"traceEvents": trace_events(recorder), "displayTimeUnit": "ms"}, file)


def _tid(worker: int) -> int:
    return 0 if worker < 0 else worker + 1


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}


def _slice(name: str, pid: int, tid: int, start: float, end: float, args: dict | None = None) -> dict:
    event = {"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": start * 1e6, "dur": max(0.0, end - start) * 1e6}
    if args:
        event["args"] = args
    return event
