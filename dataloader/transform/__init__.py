"""Transforms: per sample (:class:`Transform`, :class:`PseudoTransform`, :class:`Compose`)
and per batch (:class:`BatchTransform`, alias ``CudaTransform``).

- ``_base.py``: the transform contract and those classes; a plain function wrapped as a transform.
- ``vision/``: MegEngine's vision transforms (needs OpenCV; not imported by this package).
"""

from ._base import BatchTransform, Compose, CudaTransform, PseudoTransform, Transform

__all__ = ["BatchTransform", "Compose", "CudaTransform", "PseudoTransform", "Transform"]
