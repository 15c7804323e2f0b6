"""Retrying a request to object storage: which errors are worth another try, and how long to wait.

A store answers a busy moment with HTTP 503/500/429, a connection reset or a
timeout; the same request a moment later succeeds. Those are retried with
exponential backoff and jitter, up to ``RetryPolicy.retries`` more times. A
denied or missing object (HTTP 403/404) will not change by waiting: it fails
at once. Either way the error is a :class:`~dataloader.RemoteReadError` that
names the object, the attempts and the last cause.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..errors import DataLoaderError, RemoteReadError

T = TypeVar("T")

# Words in an error's text that say the request itself is refused, so repeating it is useless:
# pyarrow's S3 reports "AWS Error ACCESS_DENIED ...", s3fs/botocore "An error occurred (403) ...".
_REFUSED = (
    "ACCESS_DENIED", "AccessDenied", "Forbidden", "(403)", "response code: 403", "InvalidAccessKeyId",
    "SignatureDoesNotMatch", "NoSuchBucket", "NO_SUCH_BUCKET", "NoSuchKey", "NO_SUCH_KEY", "(404)",
    "response code: 404", "Not Found", "InvalidBucketName",
)

# A missing object, told by its status or the store's own words: not by a bare "404", which
# a bucket or key name may hold ("test-25407070ba8a4047b469" made a 403 read as missing).
_MISSING = re.compile(r"\(404\)|(?:response code|HTTP status|status code)\W*404\b|NoSuch|NO_SUCH|RESOURCE_NOT_FOUND|Not Found")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to repeat a failed request: ``retries`` more attempts after
    the first, waiting ``backoff * 2**n`` seconds (at most ``max_wait``) with jitter before the
    n-th, so that many workers failing together do not come back together."""

    retries: int = 5
    backoff: float = 0.25
    max_wait: float = 8.0

    def wait(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based): half to all of the bound."""
        bound = min(self.max_wait, self.backoff * 2**retry)
        return float(bound * (0.5 + random.random() / 2))


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` from a request to a store may pass if the request is repeated."""
    if isinstance(error, DataLoaderError):
        return False  # the library's own verdict (a changed file, an exhausted retry)
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if not isinstance(error, (OSError, EOFError)) and not _network_library(error):
        return False  # a bug, a bad argument, corrupt data: not the network
    text = str(error)
    return not any(word in text for word in _REFUSED)


def _network_library(error: BaseException) -> bool:
    """An HTTP client's own error that is not an ``OSError`` (aiohttp's payload errors under
    s3fs and gcsfs, botocore's and urllib3's connection errors)."""
    module = type(error).__module__.split(".")[0]
    return module in ("aiohttp", "botocore", "urllib3", "requests", "google")


def call_with_retries(request: Callable[[], T], what: str, policy: RetryPolicy) -> T:
    """``request()``, repeated after transient errors as ``policy`` says; its last error as a
    :class:`RemoteReadError` naming ``what`` (the object and the operation)."""
    started = time.monotonic()
    for attempt in range(policy.retries + 1):
        try:
            return request()
        except Exception as error:  # noqa: PERF203 - the loop is the retry
            transient = is_transient(error)
            if transient and attempt < policy.retries:
                time.sleep(policy.wait(attempt))  # backoff, not polling: the store asked us to wait
                continue
            if isinstance(error, DataLoaderError) or not (isinstance(error, (OSError, EOFError)) or transient):
                raise
            raise remote_error(error, what, attempt + 1, time.monotonic() - started, transient) from error
    raise AssertionError("unreachable")  # pragma: no cover


def call_parsing(
    request: Callable[[], T], what: str, policy: RetryPolicy, unparsed: Callable[[BaseException], bool],
    again: Callable[[], None] = lambda: None,
) -> T:
    """``request()``, which parses bytes read from a store, repeated (after ``again()``, which
    drops what the failed attempt read) while it fails to parse, as ``unparsed(error)`` tells.

    pyarrow's S3 filesystem hands over a ranged read whose body came short (cut on the way,
    with a Content-Length to match) as if it were whole, its end left unfilled (0xff bytes:
    the retrying filesystem reads into a buffer of them): the cut shows
    only as bytes that do not parse ("magic bytes not found", a footer or page that cannot be
    decoded). So a parse failure of a remote file is read again; when every attempt fails, the
    error is a :class:`RemoteReadError` that names both causes (a cut, a damaged object).
    """
    started = time.monotonic()
    for attempt in range(policy.retries + 1):
        try:
            return request()
        except Exception as error:  # noqa: PERF203 - the loop is the retry
            if not unparsed(error):
                raise
            if attempt < policy.retries:
                again()
                time.sleep(policy.wait(attempt))  # backoff: a middlebox that cuts bodies may be busy
                continue
            cause = " ".join(f"{type(error).__name__}: {error}".split()).rstrip(".")
            raise RemoteReadError(
                f"cannot read {what}: {attempt + 1} reads over {time.monotonic() - started:.1f} s gave bytes "
                f"that do not parse; the last error was {cause}. Either the store's answers were cut short "
                "on the way (a proxy or the network ending bodies early: check the connection, or allow "
                "more attempts with retries=N), or the object itself is damaged or not of its format: "
                "download it whole and open it with its format's reader (pyarrow, `tar -tf`) to tell.",
                what, attempts=attempt + 1, cause=cause,
            ) from error
    raise AssertionError("unreachable")  # pragma: no cover


def remote_error(error: BaseException, what: str, attempts: int, seconds: float, transient: bool) -> RemoteReadError:
    """The error a request that failed ``attempts`` times ends in, with the fix for its cause."""
    cause = " ".join(f"{type(error).__name__}: {error}".split())
    if transient:
        message = (
            f"cannot read {what}: {attempts} attempts over {seconds:.1f} s all failed; the last error was "
            f"{cause}. The store or the network kept failing: check the endpoint and the connection, or "
            "allow more attempts with retries=N (each waits twice as long as the one before)."
        )
    elif isinstance(error, FileNotFoundError) or _MISSING.search(str(error)):
        message = (
            f"cannot read {what}: the store has no such object ({cause}). It was deleted or moved, or "
            "the URI or bucket is misspelled; not retried, as waiting will not bring it back."
        )
    else:
        message = (
            f"cannot read {what}: the store refused the request ({cause}). Check the credentials the "
            "filesystem uses (for S3: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, and the "
            "bucket's policy); not retried, as waiting will not change the answer."
        )
    return RemoteReadError(message, what, attempts=attempts, cause=cause)
