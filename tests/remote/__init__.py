"""Tests against a real S3 API on the loopback interface.

- ``s3.py``: :class:`~tests.remote.s3.S3Server` (moto's standalone server in a subprocess), the
  clients (pyarrow's ``S3FileSystem``, s3fs) and upload helpers. Plain Python: the benchmarks
  import it too.
- ``_proxy.py``: :class:`~tests.remote.s3.FaultProxy`, a reverse proxy in front of the server
  that adds latency, errors, connection resets and denials (re-exported by ``s3.py``).
- ``conftest.py``: the fixtures ``s3_server``, ``s3_proxy`` and ``bucket``.
"""
