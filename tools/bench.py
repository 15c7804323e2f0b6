"""This loader against PyTorch's DataLoader and no loader: a launcher of ``dataloader.bench.cli``.

``python tools/bench.py [options]`` keeps working from a checkout, with the options (``--help``)
and output of ``python -m dataloader bench``.
"""

import sys

from dataloader.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
