"""Explicit registries of models and backends, imported lazily.

Each table maps a name to ``"module:attribute"``. Nothing registers itself by import side
effect; third parties add backends through the entry-point group ``neuroedge.backends`` (and
models through ``neuroedge.models``), whose values use the same ``module:attribute`` form.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from neuroedge.errors import PluginError, UnknownNameError
from neuroedge.types import Availability, load_target

if TYPE_CHECKING:
    from neuroedge.backends.base import Backend
    from neuroedge.types import ModelSpec

# name -> "module:attribute" of a ModelSpec. One line per model; keep sorted.
MODELS: dict[str, str] = {
    "alloc.envy_free": "neuroedge.models.envy_free.spec:SPEC",
    "apr.conrad": "neuroedge.models.conrad.spec:SPEC",
    "caption.date": "neuroedge.models.mecat.spec:SPEC",
    "causal.cadre": "neuroedge.models.cadre.spec:SPEC",
    "event.bivision": "neuroedge.models.bivision.spec:SPEC",
    "graph.influence_max": "neuroedge.models.influence_max.spec:SPEC",
    "halluc.freq_attention": "neuroedge.models.freq_halluc.spec:SPEC",
    "ltu.scout": "neuroedge.models.scout.spec:SPEC",
    "pbe.prm_rl": "neuroedge.models.prm_pbe.spec:SPEC",
    "physics.meshft": "neuroedge.models.meshft.spec:SPEC",
    "rl.prefix_rft": "neuroedge.models.prefix_rft.spec:SPEC",
    "safety.hair_trigger": "neuroedge.models.hair_trigger.spec:SPEC",
    "snn.lif_convnet": "neuroedge.models.lif_convnet.spec:SPEC",
    "snn.unisparse": "neuroedge.models.unisparse.spec:SPEC",
    "stats.self_distill": "neuroedge.models.self_distill.spec:SPEC",
    "theory.lora_meanfield": "neuroedge.models.lora_meanfield.spec:SPEC",
    "transfer.grad_transformer": "neuroedge.models.grad_transformer.spec:SPEC",
    "ttt.linear_attention": "neuroedge.models.ttt.spec:SPEC",
    "uq.last_layer": "neuroedge.models.uq_last_layer.spec:SPEC",
    "vla.specprune": "neuroedge.models.specprune.spec:SPEC",
}

# name -> "module:Class" of a Backend. `null` and `host` never need optional packages.
BACKENDS: dict[str, str] = {
    "null": "neuroedge.backends.null:NullBackend",
    "host": "neuroedge.backends.host:HostBackend",
    "onnxrt": "neuroedge.backends.onnxrt:OnnxRuntimeBackend",
    "lava": "neuroedge.backends.lava:LavaBackend",
    "tensorrt": "neuroedge.backends.tensorrt:TensorRTBackend",
}

BACKEND_GROUP = "neuroedge.backends"
MODEL_GROUP = "neuroedge.models"


def _plugin_table(group: str) -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=group)}


def model_table() -> dict[str, str]:
    return {**_plugin_table(MODEL_GROUP), **MODELS}


def backend_table() -> dict[str, str]:
    return {**_plugin_table(BACKEND_GROUP), **BACKENDS}


def model_names() -> list[str]:
    return sorted(model_table())


def _load(kind: str, name: str, target: str) -> Any:
    """``load_target(target)`` of the ``kind`` entry ``name``; PluginError naming the entry,
    its group and value where the module does not import or lacks the attribute, so one
    broken third-party plugin is reported as such rather than crashing doctor or list: a
    module that does not import, lacks the attribute, or whose record refuses its own fields
    (TypeError/ValueError from a ModelSpec's checks while the module imports)."""
    try:
        return load_target(target)
    except (ImportError, AttributeError, TypeError, ValueError) as err:
        if name in (MODELS if kind == "model" else BACKENDS):
            where = f"built-in {kind} {name} = {target}"
        else:
            group = MODEL_GROUP if kind == "model" else BACKEND_GROUP
            where = f"{kind} plugin {name} = {target} (entry point group {group})"
        raise PluginError(f"{where} does not load: {type(err).__name__}: {err}") from err


def get_model(name: str) -> ModelSpec:
    """The ModelSpec registered under ``name``; unknown names list the valid ones."""
    table = model_table()
    if name not in table:
        raise UnknownNameError("model", name, list(table))
    spec = _load("model", name, table[name])
    if spec.name != name:
        raise ValueError(f"registry entry {name!r} points to a spec named {spec.name!r}")
    return spec


def known_backends() -> list[str]:
    """Every backend neuroedge knows of, available here or not (ONNX Runtime's split)."""
    return sorted(backend_table())


def get_backend(name: str) -> Backend:
    """A fresh instance of the backend registered under ``name``."""
    table = backend_table()
    if name not in table:
        raise UnknownNameError("backend", name, list(table))
    return _load("backend", name, table[name])()


def probed(backend: Backend) -> Availability:
    """``backend.probe()``, or, where the probe itself raises, unavailable with the error as the
    reason: a bug in one probe (a third party's too) must not end doctor or a bench."""
    try:
        return backend.probe()
    except Exception as err:  # any error of a probe is its reason: probes never raise
        return Availability(False, f"its probe raised {type(err).__name__}: {err}")


def available_backends() -> dict[str, Availability]:
    """``{name: Availability}`` for every known backend; probes never raise (``probed``), and
    a backend whose plugin does not load is unavailable, its import error the reason."""
    found = {}
    for name in known_backends():
        try:
            backend = get_backend(name)
        except PluginError as err:
            found[name] = Availability(False, str(err))
            continue
        found[name] = probed(backend)
    return found
