"""Count synaptic operations (SOPs) and MACs with forward hooks on any torch model.

For each ``Linear`` and ``Conv1d/2d/3d`` call the input is inspected:

* binary input (every value 0 or 1: spikes) -> effective accumulates, SOPs = the number of
  (nonzero input, nonzero weight) pairs actually connected, i.e. spikes x surviving fan-out
  (NeuroBench's Effective_ACs). Pruned (zero) weights cost nothing.
* any other input -> two counts:

  - ``macs``: every (input element, nonzero weight) pair the layer wires together, zero inputs
    included: what a dense accelerator computes (it multiplies the zeros too), pruned weights
    skipped. NeuroBench's Dense count would also charge the zero weights.
  - ``effective_macs``: only the (nonzero input, nonzero weight) pairs, NeuroBench's
    Effective_MACs (its ``binary_inputs(all_ones=False)`` maps a nonzero input to 1 and a zero
    to 0 before counting): a zero input costs nothing, as a spike that did not come.

  ``effective_ops`` = SOPs + effective MACs is the NeuroBench total; ``sops + macs`` the dense
  total. For an input without zeros the two MAC counts are equal.

Counts accumulate over every call, so stepping a spiking net T times counts all T steps.
Counting is linear in the input's nonzero pattern, so a hook only adds the call's nonzero mask
(summed over the batch) to a per-layer accumulator (spikes for SOPs, nonzero analog inputs for
effective MACs); the one convolution that turns it into connected pairs runs once, in
``totals()``. This keeps the hooks' cost a small fraction of the forward pass.
``nn.MultiheadAttention`` is counted dense (its projections run as functional calls no hook
sees), and its effective MACs are its MACs.
The first synaptic layer (in call order) usually sees analog input; totals are reported with
and without it. Firing rates come from modules marked ``is_spiking_neuron = True`` (their
first output is the spike tensor); without such modules, from binary synaptic inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SYNAPTIC = ("Linear", "Conv1d", "Conv2d", "Conv3d")


def synaptic_kind(module: Any) -> str | None:
    """``module``'s synaptic kind (one of ``SYNAPTIC``) by class, subclasses included (torch's
    own ``NonDynamicallyQuantizableLinear``, a LoRA-style ``Linear``), or ``"attention"`` for
    ``nn.MultiheadAttention`` (its projections run as functional calls no module hook sees);
    None for anything else."""
    from torch import nn

    kinds = ((nn.Linear, "Linear"), (nn.Conv1d, "Conv1d"), (nn.Conv2d, "Conv2d"))
    for cls, kind in (*kinds, (nn.Conv3d, "Conv3d"), (nn.MultiheadAttention, "attention")):
        if isinstance(module, cls):
            return kind
    return None


@dataclass
class LayerCount:
    """Operation counts of one synaptic layer, summed over calls and batch."""

    kind: str
    sops: float = 0.0  # accumulates triggered by spikes
    macs: float = 0.0  # multiply-accumulates on non-binary inputs, zero inputs included
    effective_macs: float = 0.0  # the same on nonzero inputs only (NeuroBench's Effective_MACs)
    spikes_in: float = 0.0  # number of input spikes seen (binary inputs only)
    inputs_in: float = 0.0  # number of input elements seen (binary inputs only)
    calls: int = 0


@dataclass
class OpCounts:
    """Per-sample totals (``samples`` = batch x sequences counted)."""

    samples: int
    per_layer: dict[str, LayerCount]
    first_layer: str | None
    neuron_spikes: float = 0.0
    neuron_slots: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def _sum(self, attr: str, skip_first: bool) -> float:
        total = sum(
            getattr(c, attr)
            for n, c in self.per_layer.items()
            if not (skip_first and n == self.first_layer)
        )
        return total / max(self.samples, 1)

    @property
    def sops_per_sample(self) -> float:
        return self._sum("sops", False)

    @property
    def macs_per_sample(self) -> float:
        return self._sum("macs", False)

    @property
    def sops_per_sample_no_first(self) -> float:
        return self._sum("sops", True)

    @property
    def macs_per_sample_no_first(self) -> float:
        return self._sum("macs", True)

    @property
    def effective_macs_per_sample(self) -> float:
        """MACs on nonzero non-binary inputs only (NeuroBench's Effective_MACs)."""
        return self._sum("effective_macs", False)

    @property
    def effective_macs_per_sample_no_first(self) -> float:
        return self._sum("effective_macs", True)

    @property
    def effective_ops_per_sample(self) -> float:
        """SOPs + effective MACs: NeuroBench's effective synaptic operations."""
        return self.sops_per_sample + self.effective_macs_per_sample

    @property
    def effective_ops_per_sample_no_first(self) -> float:
        return self.sops_per_sample_no_first + self.effective_macs_per_sample_no_first

    @property
    def firing_rate(self) -> float:
        """Spikes per neuron per step, over all spiking neurons seen."""
        if self.neuron_slots:
            return self.neuron_spikes / self.neuron_slots
        spikes = sum(c.spikes_in for c in self.per_layer.values())
        slots = sum(c.inputs_in for c in self.per_layer.values())
        return spikes / slots if slots else 0.0


def is_binary_tensor(x: Any) -> bool:
    """Whether every value of tensor ``x`` is 0 or 1: for floats from its range and
    ``sum x(1-x)`` (each term >= 0 on [0, 1] and 0 only at 0 and 1, so no cancellation), one
    reduction instead of two full comparisons and their masks (~100 us a call on the
    mini-ResNet, the counter's largest cost after conv)."""
    import torch

    if x.numel() == 0:
        return True
    if not x.is_floating_point():
        return not bool(torch.any((x != 0) & (x != 1)))
    lo, hi = torch.aminmax(x)
    return bool(lo >= 0) and bool(hi <= 1) and float(torch.sum(x * (1 - x))) == 0.0


def _connected_pairs(module: Any, nz: Any) -> float:
    """Number of (nonzero input, nonzero weight) pairs the layer wires together, for a batch
    of nonzero counts ``nz`` (a 0/1 mask, or such masks summed over samples)."""
    import torch
    import torch.nn.functional as F

    nz = nz.to(torch.float64)
    w = (module.weight != 0).to(torch.float64)
    kind = synaptic_kind(module)
    if kind == "Linear":
        return float((nz.reshape(-1, nz.shape[-1]) @ w.t()).sum())
    conv = {"Conv1d": F.conv1d, "Conv2d": F.conv2d, "Conv3d": F.conv3d}[kind]
    if module.padding_mode != "zeros":
        raise ValueError(f"SOP counting supports zero padding only, got {module.padding_mode}")
    padding = module.padding if isinstance(module.padding, str) else tuple(module.padding)
    out = conv(nz, w, None, module.stride, padding, module.dilation, module.groups)
    return float(out.sum())


def _sample_size(key: tuple[str, tuple[int, ...]]) -> int:
    size = 1
    for d in key[1]:
        size *= d
    return size


class OpCounter:
    """Context manager that hooks every synaptic layer and spiking neuron of ``module``."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.per_layer: dict[str, LayerCount] = {}
        self.order: list[str] = []
        self.neuron_spikes = 0.0
        self.neuron_slots = 0.0
        self._handles: list[Any] = []
        self._modules: dict[str, Any] = {}
        self._spike_sums: dict[tuple[str, tuple[int, ...]], Any] = {}  # summed binary inputs
        self._nonzero_sums: dict[tuple[str, tuple[int, ...]], Any] = {}  # nonzero analog inputs
        self._dense_pairs: dict[tuple[str, tuple[int, ...]], float] = {}  # per-sample MACs

    def __enter__(self) -> OpCounter:
        inside_attention: list[str] = []
        for name, sub in self.module.named_modules():
            kind = synaptic_kind(sub)
            if any(name.startswith(f"{a}.") for a in inside_attention):
                continue  # an attention's out_proj: counted with its attention
            if kind == "attention":
                inside_attention.append(name)
                hook = self._attention_hook(name)
                self._handles.append(sub.register_forward_pre_hook(hook, with_kwargs=True))
            elif kind in SYNAPTIC:
                self._handles.append(sub.register_forward_pre_hook(self._synapse_hook(name)))
            if getattr(sub, "is_spiking_neuron", False):
                self._handles.append(sub.register_forward_hook(self._neuron_hook))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _synapse_hook(self, name: str) -> Any:
        import torch

        def hook(module: Any, args: tuple[Any, ...]) -> None:
            x = args[0].detach()
            count = self.per_layer.get(name)
            if count is None:
                count = self.per_layer[name] = LayerCount(synaptic_kind(module) or "")
            if name not in self.order:
                self.order.append(name)
                self._modules[name] = module
            # a Linear input may carry extra leading axes: fold them into the batch
            batch_axes = x.dim() - 1 if count.kind == "Linear" else 1
            key = (name, tuple(x.shape[batch_axes:]))
            binary = is_binary_tensor(x)
            rows = x.reshape(-1, *key[1])
            if binary:  # a float32 sum of 0/1 values is exact below 2**24 rows (float64 above)
                exact = torch.float32 if rows.shape[0] < 2**24 else torch.float64
                mask = rows.sum(0, dtype=exact).double()
            else:  # int32 (exact: far fewer rows than 2**31) is ~2x faster than a float64 sum
                mask = (rows != 0).sum(0, dtype=torch.int32).double()
            sums = self._spike_sums if binary else self._nonzero_sums
            total = sums.get(key)
            if total is None:
                sums[key] = mask
            else:
                total += mask
            if binary:
                count.spikes_in += float(mask.sum())
                count.inputs_in += float(x.numel())
            else:
                if key not in self._dense_pairs:
                    ones = torch.ones((1, *key[1]), dtype=x.dtype, device=x.device)
                    self._dense_pairs[key] = _connected_pairs(module, ones)
                count.macs += self._dense_pairs[key] * (x.numel() // max(_sample_size(key), 1))
            count.calls += 1

        return hook

    def _attention_hook(self, name: str) -> Any:
        """MACs of one ``nn.MultiheadAttention`` call: the q, k, v and output projections and
        the two attention products (q k^T and the weighted sum of v), dense."""

        def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            names = ("query", "key", "value")
            q, k, v = (args[i] if i < len(args) else kwargs[n] for i, n in enumerate(names))
            seq = 1 if module.batch_first and q.dim() == 3 else 0
            lq, lk = int(q.shape[seq]), int(k.shape[seq])
            batch = q.numel() // (lq * q.shape[-1])
            e = module.embed_dim
            proj = lq * e * e + lk * k.shape[-1] * e + lk * v.shape[-1] * e + lq * e * e
            count = self.per_layer.setdefault(name, LayerCount("attention"))
            if name not in self.order:
                self.order.append(name)
                self._modules[name] = module
            count.macs += float(batch * (proj + 2 * lq * lk * e))
            count.effective_macs += float(batch * (proj + 2 * lq * lk * e))  # dense: see above
            count.calls += 1

        return hook

    def _neuron_hook(self, module: Any, args: tuple[Any, ...], output: Any) -> None:
        spikes = output[0] if isinstance(output, (tuple, list)) else output
        self.neuron_spikes += float(spikes.detach().sum())
        self.neuron_slots += float(spikes.numel())

    def totals(self, samples: int) -> OpCounts:
        """Counts divided by ``samples`` (the batch size times sequences counted)."""
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        for sums, attr in ((self._spike_sums, "sops"), (self._nonzero_sums, "effective_macs")):
            for (name, _shape), mask in sums.items():
                count = self.per_layer[name]
                pairs = _connected_pairs(self._modules[name], mask[None])
                setattr(count, attr, getattr(count, attr) + pairs)
            sums.clear()
        return OpCounts(
            samples,
            dict(self.per_layer),
            self.order[0] if self.order else None,
            self.neuron_spikes,
            self.neuron_slots,
        )
