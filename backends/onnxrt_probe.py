"""Whether ONNX Runtime (and onnx, which exports the graphs it runs) is usable here: the onnxrt
backend's probe, which never raises. Both packages are imported, not only found: a build that
is installed but does not import (a numpy ABI mismatch, a missing shared library, a protobuf
too new for onnx) is unavailable with the package and the error named, not a traceback in
``neuroedge doctor`` or halfway through a run."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from neuroedge.types import Availability

# what importing a broken build raises: ImportError (numpy ABI, "DLL load failed"), OSError (a
# shared library), TypeError (protobuf "Descriptors cannot be created directly"),
# AttributeError / ValueError (an incompatible numpy: "dtype size changed")
IMPORT_FAILURES = (ImportError, OSError, TypeError, AttributeError, ValueError)


def imported(package: str) -> tuple[ModuleType | None, str]:
    """``(module, "")`` when ``package`` imports, else ``(None, why)`` (not installed, or
    installed but failing at import, with the error)."""
    if importlib.util.find_spec(package) is None:
        return None, f"{package} is not installed (pip install {package})"
    try:
        return importlib.import_module(package), ""
    except IMPORT_FAILURES as err:
        return None, f"{package} is installed but does not import: {type(err).__name__}: {err}"


def onnxrt_availability() -> Availability:
    """Available with onnxruntime's version and providers, or the reason it is not."""
    ort, why = imported("onnxruntime")
    if ort is None:
        return Availability(False, why)
    onnx, why = imported("onnx")
    if onnx is None:
        return Availability(False, why)
    providers = ", ".join(ort.get_available_providers())
    return Availability(True, f"onnxruntime {ort.__version__}, providers: {providers}")
