"""The command line behind ``python -m dataloader`` and the ``dataloader`` script.

- ``demo``: the README's main job (an image workload with workers, preload,
  a progress bar and the stage table).
- ``bench``: this loader timed on synthetic workloads on this machine (peers: ``benchmarks/``).
- ``doctor``: what this machine allows, and the settings it suggests.
- ``convert``: an ImageFolder directory or an .npz file as Parquet shards.
- ``tune``: a user's own dataset timed with a range of settings and with ``num_workers="auto"``.

Beside them: ``_limits``
(``doctor``'s ``ulimit -n`` and ``ulimit -v`` checks), ``_convert_checks`` (``convert``'s DEST
and image checks), ``_timing`` (one timed run of a loader with its peak memory, for ``bench``
and ``tune``) and ``_table`` (their tables and JSON files). The argparse types every command
shares (finite numbers, worker counts with the loader's ceiling, output files tried before a
run) are :mod:`dataloader.argtypes`.
"""
