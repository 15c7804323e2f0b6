"""num_workers="auto" against fixed num_workers: a launcher of ``dataloader.bench.autotune``.

``python tools/bench_autotune.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.autotune import main

if __name__ == "__main__":
    sys.exit(main())
