"""event.bivision BiSNet neck wiring against the module docstring's formulas:

    top-down   P3 = N(L3 s3)          P2 = N(L2 s2 + Up(U3 P3))     P1 = N(L1 s1 + Up(U2 P2))
    bottom-up  Q2 = N(D2 P1 + M2 P2)  Q3 = N(D3 Q2 + M3 P3)

Cutting the P1 -> Q2 or the P3 -> Q3 link passed every bivision test before (2026-12 audit):
these tests read each neuron's input current and the convs' inputs through forward hooks."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.bivision.module import NECK_LAYERS, BiSNet


def _record(net: BiSNet) -> tuple[dict, list]:
    """Hooks: each named conv's (input, output) and each neuron's (input current, spikes)."""
    convs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    cells: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = []
    for name in ("down2", "mix2", "down3", "mix3"):

        def hook(_m, args, out, name=name):
            convs[name] = (args[0], out)

        handles.append(getattr(net, name).register_forward_hook(hook))
    for layer, cell in zip(NECK_LAYERS, net.cells):

        def cell_hook(_m, args, out, layer=layer):
            cells[layer] = (args[0], out[0])

        handles.append(cell.register_forward_hook(cell_hook))
    return {"convs": convs, "cells": cells}, handles


def _input(size: int = 32) -> torch.Tensor:
    torch.manual_seed(0)
    return (torch.rand(2, 2, size, size) < 0.3).float() * 3


@pytest.mark.parametrize("neuron", ["statnf", "lif"])
def test_bottom_up_neck_sums_the_links_of_the_formula(neuron) -> None:
    torch.manual_seed(1)
    net = BiSNet(neuron, 32).eval()
    seen, handles = _record(net)
    with torch.no_grad():
        net(_input(), *net.init_state(2))
    for h in handles:
        h.remove()
    convs, cells = seen["convs"], seen["cells"]
    assert set(convs) == {"down2", "mix2", "down3", "mix3"}, "a neck link is never computed"
    # inputs of each link: Q2 <- D2 P1 + M2 P2, Q3 <- D3 Q2 + M3 P3
    for conv, source in (("down2", "p1"), ("mix2", "p2"), ("down3", "q2"), ("mix3", "p3")):
        assert torch.equal(convs[conv][0], cells[source][1]), f"{conv} does not read {source}"
    for target, (a, b) in (("q2", ("down2", "mix2")), ("q3", ("down3", "mix3"))):
        expected = convs[a][1] + convs[b][1]
        assert torch.allclose(cells[target][0], expected), f"{target} is not N({a} + {b})"
    # the links carry spikes (otherwise the checks above would be vacuous)
    for source in ("p1", "p2", "p3", "q2"):
        assert cells[source][1].sum() > 0, f"{source} never fired on the test input"


@pytest.mark.parametrize(
    ("conv", "target"), [("down2", "q2"), ("mix2", "q2"), ("down3", "q3"), ("mix3", "q3")]
)
def test_zeroing_a_bottom_up_link_moves_the_neck_output_it_feeds(conv, target) -> None:
    """Behavioural form: with one link's weights zeroed, its target layer's current changes
    (and with it the head that reads it), so the link is wired in."""
    torch.manual_seed(1)
    net = BiSNet("statnf", 32).eval()

    def current() -> torch.Tensor:
        seen, handles = _record(net)
        with torch.no_grad():
            net(_input(), *net.init_state(2))
        for h in handles:
            h.remove()
        return seen["cells"][target][0]

    before = current()
    with torch.no_grad():
        getattr(net, conv).weight.zero_()
        getattr(net, conv).bias.zero_()
    assert not torch.allclose(current(), before), f"{conv} does not reach {target}"
