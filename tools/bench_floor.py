"""The floor of a process transport: a launcher of ``dataloader.bench.floor``.

``python tools/bench_floor.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.floor import main

if __name__ == "__main__":
    sys.exit(main())
