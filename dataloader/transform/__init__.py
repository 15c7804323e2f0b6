"""Per-sample transforms: :class:`Transform`, :class:`PseudoTransform`, :class:`Compose`."""

from ._base import Compose, PseudoTransform, Transform

__all__ = ["Compose", "PseudoTransform", "Transform"]
