"""Transforms: per sample (:class:`Transform`, :class:`PseudoTransform`, :class:`Compose`)
and per batch (:class:`BatchTransform`, alias ``CudaTransform``)."""

from ._base import BatchTransform, Compose, CudaTransform, PseudoTransform, Transform

__all__ = ["BatchTransform", "Compose", "CudaTransform", "PseudoTransform", "Transform"]
