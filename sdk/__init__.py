"""neuroedge: export efficient models, run them on edge and neuromorphic targets, measure them.

``import neuroedge`` is cheap: it imports neither torch nor any backend library; those load
when a verb needs them.
"""

from neuroedge.api import deploy, export, model, models, profile
from neuroedge.registry import available_backends, known_backends
from neuroedge.types import (
    Artifact,
    Availability,
    Efficiency,
    HostProgram,
    IOSpec,
    Measurement,
    ModelSpec,
    NIRProgram,
    Paper,
    Program,
    Report,
    Support,
    TorchProgram,
)

__version__ = "0.1.0"
__all__ = [
    "Artifact",
    "Availability",
    "Efficiency",
    "HostProgram",
    "IOSpec",
    "Measurement",
    "ModelSpec",
    "NIRProgram",
    "Paper",
    "Program",
    "Report",
    "Support",
    "TorchProgram",
    "available_backends",
    "deploy",
    "export",
    "known_backends",
    "model",
    "models",
    "profile",
]
