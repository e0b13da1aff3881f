"""NIR export's dt: a graph carries one step, the one its neurons' taus were trained at."""

from __future__ import annotations

import pytest

from neuroedge.errors import ExportRefused
from neuroedge.export.nir import to_nir
from neuroedge.registry import get_model


def test_a_dt_other_than_the_neurons_own_is_refused() -> None:
    """dt= only labelled the graph: the taus stayed the ones trained at 1 ms, so a reader
    stepping at the label ran another net (spike agreement 0.91 at 2 ms)."""
    spec = get_model("snn.lif_convnet")
    program = spec.build({"untrained": True})
    assert to_nir(program, spec, dt=1e-3).metadata["dt"] == 1e-3  # its own: accepted
    with pytest.raises(ExportRefused, match=r"neurons step at dt 0.001; dt=0.002 would label"):
        to_nir(program, spec, dt=2e-3)
    uni = get_model("snn.unisparse")  # a model that describes its own graph
    own = uni.build({"smoke": True})
    with pytest.raises(ExportRefused, match=r"neurons step at dt .*; dt=0.5 would label"):
        to_nir(own, uni, dt=0.5)


def test_neurons_at_several_steps_are_refused_with_or_without_dt() -> None:
    """A NIR graph carries one dt: "give dt=" led to a graph labelled with a step none of the
    neurons had (dt=5e-3 over neurons at 1 and 2 ms was accepted)."""
    spec = get_model("snn.lif_convnet")
    program = spec.build({"untrained": True})
    program.module.lif2.params = program.module.lif2.params._replace(dt=2e-3)
    for dt in (None, 5e-3, 1e-3):
        with pytest.raises(ExportRefused, match=r"step at dt \[0.001, 0.002\]; one NIR graph"):
            to_nir(program, spec, dt=dt)
