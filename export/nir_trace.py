"""torch.fx tracing of a neuroedge SNN step into NIR nodes and edges (used by ``to_nir``).

The torch side is traced with torch.fx; LIF/LI cells are leaves, state graph inputs and state
outputs are dropped (NIR neurons own their state). Linear, Conv2d with numeric padding, LIF/LI
cells, ``avg_pool2d``, flatten and ``+`` are mapped; anything else is refused with its fx node.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.errors import ExportRefused
from neuroedge.export.nir import neuron_node, refuse_other_dt
from neuroedge.export.onnx import TRACE_LOCK
from neuroedge.types import ModelSpec, TorchProgram

FX_INPUT = "placeholder"  # torch.fx's name for a graph-input node kind (``Node.op``)


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


def traced_graph(
    program: TorchProgram, spec: ModelSpec, dt: float | None, example: Mapping[str, Any] | None
) -> Any:
    """The NIR graph of ``program``'s traced step; ``dt`` from its cells unless given."""
    import torch

    if not program.stateful:
        raise ExportRefused(f"{spec.name}: NIR export needs a stateful SNN step program")
    example = (
        spec.example_for(0, (program.meta or {}).get("config")) if example is None else example
    )
    x0 = [torch.as_tensor(example[n])[0] for n in program.input_names]
    try:  # torch.fx patches nn.Module process-wide while it traces: one trace at a time
        with TRACE_LOCK:
            gm = _Tracer.trace(program.module)
            _shapes(gm, (*x0, *program.init_state(int(x0[0].shape[0]))))
    except torch.fx.proxy.TraceError as err:
        raise ExportRefused(
            f"{spec.name}: the step cannot be traced by torch.fx for NIR export ({err})"
        ) from err
    nodes, edges, dts = _convert(gm, program, x0)
    if len(dts) > 1:  # a NIR graph carries one dt, and each neuron's tau is for its own
        raise ExportRefused(
            f"{spec.name}: neurons step at dt {sorted(dts)}; one NIR graph carries one dt: "
            "give every neuron the same step"
        )
    if dt is None:
        if not dts:
            raise ExportRefused(f"{spec.name}: no neuron carries a step; give dt=")
        dt = dts.pop()
    elif dts:
        refuse_other_dt(spec.name, dt, next(iter(dts)))
    return _graph(nodes, edges, {"dt": float(dt), "producer": "neuroedge", "model": spec.name})


def _convert(gm: Any, program: TorchProgram, x0: list[Any]) -> tuple[dict, list, set]:
    import nir
    import torch

    nodes, value = _input_nodes(gm, program, x0)
    edges: list[tuple[str, str]] = []
    dts: set[float] = set()
    n_out = len(program.output_names)
    modules = dict(gm.named_modules())

    def add(name: str, node: Any, sources: list[str]) -> list[str]:
        nodes[name] = node
        edges.extend((s, name) for s in sources)
        return [name]

    for n in gm.graph.nodes:
        if n.op in (FX_INPUT, "output"):
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


def _input_nodes(
    gm: Any, program: TorchProgram, x0: list[Any]
) -> tuple[dict[str, Any], dict[str, list[str] | None]]:
    """NIR ``Input`` nodes of the graph's data inputs, and each fx input's NIR sources."""
    import nir

    nodes: dict[str, Any] = {}
    value: dict[str, list[str] | None] = {}  # fx node -> NIR sources (None: state)
    n_in = len(program.input_names)
    fx_inputs = [n for n in gm.graph.nodes if n.op == FX_INPUT]
    for i, ph in enumerate(fx_inputs):
        if i < n_in:
            name = program.input_names[i]
            nodes[name] = nir.Input(input_type={"input": np.array(x0[i].shape[1:])})
            value[ph.name] = [name]
        else:
            value[ph.name] = None
    return nodes, value


def _graph(nodes: dict[str, Any], edges: list[tuple[str, str]], meta: dict[str, Any]) -> Any:
    import nir

    try:
        return nir.NIRGraph(nodes=nodes, edges=edges, metadata=meta, type_check=True)
    except (ValueError, AssertionError, KeyError) as err:
        raise ExportRefused(f"NIR rejected the exported graph: {err}") from err
