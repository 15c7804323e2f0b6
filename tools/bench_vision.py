"""Each vision transform against torchvision or Pillow: a launcher of ``dataloader.bench.vision``.

``python tools/bench_vision.py [options]`` keeps working from a checkout; ``--help`` lists the options.
"""

import sys

from dataloader.bench.vision import main

if __name__ == "__main__":
    sys.exit(main())
