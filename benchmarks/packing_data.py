"""The packing bench's token lengths and samples: a log-normal and a real distribution.

- ``lognormal``: ``round(exp(N(mu, sigma)))``, at least 1, with ``sigma = 1.0`` and
  ``mu = ln(300) - sigma**2 / 2`` (so the mean is 300; about 0.1% of samples pass 4,000
  tokens), drawn by ``np.random.default_rng(SEED)``.
- ``cpython-defs``: the top-level functions and classes (``ast`` nodes ``def``, ``async def``,
  ``class`` of each module's body, decorators left out) of every ``.py`` file of this
  interpreter's standard library (``sysconfig``'s ``stdlib``, ``site-packages`` left out,
  files sorted by path; CPython 3.11: about 12,600 samples, mean ~470, median ~100, the
  longest ~41,000), each tokenised as the regex ``\\w+|[^\\w\\s]`` (words and single
  punctuation marks). Real, heavy-tailed, and on every machine that runs Python, offline.

Both contenders get the same pieces: a sample longer than ``seq_len`` is split first into
``seq_len``-token pieces and a shorter last one (:func:`split`), since Grain's packers refuse
an element longer than a row. A sample is ``{"tokens": int32 array}``, a view into one
``arange`` of all the tokens (made once, in memory).
"""

from __future__ import annotations

import ast
import math
import re
import sysconfig
from pathlib import Path

import numpy as np

SEED = 0
LOGNORMAL_MEAN = 300
LOGNORMAL_SIGMA = 1.0
LOGNORMAL = "lognormal"
CPYTHON = "cpython-defs"
DISTRIBUTIONS = (LOGNORMAL, CPYTHON)
_TOKEN = re.compile(r"\w+|[^\w\s]")
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def lognormal(count: int, seed: int = SEED) -> np.ndarray:
    """``count`` log-normal lengths of mean ``LOGNORMAL_MEAN`` (int64, each >= 1)."""
    mu = math.log(LOGNORMAL_MEAN) - LOGNORMAL_SIGMA**2 / 2
    drawn = np.random.default_rng(seed).lognormal(mu, LOGNORMAL_SIGMA, count)
    return np.maximum(np.rint(drawn), 1).astype(np.int64)


def stdlib_files() -> list[Path]:
    """This interpreter's standard-library ``.py`` files, sorted (no ``site-packages``)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.rglob("*.py")
                  if "site-packages" not in p.parts and "dist-packages" not in p.parts)


def cpython_defs(every: int = 1) -> np.ndarray:
    """Token counts of the top-level defs and classes of every ``every``-th stdlib file."""
    lengths = []
    for path in stdlib_files()[::every]:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            body = ast.parse(text).body
        except (SyntaxError, ValueError):  # a few test files are invalid on purpose
            continue
        lines = text.splitlines()
        for node in body:
            if isinstance(node, _DEFS):
                block = "\n".join(lines[node.lineno - 1:node.end_lineno])
                lengths.append(len(_TOKEN.findall(block)))
    return np.asarray([n for n in lengths if n > 0], np.int64)


def lengths_of(name: str, count: int, every: int) -> np.ndarray:
    """The named distribution: ``count`` log-normal draws, or the stdlib's defs (every ``every``-th file)."""
    return lognormal(count) if name == LOGNORMAL else cpython_defs(every)


def split(lengths: np.ndarray, seq_len: int) -> np.ndarray:
    """Each length cut into ``seq_len`` pieces and a shorter rest, in order (the same rule as
    ``too_long="split"``)."""
    full, rest = np.divmod(lengths, seq_len)
    counts = full + (rest > 0)
    pieces = np.full(int(counts.sum()), seq_len, np.int64)
    ends = np.cumsum(counts) - 1
    pieces[ends[rest > 0]] = rest[rest > 0]
    return pieces


def samples(lengths: np.ndarray) -> list[dict[str, np.ndarray]]:
    """One ``{"tokens": int32 view}`` per length, consecutive slices of one ``arange``."""
    tokens = np.arange(int(lengths.sum()), dtype=np.int32)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    return [{"tokens": tokens[a:b]} for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def describe(lengths: np.ndarray) -> dict:
    """Count, total, mean, median, p99 and max of some lengths (plain ints and floats)."""
    return {"samples": int(lengths.size), "tokens": int(lengths.sum()),
            "mean": float(lengths.mean()), "median": float(np.median(lengths)),
            "p99": float(np.percentile(lengths, 99)), "max": int(lengths.max())}
