"""What of event.bivision maps to NIR / Lava, the graph of the part that does, and why not
the rest.

The LIF variant's spiking backbone (three stride-2 Conv2d -> LIF stages) maps one to one to
NIR ``Conv2d`` and ``LIF`` nodes and from there to Lava (``neuroedge.export.nir``,
``neuroedge.backends.lava``). ``backbone_program`` cuts it out of a trained BiSNet as its own
explicit-state step ``(x, v1, v2, v3) -> (s3, s1, s2, v1', v2', v3')`` so the shared NIR
exporter handles it. ``NOT_MAPPED`` lists the rest with the reason each stays on the host.
"""

from __future__ import annotations

from typing import Any

from neuroedge.types import IOSpec, ModelSpec, TorchProgram

MAPPED = {
    "backbone Conv2d (3x stride 2)": "NIR Conv2d",
    "LIF neurons (lif variant)": "NIR LIF (forward-Euler step of the same equation)",
    "1x1 lateral convs of the neck": "NIR Conv2d (not exported here: they follow the parts "
    "below that do not map)",
}
NOT_MAPPED = {
    "E2S front end": "event binning and the retina neuron run on the event stream before the "
    "network (numba on the host), as the research note advises; NIR graphs "
    "take tensors per step, not address-events with timestamps",
    "STATNF adaptive threshold": "NIR 1.0 has no adaptive-threshold (ALIF) neuron; CubaLIF's "
    "synaptic current is a different state variable",
    "STATNF lateral support (K * s[t-1])": "a recurrent depthwise Conv2d edge from a neuron's "
    "output to its input would map (NIR allows cycles) "
    "but only together with the threshold above",
    "nearest x2 upsampling (top-down path)": "no NIR primitive for upsampling",
    "spatial max of the class evidence map (class head)": "NIR has no max pooling (only "
    "SumPool2d/AvgPool2d), so the global max over the map has no NIR primitive",
    "detection decoding and NMS": "data-dependent control flow: host post-processing",
}


def refuse_full_graph() -> Any:
    """The detector's ``program.meta["nir"]``: the whole net has no NIR graph; say why."""
    from neuroedge.errors import ExportRefused

    raise ExportRefused(
        "the full detector does not map to NIR: "
        + "; ".join(f"{part} ({why.split(';')[0]})" for part, why in NOT_MAPPED.items())
        + ". Its LIF backbone does: models/bivision/neuromorphic.backbone_to_nir"
    )


def backbone_program(net: Any) -> TorchProgram:
    """The LIF backbone of ``net`` (a ``BiSNet`` with ``neuron="lif"``) as its own program."""
    from torch import nn

    if net.neuron != "lif":
        raise ValueError(
            f"only the LIF variant's backbone maps to NIR (STATNF: "
            f"{NOT_MAPPED['STATNF adaptive threshold']})"
        )
    import torch

    class Backbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv2, self.conv3 = net.conv1, net.conv2, net.conv3
            self.lif1, self.lif2, self.lif3 = net.cells[0], net.cells[1], net.cells[2]

        def forward(self, x: Any, v1: Any, v2: Any, v3: Any) -> tuple[Any, ...]:
            s1, v1 = self.lif1(self.conv1(x), v1)
            s2, v2 = self.lif2(self.conv2(s1), v2)
            s3, v3 = self.lif3(self.conv3(s2), v3)
            return s3, s1, s2, v1, v2, v3

    def init_state(batch: int) -> tuple[Any, ...]:
        return tuple(torch.zeros(batch, *shape) for shape in net.shapes[:3])

    return TorchProgram(
        Backbone().eval(),
        ("x",),
        ("spikes3", "spikes1", "spikes2"),
        ("v1", "v2", "v3"),
        init_state,
        meta={"part": "bivision backbone"},
    )


def backbone_spec(net: Any, example: Any) -> ModelSpec:
    """A ModelSpec for the backbone program (the NIR exporter reads names and example)."""
    size = net.size
    outs = tuple(IOSpec(f"spikes{k}", ("T", "batch", *net.shapes[k - 1])) for k in (3, 1, 2))
    return ModelSpec(
        name="event.bivision_backbone",
        family="snn",
        summary="LIF backbone of event.bivision",
        inputs=(IOSpec("x", ("T", "batch", 2, size, size)),),
        outputs=outs,
        build=lambda cfg: backbone_program(net),
        example=lambda seed: example,
    )


def backbone_to_nir(net: Any, example: dict[str, Any]) -> Any:
    """The NIR graph of the LIF backbone of ``net`` (via ``neuroedge.export.nir.to_nir``)."""
    from neuroedge.export.nir import to_nir

    return to_nir(backbone_program(net), backbone_spec(net, example))
