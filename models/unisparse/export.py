"""Export of a folded UniSparse net: ONNX with explicit membranes, and a NIR graph.

The deployed network is ``module.fold(net)``: BN folded into conv weight and bias, masks applied
as zeros, threshold 1. The NIR graph describes exactly that network:

* ``Conv2d`` (folded weight and bias) and ``Affine`` (the readout), ``Flatten`` before it;
* ``LIF`` per spiking layer with per-neuron arrays ``tau = 2 ms``, ``r = 1``, ``v_leak = 0``,
  ``v_threshold = 1``, ``v_reset = 0``: forward Euler with ``dt = 1 ms`` of
  ``tau dv/dt = (v_leak - v) + r I`` reproduces ``neurons.functional.lif_step`` exactly;
* a membrane shortcut is a second edge into the block's output LIF (NIR sums the inputs of
  a node): ``shortcut -> lif2`` (a 1x1 ``Conv2d``) or the previous LIF straight into ``lif2``;
* the ``Output`` node is named ``logits``, after the program output it carries; the program's
  other output, ``spikes`` (every LIF layer flattened and concatenated), is not a node (NIR
  sums a node's inputs, it cannot concatenate them): the graph's metadata names its parts,
  ``"concat:spikes": "stem_lif,b0_lif1,..."``, and a consumer that records populations (the
  Lava backend) assembles it from them.

It is returned as an ``NIRProgram`` (graph + dt), the description the NIR/Lava tooling consumes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from neuroedge.models.unisparse.module import LIF, FoldedResNet
from neuroedge.types import NIRProgram

NORSE_INSTALL = "pip install --no-deps norse==1.1.0 nirtorch==2.6"


def _conv_node(conv: torch.nn.Conv2d, size: int) -> Any:
    import nir

    return nir.Conv2d(
        input_shape=(size, size),
        weight=conv.weight.detach().numpy().copy(),
        stride=conv.stride,
        padding=conv.padding,
        dilation=conv.dilation,
        groups=conv.groups,
        bias=conv.bias.detach().numpy().copy(),
    )


def _lif_node(shape: tuple[int, ...]) -> Any:
    import nir

    full = lambda value: np.full(shape, value, dtype=np.float32)
    return nir.LIF(
        tau=full(LIF.tau_mem),
        r=full(LIF.r),
        v_leak=full(LIF.v_leak),
        v_threshold=full(float(LIF.v_th)),
        v_reset=full(LIF.v_reset),
    )


def to_nir(folded: FoldedResNet) -> NIRProgram:
    """The NIR graph of ``folded`` (see the module docstring), with ``dt`` in seconds."""
    import nir

    arch = folded.arch
    shapes = arch.neuron_shapes()
    nodes: dict[str, Any] = {
        "input": nir.Input(
            input_type={"input": np.array([arch.in_channels, arch.image, arch.image])}
        ),
        "stem": _conv_node(folded.stem, arch.image),
        "stem_lif": _lif_node(shapes[0]),
    }
    edges = [("input", "stem"), ("stem", "stem_lif")]
    prev, size = "stem_lif", arch.image
    for i, block in enumerate(folded.blocks):
        names = [f"b{i}_{part}" for part in ("conv1", "lif1", "conv2", "lif2", "shortcut")]
        out_size = shapes[2 * i + 1][1]
        nodes[names[0]] = _conv_node(block.conv1, size)
        nodes[names[1]] = _lif_node(shapes[2 * i + 1])
        nodes[names[2]] = _conv_node(block.conv2, out_size)
        nodes[names[3]] = _lif_node(shapes[2 * i + 2])
        edges += [
            (prev, names[0]),
            (names[0], names[1]),
            (names[1], names[2]),
            (names[2], names[3]),
        ]
        if isinstance(block.shortcut, torch.nn.Conv2d):
            nodes[names[4]] = _conv_node(block.shortcut, size)
            edges += [(prev, names[4]), (names[4], names[3])]
        else:
            edges.append((prev, names[3]))
        prev, size = names[3], out_size
    nodes["flatten"] = nir.Flatten(input_type={"input": np.array(shapes[-1])}, start_dim=0)
    nodes["fc"] = nir.Affine(
        weight=folded.fc.weight.detach().numpy().copy(), bias=folded.fc.bias.detach().numpy().copy()
    )
    nodes["logits"] = nir.Output(output_type={"output": np.array([arch.classes])})
    edges += [(prev, "flatten"), ("flatten", "fc"), ("fc", "logits")]
    lifs = [n for n in nodes if n.endswith(("_lif", "_lif1", "_lif2"))]
    graph = nir.NIRGraph(
        nodes=nodes,
        edges=edges,
        metadata={
            "concat:spikes": ",".join(lifs),
            "model": "snn.unisparse",
            "arch": arch.name,
            "dt": LIF.dt,
            "reset": LIF.reset,
            "discretisation": "forward Euler",
            "bn": "folded into Conv2d weight and bias",
        },
    )
    return NIRProgram(graph, dt=LIF.dt, meta={"arch": arch.name})


def _topological(order: list[Any], edges: list[tuple[str, str]]) -> list[Any]:
    """``order`` (nirtorch nodes) re-sorted so every node runs after all of its sources."""
    by_name = {node.name: node for node in order}
    pending = {
        name: {src for src, dst in edges if dst == name and src in by_name} for name in by_name
    }
    ranked: list[Any] = []
    while pending:
        ready = [name for name in by_name if name in pending and not pending[name]]
        if not ready:
            raise ValueError(f"NIR graph has a cycle among {sorted(pending)}")
        for name in ready:
            ranked.append(by_name[name])
            del pending[name]
            for sources in pending.values():
                sources.discard(name)
    return ranked


def norse_missing() -> str:
    """``""`` when norse and nirtorch (its NIR importer) import, else why not with the install
    line: ``make`` installs them with ``--no-deps`` (both declare torchvision), the wheel does
    not."""
    try:
        import norse.torch  # noqa: F401
    except ImportError as err:
        return (
            f"norse is not installed ({err}): {NORSE_INSTALL} (make does it; --no-deps: "
            "norse and nirtorch declare torchvision)"
        )
    return ""


def norse_executor(program: NIRProgram) -> Any:
    """The graph imported by norse (``norse.torch.from_nir``), made to run it as written.

    Two quirks of nirtorch 2.6's executor are corrected: it orders nodes depth-first, so a
    shortcut edge into a block's LIF would be read one step late (taken as recurrence); and
    norse hands NIR's batch-free ``Flatten.start_dim`` to torch, which counts the batch axis.
    ImportError with the install line (``norse_missing``) when norse is not installed.
    """
    missing = norse_missing()
    if missing:
        raise ImportError(missing)
    import norse.torch as norse

    executor = norse.from_nir(program.graph, dt=program.dt)
    for node in executor.execution_order:
        if node.name == "flatten":
            node.elem = torch.nn.Flatten(program.graph.nodes["flatten"].start_dim + 1)
    executor.execution_order = _topological(executor.execution_order, program.graph.edges)
    return executor


@torch.no_grad()
def norse_logits(program: NIRProgram, xs: torch.Tensor) -> torch.Tensor:
    """Per-step logits ``(T, batch, classes)`` of the NIR graph run by norse."""
    executor, state, outs = norse_executor(program), None, []
    for x in xs:
        y, state = executor(x, state)
        outs.append(y)
    return torch.stack(outs)
