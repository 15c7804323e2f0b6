"""Feeding a GPU: device copy and preload against pinned memory: a launcher of ``dataloader.bench.gpu``.

``python tools/bench_gpu.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.gpu import main

if __name__ == "__main__":
    sys.exit(main())
