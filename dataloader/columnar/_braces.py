"""Brace patterns, as WebDataset users name their shards: ``train-{000000..000099}.tar``.

``{a..b}`` is the numbers from ``a`` to ``b`` (both included, zero-padded to
the width of ``a``: ``{000..099}`` gives ``000`` to ``099``, ``{1..10}`` gives
``1`` to ``10``),
``{x,y,z}`` the alternatives in their order; several braces in one pattern
give every combination, the leftmost brace varying slowest.
"""

from __future__ import annotations

import itertools
import re

from ..errors import ArgumentValueError

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
# A pattern naming more files than this is a typo (a missing digit in a bound), not a dataset.
MAX_EXPANSIONS = 10_000_000


def expand_braces(text: str) -> list[str]:
    """Every name ``text`` stands for, in order (``[text]`` when it has no brace)."""
    parts: list[list[str]] = []
    position = 0
    for match in _BRACE.finditer(text):
        parts.append([_literal(text[position : match.start()], text)])
        parts.append(_choices(match.group(1), text))
        position = match.end()
    parts.append([_literal(text[position:], text)])
    total = 1
    for choices in parts:
        total *= len(choices)
    if total > MAX_EXPANSIONS:
        raise ArgumentValueError(
            f"the brace pattern {text!r} names {total:,} files, more than {MAX_EXPANSIONS:,}; check its ranges."
        )
    return ["".join(names) for names in itertools.product(*parts)]


def _literal(piece: str, text: str) -> str:
    if "{" in piece or "}" in piece:
        raise ArgumentValueError(
            f"the brace pattern {text!r} has an unmatched or nested brace; write ranges as "
            "{000..099} and alternatives as {a,b,c}, one level deep."
        )
    return piece


def _choices(body: str, text: str) -> list[str]:
    numbers = _RANGE.match(body)
    if numbers:
        first, last = numbers.groups()
        low, high = int(first), int(last)
        if low > high:
            raise ArgumentValueError(
                f"the brace pattern {text!r} has the range {{{body}}}, which counts down; write the "
                "smaller bound first."
            )
        width = len(first)
        return [f"{n:0{width}d}" for n in range(low, high + 1)]
    if "," in body:
        return body.split(",")
    raise ArgumentValueError(
        f"the brace pattern {text!r} has {{{body}}}, which is neither a range of numbers "
        "({000..099}) nor alternatives ({a,b,c})."
    )
