"""Subpackages that share their name with a top-level verb stay callable as that verb.

``neuroedge.export`` and ``neuroedge.models`` are both verbs (``ne.export(...)``,
``ne.models()``) and subpackages. Importing a subpackage binds it as an attribute of its
parent, so after the first ONNX export or model build ``ne.export`` would be the package and
``ne.export(...)`` a TypeError. Each such package makes itself callable as its verb instead.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class VerbPackage(types.ModuleType):
    """A package module whose call is the ``neuroedge.api`` verb of the same name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from neuroedge import api

        return getattr(api, self.__name__.rsplit(".", 1)[-1])(*args, **kwargs)


def callable_as_verb(module_name: str) -> None:
    """Make the (already imported) package ``module_name`` callable as its verb."""
    sys.modules[module_name].__class__ = VerbPackage
