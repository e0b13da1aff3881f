"""Measure a deployed (folded) spiking ResNet: accuracy, SOPs per layer, energy, densities.

Counting conventions (NeuroBench effective ACs, as neuroedge.bench.sops counts them):

* ``sops_per_sample_no_first``: spike-driven accumulates, every (input spike, surviving
  weight) pair over the T steps: the budgeted quantity and the predecessor's convention.
* ``macs_per_sample``: the analog first layer (direct encoding), executed every step.
* ``sops_per_sample_with_first``: both together, the first layer's MACs counted as synaptic
  operations (the paper's headline convention for the whole network).
* ``sops_per_sample``: spike-driven accumulates of every layer, the same quantity as the
  generic bench's metric of that name (it never counts MACs), so the history's
  ``sops_per_sample`` means one thing for every model; with direct encoding the first layer
  receives no spikes, so it equals ``sops_per_sample_no_first`` here.
* ``energy_uj = 4.6 pJ * MACs + E_AC * SOPs_no_first`` (estimated, Horowitz 45 nm) and
  ``energy_budgeted_uj = E_AC * SOPs_no_first``, ``E_AC`` the ``energy`` model's
  accumulate: 0.9 pJ by default, the config's ``e_ac_pj`` in ``pipeline.measure_variant``
  (the constant the training constraint prices its budget with).

``BatchSummedSopCounter`` counts the same pairs from each layer's input summed over batch and
time, with one convolution per layer at the end (convolution is linear, so
``sum_b conv(s_b, g) = conv(sum_b s_b, g)``): a sum per call, where the generic counter
re-runs every convolution in float64 and checks every input for binarity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch
from neuroedge.bench.energy import HOROWITZ_45NM, EnergyModel
from neuroedge.bench.sops import OpCounter
from neuroedge.bench.sops import is_binary_tensor as is_binary  # public here too
from neuroedge.models.unisparse.data import direct_encoding
from neuroedge.models.unisparse.functional import layer_sops
from neuroedge.types import Measurement


@dataclass(frozen=True)
class LayerStats:
    """One synaptic layer of a deployed net, per sample."""

    name: str
    ops: float  # SOPs (spiking input) or MACs (analog input) per sample
    analog: bool  # True for the first (analog-input) layer: ops are MACs
    input_rate: float  # spikes per input element per step (0 for the analog layer)
    density: float  # fraction of nonzero weights


def weight_density(module: torch.nn.Module, skip: tuple[str, ...] = ("stem",)) -> float:
    """Nonzero weights over all weights of the synaptic layers (the analog stem excluded)."""
    kept = total = 0
    for name, sub in module.named_modules():
        if isinstance(sub, (torch.nn.Conv2d, torch.nn.Linear)) and name not in skip:
            kept += int((sub.weight != 0).sum())
            total += sub.weight.numel()
    return kept / max(total, 1)


@torch.no_grad()
def evaluate_folded(
    folded: torch.nn.Module,
    x: np.ndarray,
    y: np.ndarray,
    steps: int,
    batch: int = 256,
    energy: EnergyModel = HOROWITZ_45NM,
    device: str = "cpu",
) -> tuple[dict[str, Measurement], list[LayerStats]]:
    """Accuracy and counted operations of ``folded`` on ``(x, y)`` with neuroedge's OpCounter."""
    folded.eval().to(device)
    correct = 0
    with OpCounter(folded) as counter:
        for i in range(0, len(y), batch):
            xs = torch.from_numpy(direct_encoding(x[i : i + batch], steps)).to(device)
            logits, _ = folded.forward_sequence(xs)
            correct += int((logits.argmax(-1).cpu().numpy() == y[i : i + batch]).sum())
    ops = counter.totals(len(y))
    folded.cpu()
    modules = dict(folded.named_modules())
    layers = [
        LayerStats(
            name,
            (c.sops + c.macs) / len(y),
            c.macs > 0,
            c.spikes_in / c.inputs_in if c.inputs_in else 0.0,
            float((modules[name].weight != 0).float().mean()),
        )
        for name, c in ops.per_layer.items()
    ]
    sops, macs = ops.sops_per_sample, ops.macs_per_sample
    metrics = {
        "accuracy": Measurement(correct / len(y), "fraction", "measured"),
        "sops_per_sample_with_first": Measurement(sops + macs, "SOP", "counted"),
        "sops_per_sample": Measurement(sops, "SOP", "counted"),
        "sops_per_sample_no_first": Measurement(ops.sops_per_sample_no_first, "SOP", "counted"),
        "macs_per_sample": Measurement(macs, "MAC", "counted"),
        "energy_uj": energy.measurement(macs, sops),
        "energy_budgeted_uj": Measurement(energy.e_ac_pj * sops * 1e-6, "uJ", "estimated"),
        "firing_rate": Measurement(ops.firing_rate, "spikes/neuron/step", "measured"),
        "weight_density": Measurement(weight_density(folded), "fraction", "counted"),
    }
    return metrics, layers


class BatchSummedSopCounter:
    """SOP/MAC counter that only sums each synaptic layer's input over the batch per call and
    counts once at the end: ``pairs = sum(conv(sum_{t,b} s, 1[w != 0]))`` (conv is linear).

    Whether a layer's input is spikes is decided on its first call (a layer does not switch
    between spikes and analog input within a run). Per call, a spiking layer's input is summed
    over the batch in float32 (exact: integer counts below 2**24) and added to a float64 map;
    the per-call float64 cast of the whole input this replaces was the counter's main cost
    (20-22% of the mini-ResNet forward at batch 64; see ``counter_overhead``). An analog layer
    only counts rows (every input element is one MAC source)."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self._handles: list[Any] = []
        self._sums: dict[str, torch.Tensor] = {}  # float64 spike maps (spiking layers)
        self._rows: dict[str, int] = {}  # rows seen (analog layers)
        self._binary: dict[str, bool] = {}
        self._layers: dict[str, torch.nn.Module] = {}

    def __enter__(self) -> Self:
        for name, sub in self.module.named_modules():
            if isinstance(sub, (torch.nn.Conv2d, torch.nn.Linear)):
                self._layers[name] = sub
                self._handles.append(sub.register_forward_pre_hook(self._hook(name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Any:
        def hook(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0]
            if name not in self._binary:
                self._binary[name] = is_binary(x)
                self._sums[name] = torch.zeros(x.shape[1:], dtype=torch.float64)
                self._rows[name] = 0
            if self._binary[name]:
                self._sums[name] += x.sum(0, dtype=torch.float32)
            else:
                self._rows[name] += x.shape[0]

        return hook

    def per_sample(self, samples: int) -> Mapping[str, float]:
        """``{"sops": ..., "macs": ...}`` per sample, counted from the summed maps."""
        totals = {"sops": 0.0, "macs": 0.0}
        for name, summed in self._sums.items():
            if not self._binary[name]:
                summed = torch.full_like(summed, float(self._rows[name]))
            layer = self._layers[name]
            conv = isinstance(layer, torch.nn.Conv2d)
            gate = (layer.weight != 0).to(torch.float64)
            pairs = float(
                layer_sops(summed, gate, layer.stride if conv else 1, layer.padding if conv else 0)
            )
            totals["sops" if self._binary[name] else "macs"] += pairs / samples
        return totals


def counter_overhead(
    folded: torch.nn.Module, x: np.ndarray, steps: int, repeats: int = 61
) -> dict[str, Measurement]:
    """Forward time with each SOP counter over plain forward time, measured side by side.

    The three forwards alternate call by call (blocks of one), and the overhead is the median
    of the per-round ratios ``t_counter / t_plain - 1``: a load change on this shared machine
    hits both calls of a round alike, so the pairing cancels it (p50s of separate blocks do
    not: they swung from -26% to +44% between runs).
    """
    from neuroedge.bench.latency import measure_side_by_side

    xs = torch.from_numpy(direct_encoding(x, steps))

    def plain() -> None:
        with torch.no_grad():
            folded.forward_sequence(xs)

    def with_counter(kind: Any) -> Any:
        def run() -> None:
            with torch.no_grad(), kind(folded):
                folded.forward_sequence(xs)

        return run

    timings = measure_side_by_side(
        {
            "plain": plain,
            "opcounter": with_counter(OpCounter),
            "batch_summed": with_counter(BatchSummedSopCounter),
        },
        repeats=repeats,
        warmup=2,
        block=1,
    )
    base = np.asarray(timings["plain"].times_ms)

    def paired(name: str) -> Measurement:
        ratio = np.asarray(timings[name].times_ms) / base
        return Measurement(float(np.median(ratio)) - 1.0, "fraction", "measured")

    return {
        "forward_ms": Measurement(timings["plain"].percentile(50), "ms", "measured"),
        "opcounter_overhead": paired("opcounter"),
        "batch_summed_overhead": paired("batch_summed"),
    }
