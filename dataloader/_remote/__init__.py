"""Reading files that sit in object storage: requests that repeat, reads ahead, a local cache.

- ``retry.py``: which errors are transient, the backoff, the typed error a request ends in.
- ``retrying_fs.py``: a ``pyarrow.fs`` filesystem that repeats another one's failed requests.
- ``filesystems.py``: fsspec filesystems and URIs of schemes pyarrow lacks, as pyarrow filesystems.
- ``read_ahead.py``: the next pieces read in background threads, in order, bounded by bytes.
- ``cache.py``: ``ShardCache``, whole remote files kept in a local directory shared by processes.
- ``versions.py``: what a store says a file is now (size, modification time, ETag / version id).
- ``access.py``: a reader's ``retries``/``read_ahead``/``cache_dir``/``cache_limit`` as one value.
"""

from .access import READ_AHEAD, RETRIES, Access, access_from
from .cache import ShardCache
from .filesystems import as_pyarrow, from_uri, is_fsspec, is_remote, path_on
from .read_ahead import read_ahead
from .retry import RetryPolicy, call_parsing, call_with_retries
from .retrying_fs import policy_of, retrying, unwrapped
from .versions import GONE, FileVersion, drop_listing, file_versions

__all__ = [
    "READ_AHEAD",
    "RETRIES",
    "Access",
    "FileVersion",
    "GONE",
    "RetryPolicy",
    "ShardCache",
    "access_from",
    "as_pyarrow",
    "call_parsing",
    "call_with_retries",
    "drop_listing",
    "file_versions",
    "from_uri",
    "is_fsspec",
    "is_remote",
    "path_on",
    "policy_of",
    "read_ahead",
    "retrying",
    "unwrapped",
]
