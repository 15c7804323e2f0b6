"""A Griffe extension for the site's API pages (mkdocs.yml loads it; not a page itself).

The docstrings name objects with Sphinx roles (``:class:`~dataloader.monitor.Stats```), which
mkdocstrings would show as they are. This turns each into inline code: the last part of the
target after ``~``, as Sphinx shows it, else the whole target.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_as_code, obj.docstring.value)
