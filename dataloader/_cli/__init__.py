"""The command line behind ``python -m dataloader`` and the ``dataloader`` script.

- ``demo``: the README's main job (an image workload with workers, preload,
  a progress bar and the stage table).
- ``bench``: the :mod:`dataloader.bench` workloads against PyTorch.
- ``doctor``: what this machine allows, and the settings it suggests.
- ``convert``: an ImageFolder directory or an .npz file as Parquet shards.
- ``tune``: a user's own dataset timed with a range of settings and with ``num_workers="auto"``.

Beside them: ``_limits``
(``doctor``'s ``ulimit -n`` and ``ulimit -v`` checks) and ``_convert_checks`` (``convert``'s DEST
and image checks). The argparse types every command and bench tool shares (finite numbers,
worker counts with the loader's ceiling, output files tried before a run) are
:mod:`dataloader.argtypes`.
"""
