"""neuroedge SNNs to NIR graphs and back: export, validated .nir (HDF5) files, parameters.

NIR describes neurons in continuous time. neuroedge's LIF (neuroedge.models.neurons) is the
forward-Euler step of exactly NIR's LIF equation ``tau dv/dt = (v_leak - v) + r i``::

    v_pre = v + dt / tau * (v_leak - v + r * i);  z = H(v_pre - v_th)
    v'    = v_reset if z else v_pre   (reset "zero")  |  v' = v_pre - v_th * z   ("subtract")

so the export copies tau, r, v_leak, v_threshold and v_reset unchanged and writes the step
``dt`` into the graph. The explicit discrete <-> continuous map (:func:`euler_decay`,
:func:`tau_from_decay`) is what a discrete consumer (Lava's ``dv``, snnTorch's ``beta``) needs.

Design decisions NIR leaves open, and why:

* ``dt`` goes into the graph's metadata (``{"dt": seconds}``): NIR has no field for it and
  consumers assume different defaults (norse 1e-3, snnTorch 1e-4), so an importer here refuses
  a graph without dt unless the caller gives one.
* The reset mode goes into each neuron node's metadata (``{"reset": "zero"|"subtract"}``).
  NIR 1.0.8 defines only reset-to-``v_reset``; "subtract" is how snnTorch's Braille graphs
  were trained and nothing in the file says so. Import takes ``reset=`` to override.
* Scalar neuron parameters are broadcast to the population shape: NIR's type inference
  needs full arrays (NIR #176), and per-channel thresholds then round-trip unchanged.
* A residual add ``a + b`` becomes several edges into the consuming node (NIR sums inputs).
* Spiking outputs of the program (``spikes1`` ...) become extra ``Output`` nodes named after
  them, so a consumer can compare every layer, not only the readout.
* ``pool="fold"`` merges an ``AvgPool2d`` into the ``Conv2d`` before it (a stride-k conv with
  the averaged kernel, exact) for consumers without AvgPool2d (norse 1.1's importer).

The torch side is traced with torch.fx (neuroedge.export.nir_trace); LIF/LI cells are leaves,
state graph inputs and state outputs are dropped (NIR neurons own their state). A program whose
step torch.fx cannot trace (a loop over blocks and state tuples, as snn.unisparse's folded
ResNet) carries its own description instead: ``program.meta["nir"]``, a callable returning the
graph (or an ``NIRProgram``), which :func:`to_nir` validates and returns, so every consumer (the
Lava backend, ``neuroedge export --target nir``) takes one path. Running an imported graph is in
neuroedge.export.nir_run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.atomic import atomic_path
from neuroedge.errors import ArtifactError, ExportRefused
from neuroedge.export.nir_shapes import conv2d_io, declared, propagate
from neuroedge.types import ModelSpec, TorchProgram

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
RESETS = ("zero", "subtract")
NODE_TYPES = (
    "Input",
    "Output",
    "NIRGraph",
    "Affine",
    "Linear",
    "Scale",
    "Conv1d",
    "Conv2d",
    "SumPool2d",
    "AvgPool2d",
    "Flatten",
    "Delay",
    "I",
    "IF",
    "LI",
    "LIF",
    "CubaLI",
    "CubaLIF",
    "Threshold",
)


def euler_decay(tau: Any, dt: float) -> Any:
    """Per-step membrane decay of forward Euler: ``1 - dt / tau`` (Lava's ``1 - dv``)."""
    return 1.0 - dt / np.asarray(tau, dtype=np.float64)


def tau_from_decay(decay: Any, dt: float) -> Any:
    """The time constant whose Euler step decays by ``decay`` per ``dt``: ``dt / (1 - decay)``."""
    decay = np.asarray(decay, dtype=np.float64)
    if np.any(decay >= 1.0) or np.any(decay < 0.0):
        raise ValueError(f"decay must lie in [0, 1), got {decay}")
    return dt / (1.0 - decay)


def _full(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    arr = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    arr = arr.astype(np.float32)
    if arr.ndim == 1 and len(shape) >= 2 and arr.shape[0] == shape[0]:
        # per-channel value of a (C, ...) population, as the host neuron reads it (dim 1 of
        # its (batch, C, ...) state: neuroedge.models.neurons.functional.per_channel)
        arr = arr.reshape(-1, *[1] * (len(shape) - 1))
    return np.ascontiguousarray(np.broadcast_to(arr, shape))


def neuron_node(params: Any, shape: tuple[int, ...], spiking: bool) -> Any:
    """A NIR ``LIF`` (or ``LI`` for a readout) from neuroedge ``LIFParams``."""
    import nir

    if params.reset not in RESETS:
        raise ValueError(f"reset {params.reset!r} is not one of {RESETS}")
    common = {
        "tau": _full(params.tau_mem, shape),
        "r": _full(params.r, shape),
        "v_leak": _full(params.v_leak, shape),
    }
    meta = {"dt": float(params.dt)}
    if not spiking:
        return nir.LI(**common, metadata=meta)
    return nir.LIF(
        **common,
        v_threshold=_full(params.v_th, shape),
        v_reset=_full(params.v_reset, shape),
        metadata={**meta, "reset": params.reset},
    )


def refuse_other_dt(name: str, dt: float | None, own: float | None) -> None:
    """ExportRefused for a ``dt`` other than the step the neurons' taus are for (``own``): a
    graph labelled with another step runs another net in any reader; None is no request."""
    if dt is not None and (own is None or not math.isclose(float(dt), own, rel_tol=1e-9)):
        raise ExportRefused(
            f"{name}: its neurons step at dt {own}; dt={dt} would label the graph with "
            "another step than its taus were trained at: leave dt out"
        )


def to_nir(
    program: TorchProgram,
    spec: ModelSpec,
    dt: float | None = None,
    example: Mapping[str, Any] | None = None,
    pool: str = "keep",
) -> Any:
    """The NIR graph of a stateful torch SNN (``pool``: "keep" AvgPool2d or "fold" it)."""
    from neuroedge.export.nir_fold import fold_avgpool
    from neuroedge.export.nir_trace import traced_graph

    if pool not in ("keep", "fold"):
        raise ValueError(f"pool {pool!r} is not one of ('keep', 'fold')")
    own = program.meta.get("nir")
    if own is not None:  # the model writes its own graph (one torch.fx cannot trace)
        described = own()
        graph = getattr(described, "graph", described)
        refuse_other_dt(spec.name, dt, graph.metadata.get("dt"))
    else:
        graph = traced_graph(program, spec, dt, example)
    if pool == "fold":
        graph = fold_avgpool(graph)
    validate(graph, where=spec.name)
    return graph


def _check_finite(where: str, name: str, param: str, value: Any) -> None:
    """Refuse a float parameter holding NaN or +-inf (an inf weight makes NaN membranes,
    which compare "equal" to a reference that is NaN too), naming node and parameter."""
    if isinstance(value, (float, np.floating)):
        value = np.asarray(value)
    if not (isinstance(value, np.ndarray) and value.dtype.kind == "f"):
        return
    nan, inf = int(np.isnan(value).sum()), int(np.isinf(value).sum())
    if nan or inf:
        found = " and ".join(
            f"{count} {what}" for count, what in ((nan, "NaN"), (inf, "infinite")) if count
        )
        raise ArtifactError(
            f"{where}: node {name!r} parameter {param!r} holds {found} value(s) "
            f"(first at index {tuple(int(i) for i in np.argwhere(~np.isfinite(value))[0])}: "
            f"{value[~np.isfinite(value)][0]}); parameters must be finite"
        )


def validate(graph: Any, where: str = "graph") -> None:
    """Edges name existing nodes, node types are known, no parameter holds NaN or inf, every time
    constant (tau, tau_mem, tau_syn) is positive, shapes agree along every edge, and every
    node's parameters fit the shape it receives from the Inputs (nir_shapes.propagate)."""
    names = set(graph.nodes)
    for name, node in graph.nodes.items():
        kind = type(node).__name__
        if kind not in NODE_TYPES:
            raise ArtifactError(
                f"{where}: node {name!r} has unknown type {kind!r} "
                f"(NIR types: {', '.join(NODE_TYPES)})"
            )
        if kind == "NIRGraph":
            validate(node, where=f"{where}/{name}")
            continue
        for param, value in vars(node).items():
            _check_finite(where, name, param, value)
            if param.startswith("tau") and np.any(np.asarray(value) <= 0):
                bad = np.asarray(value)[np.asarray(value) <= 0]
                raise ArtifactError(
                    f"{where}: node {name!r} time constant {param!r} must be "
                    f"> 0; {bad.size} value(s) are not (first {bad.flat[0]:g})"
                )
    for src, dst in graph.edges:
        for end in (src, dst):
            if end not in names:
                raise ArtifactError(
                    f"{where}: edge {src!r} -> {dst!r} names node {end!r}, "
                    f"which the graph lacks (nodes: {sorted(names)})"
                )
        out, into = _declared(graph.nodes[src], "output"), _declared(graph.nodes[dst], "input")
        if out is not None and into is not None and np.prod(out) != np.prod(into):
            raise ArtifactError(
                f"{where}: edge {src!r} -> {dst!r}: node {src!r} outputs "
                f"shape {list(out)} but node {dst!r} expects {list(into)}"
            )
    propagate(graph, where)  # what each node receives, from the Inputs: parameters must fit


def _declared(node: Any, side: str) -> tuple[int, ...] | None:
    """A node's declared input or output shape; a Conv2d's from its weight, stride, padding,
    dilation, groups and input_shape (torch's formula: nir 1.0.8 ignores groups and takes the
    kernel's height for both axes)."""
    if type(node).__name__ == "Conv2d":
        return conv2d_io(node)[0 if side == "input" else 1]
    return declared(getattr(node, f"{side}_type", None))


def write_nir(graph: Any, path: str | os.PathLike[str]) -> Path:
    """Validate ``graph`` and write it as .nir (HDF5, gzip) atomically."""
    import nir

    validate(graph, where=str(path))
    # nir 1.0.8 gzips every dataset, and h5py refuses filters on scalar datasets (graphs
    # from norse's to_nir hold scalars): write those graphs uncompressed.
    scalar = any(
        np.ndim(v) == 0
        for node in graph.nodes.values()
        for v in vars(node).values()
        if isinstance(v, (np.ndarray, float, int))
    )
    with atomic_path(path) as tmp:
        nir.write(str(tmp), graph, compression=None if scalar else "gzip")
        try:  # what was written must read back, before it replaces an older file
            read_nir(tmp)
        except ArtifactError as err:
            raise ArtifactError(
                f"{path}: not written: the graph does not read back ({err})"
            ) from err
    return Path(path)


def _node_types(group: Any, prefix: str = "") -> list[tuple[str, str]]:
    found = []
    for name, sub in group.items():
        kind = sub["type"][()] if "type" in sub else b"<missing>"
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        found.append((prefix + name, kind))
        if kind == "NIRGraph" and "nodes" in sub:
            found += _node_types(sub["nodes"], f"{prefix}{name}/")
    return found


def read_nir(path: str | os.PathLike[str]) -> Any:
    """Read and validate a .nir file; corrupt files, unknown nodes, bad edges name the culprit."""
    import h5py
    import nir

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such NIR file")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
    if head != HDF5_MAGIC:
        raise ArtifactError(
            f"{path}: not an HDF5/NIR file (byte 0: {head!r}, expected "
            f"{HDF5_MAGIC!r}; {size} bytes)"
        )
    try:
        with h5py.File(path, "r") as f:
            if "node" not in f or "nodes" not in f["node"]:
                raise ArtifactError(f"{path}: HDF5 file without a NIR 'node/nodes' group")
            for name, kind in _node_types(f["node"]["nodes"]):
                if kind not in NODE_TYPES:
                    raise ArtifactError(
                        f"{path}: node {name!r} has unknown type {kind!r} "
                        f"(NIR types: {', '.join(NODE_TYPES)})"
                    )
        try:
            graph = nir.read(str(path))
        except ValueError as err:
            if "Type inference" not in str(err):
                raise
            # Writers that leave neuron shapes out (norse #412, snnTorch #410) fail NIR's
            # type inference; read without it and check the edges whose shapes are known.
            graph = nir.read(str(path), type_check=False)
    except ArtifactError:
        raise
    # h5py raises RuntimeError for corrupt metadata ("bad heap free list", a flipped bit)
    except (
        OSError,
        KeyError,
        ValueError,
        TypeError,
        AttributeError,
        AssertionError,
        RuntimeError,
    ) as err:
        raise ArtifactError(
            f"{path}: unreadable NIR file ({size} bytes; corrupt or "
            f"truncated?): {type(err).__name__}: {err}"
        ) from err
    validate(graph, where=str(path))
    return graph
