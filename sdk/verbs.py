"""Subpackages that share their name with a top-level verb stay callable as that verb.

``neuroedge.export`` and ``neuroedge.models`` are both verbs (``ne.export(...)``,
``ne.models()``) and subpackages. Importing a subpackage binds it as an attribute of its
parent, so after the first ONNX export or model build ``ne.export`` would be the package and
``ne.export(...)`` a TypeError. Each such package makes itself callable as its verb instead,
and takes the verb's signature and docstring, so ``help(ne.export)`` and
``inspect.signature(ne.export)`` describe the call, not ``(*args, **kwargs)``.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any


class VerbPackage(types.ModuleType):
    """A package module whose call is the ``neuroedge.api`` verb of the same name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._verb()(*args, **kwargs)

    def _verb(self) -> Any:
        from neuroedge import api

        return getattr(api, self.__name__.rsplit(".", 1)[-1])

    @property
    def __signature__(self) -> inspect.Signature:  # read by inspect.signature, lazily
        return inspect.signature(self._verb())


def callable_as_verb(module_name: str) -> None:
    """Make the (already imported) package ``module_name`` callable as its verb, its
    docstring the verb's followed by the package's."""
    module = sys.modules[module_name]
    module.__class__ = VerbPackage
    verb = module._verb()
    module.__doc__ = (
        f"{module_name}{inspect.signature(verb)}\n\n{inspect.getdoc(verb) or ''}\n\n"
        f"The package {module_name}: {inspect.cleandoc(module.__doc__ or '')}"
    )
