"""Columnar data against the plain reader and peers: a launcher of ``dataloader.bench.columnar``.

``python tools/bench_columnar.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.columnar import main

if __name__ == "__main__":
    sys.exit(main())
