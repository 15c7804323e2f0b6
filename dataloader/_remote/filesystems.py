"""Which filesystem a source names: ``pyarrow.fs`` filesystems, fsspec ones (wrapped), URIs.

pyarrow reads S3, GCS, HDFS and Azure itself; everything else the ecosystem
reaches (``hf://``, ``gcs`` through gcsfs, ``abfs``, ``http``...) has an fsspec
implementation, which ``pyarrow.fs.FSSpecHandler`` wraps as a pyarrow
filesystem. fsspec is imported only when a source needs it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import ArgumentTypeError, ArgumentValueError

# pyarrow's GCS client retries a failing request for 15 minutes unless told otherwise: without a
# network (its credentials come from a metadata server it cannot reach) a reader, or `convert` to
# gs://, hung there. Each request gives up after this many seconds; the library's own retries
# (retries=N, with backoff) still repeat what fails. A URI's own retry_limit_seconds is kept.
GCS_RETRY_SECONDS = 10


def is_fsspec(filesystem: Any) -> bool:
    """Whether ``filesystem`` is an fsspec filesystem (told without importing fsspec)."""
    return any(
        cls.__module__.startswith("fsspec") and cls.__name__ == "AbstractFileSystem" for cls in type(filesystem).__mro__
    )


def as_pyarrow(filesystem: Any) -> pafs.FileSystem:
    """``filesystem`` as a ``pyarrow.fs`` filesystem: as it is, or an fsspec one wrapped."""
    if isinstance(filesystem, pafs.FileSystem):
        return filesystem
    if is_fsspec(filesystem):
        return pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
    raise ArgumentTypeError(
        "`filesystem` must be a pyarrow.fs.FileSystem, an fsspec filesystem (s3fs.S3FileSystem, "
        f"gcsfs.GCSFileSystem, ...) or None; got {type(filesystem).__name__}."
    )


def path_on(filesystem: Any, text: str) -> str:
    """``text`` as a path on ``filesystem``: fsspec filesystems take their URIs without the
    scheme (``s3://bucket/key`` -> ``bucket/key``)."""
    if is_fsspec(filesystem):
        return filesystem._strip_protocol(text)  # type: ignore[no-any-return]
    if "://" in text and not isinstance(filesystem, pafs.LocalFileSystem):
        return text.split("://", 1)[1]
    return text


def from_uri(text: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and path a URI names: pyarrow's own where it knows the scheme, else
    fsspec's (installed with the ``remote`` extra). A GCS one gives up on a request after
    :data:`GCS_RETRY_SECONDS` (see there)."""
    try:
        return pafs.FileSystem.from_uri(_bounded_retries(text))  # type: ignore[no-any-return]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
        scheme = text.split("://", 1)[0]
        try:
            import fsspec  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError:
            raise ArgumentValueError(
                f"pyarrow cannot open {text!r} ({error}), and fsspec, which knows more schemes, is not "
                "installed. Install it with pip install 'dataloader[remote]' (and the package for the "
                f"{scheme!r} scheme, e.g. gcsfs for gs://), or pass filesystem= yourself."
            ) from error
        try:
            filesystem, path = fsspec.core.url_to_fs(text)
        except (ImportError, ValueError) as missing:
            raise ArgumentValueError(
                f"neither pyarrow nor fsspec can open {text!r}: {missing}. Install the fsspec "
                f"package for the {scheme!r} scheme, or pass filesystem= yourself."
            ) from missing
        return as_pyarrow(filesystem), path


def _bounded_retries(text: str) -> str:
    """``text``, a ``gs://`` or ``gcs://`` URI given with a ``retry_limit_seconds`` (pyarrow's
    option) of :data:`GCS_RETRY_SECONDS` unless it has one; any other text as it is."""
    parts = urlsplit(text)
    if parts.scheme not in ("gs", "gcs"):
        return text
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(name == "retry_limit_seconds" for name, _ in query):
        return text
    return urlunsplit(parts._replace(query=urlencode([*query, ("retry_limit_seconds", str(GCS_RETRY_SECONDS))])))


def is_remote(filesystem: pafs.FileSystem) -> bool:
    """Whether reading ``filesystem`` means requests over a network (not the local disk)."""
    if isinstance(filesystem, pafs.LocalFileSystem):
        return False
    if isinstance(filesystem, pafs.PyFileSystem):
        handler = filesystem.handler
        inner = getattr(handler, "inner", None)
        if inner is not None:
            return is_remote(inner)
        fs = getattr(handler, "fs", None)  # FSSpecHandler
        if fs is not None and "local" in getattr(fs, "protocol", ()):
            return False
    return True
