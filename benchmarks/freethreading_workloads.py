"""The free-threading bench's workloads: three of the main bench's datasets and a tokenizer.

- ``tiny``: per-sample overhead, (float32[8], int) samples, batch 256 (``workloads.py``).
- ``images``: bandwidth, uint8[3,224,224] images from a pool, batch 64 (``workloads.py``).
- ``decode``: CPU in a C library, Pillow JPEG decode + random crop, batch 32 (``workloads.py``).
- ``tokenize``: CPU in Python. Each sample is about 400 characters of text; the transform
  (:class:`Tokenize`) splits it into words with a Python loop over its characters, looks each
  word up in a dict of 2,000 and breaks an unknown word into the longest known pieces, as
  WordPiece does, then pads the ids to int32[128]. It holds the interpreter throughout (about
  0.1 ms per sample): with the GIL, threads cannot run it in parallel; without it, they can.

A workload is built in the child interpreter that measures it (``freethreading_child.py``),
from its name and ``small`` (smoke runs use small datasets).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dataloader import Dataset
from dataloader.transform import Transform

from .workloads import DecodeDataset, ImageDataset, TinyDataset

TOKENS = 128  # ids per sample, padded with 0
_UNKNOWN = 1  # the id of a character no piece covers


def _syllables() -> list[str]:
    return [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def vocabulary(words: int = 2_000, seed: int = 3) -> dict[str, int]:
    """Words of 2-4 syllables and every syllable, alone (``ba``) and as a continuation
    (``##ba``), each with an id from 2 up (0 pads, 1 is unknown)."""
    rng = random.Random(seed)
    pieces = _syllables()
    known = list(pieces) + ["##" + p for p in pieces] + [str(d) for d in range(10)]
    known += ["##" + str(d) for d in range(10)]
    while len(known) < words + 2 * len(pieces) + 20:
        word = "".join(rng.choice(pieces) for _ in range(rng.randint(2, 4)))
        if word not in known:
            known.append(word)
    return {piece: index + 2 for index, piece in enumerate(known)}


def texts(count: int = 1_024, length: int = 400, seed: int = 4) -> list[str]:
    """``count`` texts of about ``length`` characters: mostly known words, one in four made up
    of syllables (unknown: split into pieces), some capitalised, numbers and punctuation."""
    rng = random.Random(seed)
    words = [w for w in vocabulary() if not w.startswith("##") and len(w) > 2]
    pieces = _syllables()
    made = []
    for _ in range(count):
        parts: list[str] = []
        while sum(map(len, parts)) + len(parts) < length:
            if rng.random() < 0.25:
                word = "".join(rng.choice(pieces) for _ in range(rng.randint(3, 6)))
            else:
                word = rng.choice(words)
            if rng.random() < 0.1:
                word = word.capitalize()
            if rng.random() < 0.05:
                word = str(rng.randint(0, 9999))
            parts.append(word + ("," if rng.random() < 0.08 else ""))
        made.append(" ".join(parts) + ".")
    return made


class TextDataset(Dataset):
    """(text, int label): text ``i`` is pool entry ``i % len(pool)``."""

    def __init__(self, size: int = 200_000, pool: int = 1_024) -> None:
        self.pool, self.size = texts(pool), size

    def __getitem__(self, index: int) -> tuple:
        return self.pool[index % len(self.pool)], index % 1000

    def __len__(self) -> int:
        return self.size


class Tokenize(Transform):
    """(text, label) -> (int32[TOKENS] ids, label): words split by a Python loop over the
    characters, looked up in ``vocabulary``, unknown words broken into the longest known
    pieces (``##`` marks a piece that continues a word)."""

    def __init__(self, vocabulary: dict[str, int], length: int = TOKENS) -> None:
        self.vocabulary, self.length = vocabulary, length

    def apply(self, input: Any) -> Any:
        text, label = input
        ids: list[int] = []
        word: list[str] = []
        for char in text:
            if char.isalnum():
                word.append(char.lower())
            elif word:
                self._word("".join(word), ids)
                word = []
        if word:
            self._word("".join(word), ids)
        ids = ids[: self.length] + [0] * (self.length - len(ids))
        return np.array(ids, np.int32), label

    def _word(self, word: str, ids: list[int]) -> None:
        known = self.vocabulary.get(word)
        if known is not None:
            ids.append(known)
            return
        start = 0
        while start < len(word):
            end, piece = len(word), None
            while end > start:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                piece = self.vocabulary.get(candidate)
                if piece is not None:
                    break
                end -= 1
            ids.append(_UNKNOWN if piece is None else piece)
            start = end if piece is not None else start + 1


@dataclass(frozen=True)
class FtWorkload:
    """A workload: ``make(small)`` builds its dataset; ``transform()`` its per-sample transform
    (None: the samples as the dataset gives them)."""

    name: str
    what: str
    batch_size: int
    make: Callable[[bool], Dataset]
    transform: Callable[[], Transform | None] = lambda: None


WORKLOADS = {
    "tiny": FtWorkload("tiny", "per-sample overhead: (float32[8], int), batch 256", 256,
                       lambda small: TinyDataset(200_000 if small else 2_000_000)),
    "images": FtWorkload("images", "bandwidth: uint8[3,224,224] from a 256-image pool, batch 64",
                         64, lambda small: ImageDataset(16_000 if small else 256_000)),
    "decode": FtWorkload(
        "decode", "CPU in C: Pillow JPEG decode (256x256) + random crop to 160x160, batch 32", 32,
        lambda small: DecodeDataset(4_000 if small else 32_000, 64 if small else 256)),
    "tokenize": FtWorkload(
        "tokenize", f"CPU in Python: ~400 characters tokenized (Python loop, dict, WordPiece "
        f"fallback) to int32[{TOKENS}], batch 64", 64,
        lambda small: TextDataset(20_000 if small else 200_000, 256 if small else 1_024),
        lambda: Tokenize(vocabulary())),
}

#: The workload that runs Python code per sample (the 1.3x target's).
PURE_PYTHON = "tokenize"
