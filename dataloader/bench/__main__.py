"""``python -m dataloader.bench``: the main bench, as ``python -m dataloader bench``."""

import sys

from .cli import main

sys.exit(main())
