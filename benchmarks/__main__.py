"""``python -m benchmarks``: the list of benches and how to run each."""

import sys

from . import BENCHES

width = max(map(len, BENCHES))
print("Benchmarks against peers; run one from the root of a clone:\n")
for name, what in BENCHES.items():
    print(f"  python -m benchmarks.{name:<{width}}  {what}")
print("\nEach takes --help. Measuring your own machine: python -m dataloader bench; your own "
      "dataset: python -m dataloader tune MODULE:FACTORY.")
sys.exit(0)
