"""Ray, imported only when a :class:`~dataloader.RayStream` is built, and its failures as ours."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..errors import ArgumentTypeError, ArgumentValueError, RayDataError

EXTRA = 'pip install "dataloader[ray]"'


def import_ray() -> ModuleType:
    """``ray`` with Ray Data, or an error that names the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401  (ray alone, without the data extra, lacks it)
    except ImportError as error:
        raise ArgumentValueError(
            f"RayStream needs Ray Data, which is not installed: {EXTRA} (Ray Data 2.x). "
            f"The import failed with: {error}"
        ) from error
    return ray


def checked_source(source: Any) -> Any:
    """``source`` if it is a Ray ``Dataset`` or ``DataIterator``, else a clear error."""
    ray = import_ray()
    if isinstance(source, (ray.data.Dataset, ray.data.DataIterator)):
        return source
    raise ArgumentTypeError(
        "RayStream reads a ray.data.Dataset or a ray.data.DataIterator (from "
        f"Dataset.streaming_split or ray.train.get_dataset_shard); got {type(source).__name__}."
    )


def is_ray_failure(error: BaseException) -> bool:
    """True for an exception Ray raised on purpose (a failed task, a lost actor or node)."""
    import ray.exceptions

    return isinstance(error, ray.exceptions.RayError)


def as_our_error(error: BaseException, epoch: int, batches: int) -> RayDataError:
    """Ray's ``error`` as a :class:`~dataloader.errors.RayDataError` whose text keeps Ray's."""
    return RayDataError(
        f"Ray Data failed while producing RayStream's batches (epoch {epoch}, after {batches} "
        f"batches). Fix the failing step of the Ray Data pipeline, or check the cluster; Ray said: "
        f"{type(error).__name__}: {error}"
    )
