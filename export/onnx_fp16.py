"""float32 ONNX graph -> float16 graph with float32 IO (the ``fp16`` variant of ``tensorrt``).

Every float32 initializer, constant and cast becomes float16, with a Cast at each float32 graph
input and output, so callers do not change. A finite constant beyond the half range (|x| >
65504) is refused naming it, not clipped (x / 1e5 would become x / 65504, wrong by 1.53x on
every output); infinities (attention masks) and NaN are float16 values and stay as they are.
We convert ourselves: onnxconverter-common 1.16 mistypes Cast/Unsqueeze outputs of our exported
graphs (measured), and NVIDIA's ModelOpt AutoCast is a heavy GPU-side dependency.

Ops whose ONNX schema has no float16 type keep float32 as an island: ``Range`` (torch's
``arange`` over a float length, as in vla.specprune's position tables) runs in float32 with
the constants, casts and scalar arithmetic that make its start, limit and delta
(``float32_region``), so they are never rounded to float16 on the way; the island's inputs
from the float16 graph are cast up, its outputs cast down. Inputs that only take float32 whatever
the op's type (Resize's scales) stay float32. Control-flow subgraphs (If/Loop/Scan) are refused
rather than half-converted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from neuroedge.export.tensorrt_support import TensorRTUnsupported

FP16_MAX = 65504.0
PRECISION_KEY = "neuroedge.precision"
# Inputs whose type is tensor(float) whatever the op's T is: they stay float32 in fp16 graphs.
FLOAT32_ONLY_INPUTS = {"Resize": (2,), "Upsample": (1,)}
# Ops with no float16 in their type constraint: computed in float32 between two Casts.
FLOAT32_ONLY_OPS = ("Range",)
# What may feed them and stays float32 with them (constants, casts, scalar arithmetic).
REGION_OPS = frozenset(
    "Constant Cast Identity Add Sub Mul Div Neg Abs Floor Ceil Round Min Max Squeeze "
    "Unsqueeze Reshape Gather Concat Slice".split()
)


def _to_fp16_tensor(tensor: Any, where: str) -> Any:
    """``tensor`` in float16; ExportRefused naming ``where`` when a finite value is beyond the
    half range (float16 would clip it or make it infinite: a silently wrong graph)."""
    import numpy as np
    from onnx import numpy_helper

    arr = numpy_helper.to_array(tensor)
    over = np.isfinite(arr) & (np.abs(arr) > FP16_MAX)
    if over.any():
        from neuroedge.errors import ExportRefused

        raise ExportRefused(
            f"fp16: {where} holds {int(over.sum())} finite value(s) beyond float16's range "
            f"(largest magnitude {float(np.abs(arr[over]).max()):.6g} > {FP16_MAX:g}), which "
            "float16 cannot represent; export it in fp32 or int8, or rescale the constant"
        )
    return numpy_helper.from_array(arr.astype(np.float16), tensor.name)


def _retype_nodes(nodes: Sequence[Any], keep32: set[str]) -> None:
    """Casts, dtype attributes and float constants of ``nodes`` to float16."""
    from onnx import AttributeProto, TensorProto

    for node in nodes:
        for attr in node.attribute:
            if attr.name in ("to", "dtype") and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.FLOAT16
            elif (
                attr.type == AttributeProto.TENSOR
                and attr.t.data_type == TensorProto.FLOAT
                and not keep32.intersection(node.output)
            ):
                where = f"node {node.name or node.output[0]!r} ({node.op_type}) {attr.name}"
                attr.t.CopyFrom(_to_fp16_tensor(attr.t, where))


def float_values(model: Any) -> set[str]:
    """Names of the float32 tensors of ``model`` (inputs, initializers, inferred values)."""
    import onnx
    from onnx import TensorProto

    inferred = onnx.shape_inference.infer_shapes(model)
    infos = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    names = {v.name for v in infos if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    return names | {i.name for i in model.graph.initializer if i.data_type == TensorProto.FLOAT}


def float32_region(
    nodes: Sequence[Any], floats: set[str], initializers: set[str]
) -> tuple[set[int], set[str]]:
    """(indices of the nodes, names of the initializers) kept in float32: every
    FLOAT32_ONLY_OPS node that computes on floats, and, back from its float inputs, the
    constants, casts and scalar arithmetic that make them (``REGION_OPS``), so that Range's
    start, limit and delta are never rounded to float16 on the way (0.1 would become 0.09998
    and Range(0, 1, 0.1) give 11 elements; a length 2049 cast to float16 becomes 2048)."""
    producer = {out: k for k, node in enumerate(nodes) for out in node.output}
    region = {
        k
        for k, n in enumerate(nodes)
        if n.op_type in FLOAT32_ONLY_OPS and floats.intersection(n.input)
    }
    inits: set[str] = set()
    stack = [name for k in region for name in nodes[k].input if name in floats]
    while stack:
        name = stack.pop()
        if name in initializers:
            inits.add(name)
            continue
        k = producer.get(name)
        if k is None or k in region or nodes[k].op_type not in REGION_OPS:
            continue  # a graph input or a float16 compute node: cast up at the boundary
        region.add(k)
        stack += [i for i in nodes[k].input if i in floats]
    return region, inits


def _unique(name: str, taken: set[str]) -> str:
    out, n = name, 1
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


def _float32_islands(
    nodes: Sequence[Any], floats: set[str], region: set[int], inits: set[str]
) -> list[Any]:
    """``nodes`` with the float32 ``region`` joined to the float16 rest by Casts: a float
    input a region node takes from outside it is cast up to float32, a region tensor a node
    outside takes is cast down to float16 (once per tensor)."""
    from onnx import TensorProto, helper

    taken = {name for node in nodes for name in (*node.input, *node.output)} | inits
    inside = inits | {out for k in region for out in nodes[k].output}
    down: dict[str, str] = {}
    out: list[Any] = []
    for k, node in enumerate(nodes):
        for j, name in enumerate(node.input):
            if name not in floats:
                continue
            if k in region and name not in inside:
                up = _unique(f"{name}__to32", taken)
                out.append(helper.make_node("Cast", [name], [up], to=TensorProto.FLOAT, name=up))
                node.input[j] = up
            elif k not in region and name in inside:
                if name not in down:
                    down[name] = _unique(f"{name}__to16", taken)
                    out.append(
                        helper.make_node(
                            "Cast", [name], [down[name]], to=TensorProto.FLOAT16, name=down[name]
                        )
                    )
                node.input[j] = down[name]
        out.append(node)
    return out


def convert_to_fp16(model: Any) -> Any:
    """A float16 copy of ``model`` with float32 IO (Casts at the boundary); see module doc."""
    import onnx
    from onnx import TensorProto

    check_no_subgraphs(model)
    floats = float_values(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    keep32 = {
        n.input[i]
        for n in graph.node
        for i in FLOAT32_ONLY_INPUTS.get(n.op_type, ())
        if i < len(n.input)
    }
    nodes = list(graph.node)
    region, region_inits = float32_region(nodes, floats, {i.name for i in graph.initializer})
    keep32 |= region_inits
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT and init.name not in keep32:
            graph.initializer[i].CopyFrom(_to_fp16_tensor(init, f"initializer {init.name!r}"))
    _retype_nodes([n for k, n in enumerate(nodes) if k not in region], keep32)
    islands = sum(nodes[k].op_type in FLOAT32_ONLY_OPS for k in region)
    body = _float32_islands(nodes, floats, region, region_inits)
    del graph.node[:]
    graph.node.extend(_float32_io(out, body))
    del graph.value_info[:]
    record = {"precision": "fp16", "float32_ops": islands, "float32_nodes": len(region)}
    set_meta(out, PRECISION_KEY, json.dumps(record))
    return _checked_fp16(out)


def _float32_io(model: Any, body: list[Any]) -> list[Any]:
    """``body`` between a Cast to float16 of each float32 graph input and a Cast to float32 of
    each float32 graph output (inside, those tensors are renamed ``<name>__fp16``)."""
    from onnx import TensorProto, helper

    from neuroedge.export.tensorrt_profile import graph_inputs

    graph = model.graph
    is_float = lambda vi: vi.type.tensor_type.elem_type == TensorProto.FLOAT
    inner = {i.name: f"{i.name}__fp16" for i in graph_inputs(model) if is_float(i)}
    inner.update(
        {o.name: f"{o.name}__fp16" for o in graph.output if is_float(o) and o.name not in inner}
    )
    head = [
        helper.make_node(
            "Cast", [name], [inner[name]], to=TensorProto.FLOAT16, name=f"{name}__to_fp16"
        )
        for name in inner
        if name in {i.name for i in graph.input}
    ]
    tail = [
        helper.make_node(
            "Cast", [inner[o.name]], [o.name], to=TensorProto.FLOAT, name=f"{o.name}__to_fp32"
        )
        for o in graph.output
        if is_float(o)
    ]
    for node in body:
        node.input[:] = [inner.get(n, n) for n in node.input]
        node.output[:] = [inner.get(n, n) for n in node.output]
    return [*head, *body, *tail]


def _checked_fp16(model: Any) -> Any:
    """``model`` with inferred shapes, checked; an op still left without a float16 form is an
    ExportRefused naming it, not onnx's traceback."""
    import onnx

    try:
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(model)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as err:
        from neuroedge.errors import ExportRefused

        first = str(err).strip().splitlines()[0]
        raise ExportRefused(
            f"fp16: the graph has an op with no float16 form once its floats are converted "
            f"({first}); export it in fp32 or int8"
        ) from None
    return model


def check_no_subgraphs(model: Any) -> None:
    from onnx import AttributeProto

    for node in model.graph.node:
        if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            raise TensorRTUnsupported(
                f"node {node.name!r} ({node.op_type}) carries a subgraph; fp16 preparation "
                "rewrites flat graphs only: build fp32, or convert with ModelOpt AutoCast"
            )


def set_meta(model: Any, key: str, value: str) -> None:
    """Set (or replace) the metadata entry ``key`` of ``model``."""
    for entry in model.metadata_props:
        if entry.key == key:
            entry.value = value
            return
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value
