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

The torch side is traced with torch.fx; LIF/LI cells are leaves, state graph inputs and state
outputs are dropped (NIR neurons own their state). A program whose step torch.fx cannot trace
(a loop over blocks and state tuples, as snn.unisparse's folded ResNet) carries its own
description instead: ``program.meta["nir"]``, a callable returning the graph (or an
``NIRProgram``), which :func:`to_nir` validates and returns, so every consumer (the Lava
backend, ``neuroedge export --target nir``) takes one path. Running an imported graph is in
neuroedge.export.nir_run.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.atomic import atomic_path
from neuroedge.errors import ArtifactError, ExportRefused
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
    if arr.ndim == 1 and len(shape) == 3 and arr.shape[0] == shape[0]:
        arr = arr[:, None, None]  # per-channel value of a (C, H, W) population
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


def _torch_node(module: Any, in_shape: tuple[int, ...]) -> Any:
    import nir
    from torch import nn

    w = module.weight.detach().numpy().astype(np.float32)
    b = None if module.bias is None else module.bias.detach().numpy().astype(np.float32)
    if isinstance(module, nn.Linear):
        return nir.Linear(weight=w) if b is None else nir.Affine(weight=w, bias=b)
    if isinstance(module, nn.Conv2d) and isinstance(module.padding, tuple):
        return nir.Conv2d(
            input_shape=in_shape[1:],
            weight=w,
            stride=module.stride,
            padding=module.padding,
            dilation=module.dilation,
            groups=module.groups,
            bias=np.zeros(w.shape[0], np.float32) if b is None else b,
        )
    raise ExportRefused(
        f"{type(module).__name__} has no NIR export (Linear, Conv2d with "
        "numeric padding, LIF/LI cells, avg_pool2d, flatten and + are mapped)"
    )


def _pool_node(node: Any, in_shape: tuple[int, ...]) -> Any:
    import nir

    kernel = node.args[1] if len(node.args) > 1 else node.kwargs["kernel_size"]
    stride = node.args[2] if len(node.args) > 2 else node.kwargs.get("stride") or kernel
    pad = node.args[3] if len(node.args) > 3 else node.kwargs.get("padding", 0)
    pair = lambda v: np.array(v if isinstance(v, (tuple, list)) else (v, v))
    return nir.AvgPool2d(kernel_size=pair(kernel), stride=pair(stride), padding=pair(pad))


class _Tracer:
    """Builds the torch.fx tracer lazily (torch stays out of ``import neuroedge``)."""

    @staticmethod
    def trace(module: Any) -> Any:
        import torch.fx

        class CellTracer(torch.fx.Tracer):
            def is_leaf_module(self, m: Any, qualname: str) -> bool:
                return hasattr(m, "params") or super().is_leaf_module(m, qualname)

        return torch.fx.GraphModule(module, CellTracer().trace(module))


def _shapes(gm: Any, args: tuple[Any, ...]) -> None:
    from torch.fx.passes.shape_prop import ShapeProp

    ShapeProp(gm).propagate(*args)


def _meta_shape(node: Any) -> tuple[int, ...]:
    tm = node.meta.get("tensor_meta")
    if not hasattr(tm, "shape"):  # a cell returns (output, state)
        tm = tm[0]
    return tuple(int(d) for d in tm.shape[1:])  # drop batch


def to_nir(
    program: TorchProgram,
    spec: ModelSpec,
    dt: float | None = None,
    example: Mapping[str, Any] | None = None,
    pool: str = "keep",
) -> Any:
    """The NIR graph of a stateful torch SNN (``pool``: "keep" AvgPool2d or "fold" it)."""
    from neuroedge.export.nir_fold import fold_avgpool

    if pool not in ("keep", "fold"):
        raise ValueError(f"pool {pool!r} is not one of ('keep', 'fold')")
    own = program.meta.get("nir")
    if own is not None:  # the model writes its own graph (one torch.fx cannot trace)
        described = own()
        graph = getattr(described, "graph", described)
    else:
        graph = _traced_graph(program, spec, dt, example)
    if pool == "fold":
        graph = fold_avgpool(graph)
    validate(graph, where=spec.name)
    return graph


def _traced_graph(
    program: TorchProgram, spec: ModelSpec, dt: float | None, example: Mapping[str, Any] | None
) -> Any:
    import torch

    if not program.stateful:
        raise ExportRefused(f"{spec.name}: NIR export needs a stateful SNN step program")
    example = (
        spec.example_for(0, (program.meta or {}).get("config")) if example is None else example
    )
    x0 = [torch.as_tensor(example[n])[0] for n in program.input_names]
    try:
        gm = _Tracer.trace(program.module)
    except torch.fx.proxy.TraceError as err:
        raise ExportRefused(
            f"{spec.name}: the step cannot be traced by torch.fx for NIR export ({err})"
        ) from err
    _shapes(gm, (*x0, *program.init_state(int(x0[0].shape[0]))))
    nodes, edges, dts = _convert(gm, program, x0)
    if dt is None:
        if len(dts) != 1:
            raise ExportRefused(f"{spec.name}: neurons use dt {sorted(dts)}; give dt=")
        dt = dts.pop()
    return _graph(nodes, edges, {"dt": float(dt), "producer": "neuroedge", "model": spec.name})


def _convert(gm: Any, program: TorchProgram, x0: list[Any]) -> tuple[dict, list, set]:
    import nir
    import torch

    nodes: dict[str, Any] = {}
    edges: list[tuple[str, str]] = []
    value: dict[str, list[str] | None] = {}  # fx node -> NIR sources (None: state)
    dts: set[float] = set()
    n_in, n_out = len(program.input_names), len(program.output_names)
    fx_inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, ph in enumerate(fx_inputs):
        if i < n_in:
            name = program.input_names[i]
            nodes[name] = nir.Input(input_type={"input": np.array(x0[i].shape[1:])})
            value[ph.name] = [name]
        else:
            value[ph.name] = None
    modules = dict(gm.named_modules())

    def add(name: str, node: Any, sources: list[str]) -> list[str]:
        nodes[name] = node
        edges.extend((s, name) for s in sources)
        return [name]

    for n in gm.graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        src = value.get(n.args[0].name) if n.args and hasattr(n.args[0], "name") else None
        key = n.target.replace(".", "_") if isinstance(n.target, str) else n.name
        if n.op == "call_module" and hasattr(modules[n.target], "params"):
            cell = modules[n.target]
            dts.add(float(cell.params.dt))
            spiking = getattr(cell, "is_spiking_neuron", False)
            value[n.name] = add(key, neuron_node(cell.params, _meta_shape(n), spiking), src)
        elif n.op == "call_module":
            in_shape = _meta_shape(n.args[0])
            value[n.name] = add(key, _torch_node(modules[n.target], in_shape), src)
        elif n.op == "call_function" and n.target is operator.getitem:
            value[n.name] = src if n.args[1] == 0 else None
        elif n.target is torch.nn.functional.avg_pool2d:
            value[n.name] = add(n.name, _pool_node(n, _meta_shape(n.args[0])), src)
        elif n.target in ("flatten", torch.flatten):
            start = n.args[1] if len(n.args) > 1 else n.kwargs.get("start_dim", 0)
            if start < 1:
                raise ExportRefused(f"fx node {n.name}: flatten over the batch axis")
            shape = np.array(_meta_shape(n.args[0]))
            value[n.name] = add(
                n.name, nir.Flatten(input_type={"input": shape}, start_dim=start - 1), src
            )
        elif n.target in (operator.add, torch.add):
            value[n.name] = [s for a in n.args[:2] for s in (value.get(a.name) or [])]
        else:
            raise ExportRefused(f"fx node {n.name} ({n.op} {n.target}) has no NIR mapping")
    out_args = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    for name, arg in zip(program.output_names, list(out_args)[:n_out]):
        add(
            name,
            nir.Output(output_type={"output": np.array(_meta_shape(arg))}),
            value[arg.name] or [],
        )
    return nodes, edges, dts


def _graph(nodes: dict[str, Any], edges: list[tuple[str, str]], meta: dict[str, Any]) -> Any:
    import nir

    try:
        return nir.NIRGraph(nodes=nodes, edges=edges, metadata=meta, type_check=True)
    except (ValueError, AssertionError, KeyError) as err:
        raise ExportRefused(f"NIR rejected the exported graph: {err}") from err


def _shape(types: Mapping[str, Any] | None) -> tuple[int, ...] | None:
    if not types:
        return None
    arr = next(iter(types.values()))
    if arr is None or np.asarray(arr).ndim != 1 or np.asarray(arr).size == 0:
        return None
    return tuple(int(d) for d in np.asarray(arr))


def validate(graph: Any, where: str = "graph") -> None:
    """Edges name existing nodes, node types are known, no parameter holds NaN, every time
    constant (tau, tau_mem, tau_syn) is positive, shapes agree along every edge."""
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
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and np.isnan(value).any():
                raise ArtifactError(
                    f"{where}: node {name!r} parameter {param!r} holds "
                    f"{int(np.isnan(value).sum())} NaN value(s)"
                )
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
        out = _shape(getattr(graph.nodes[src], "output_type", None))
        into = _shape(getattr(graph.nodes[dst], "input_type", None))
        if out is not None and into is not None and np.prod(out) != np.prod(into):
            raise ArtifactError(
                f"{where}: edge {src!r} -> {dst!r}: node {src!r} outputs "
                f"shape {list(out)} but node {dst!r} expects {list(into)}"
            )


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
    read_nir(path)  # what was written must read back
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
    except (OSError, KeyError, ValueError, TypeError, AttributeError, AssertionError) as err:
        raise ArtifactError(
            f"{path}: unreadable NIR file ({size} bytes; corrupt or "
            f"truncated?): {type(err).__name__}: {err}"
        ) from err
    validate(graph, where=str(path))
    return graph
