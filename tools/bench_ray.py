"""Ray Data through RayStream against Ray's own iterator: a launcher of ``dataloader.bench.raydata``.

``python tools/bench_ray.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.raydata import main

if __name__ == "__main__":
    sys.exit(main())
