"""The UniSparse experiment: dense phase, budget, sparsified variants, measured results.

Shared by the bench hook, ``neuroedge train snn.unisparse`` and the CIFAR-10 recipe. Every
variant is measured on its folded (deployed) network with neuroedge's SOP counter; the budget
is checked against the *measured* energy afterwards and a miss is reported, never ignored.
``check_config`` refuses a bad config value before any training (each entry point calls it).

The budget is one of two keys: ``energy_target_uj`` (absolute, uJ per sample) when it is given
and not None, else ``budget_ratio`` (a fraction of the dense net's measured energy), which has
a default. Both are validated whenever present; a config that sets both explicitly is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.energy import HOROWITZ_45NM, EnergyModel
from neuroedge.config_values import MAX_LR, SEED_MAX, int_list, integer, number
from neuroedge.distributed import lead_value
from neuroedge.errors import ConfigError, NeuroedgeError
from neuroedge.models.unisparse import train
from neuroedge.models.unisparse.data import ImageSplit, load_cifar10, load_digits
from neuroedge.divergence import check_weights
from neuroedge.models.unisparse.loop import CONSTRAINED_KEYS, DENSE_KEYS
from neuroedge.models.unisparse.measure import LayerStats, evaluate_folded
from neuroedge.models.unisparse.module import ARCHS, SpikingResNet, fold
from neuroedge.models.unisparse.spec import MAX_STEPS
from neuroedge.types import Measurement

ORDER = ("dense", "unisparse", "spike_only", "weight_only", "random_mask")
BUDGET_SLACK = 0.05  # measured energy may exceed the target by 5% (test set vs training batches)
# integer keys: (least value, greatest value or None). Upper bounds where a huge value would
# crash or exhaust memory before any message: time steps and the seed (spec.MAX_STEPS and
# config_values.SEED_MAX give the reasons), threads (torch's count is a C int: 3e9
# overflowed), epochs (snn.lif_convnet's bound; 10**12 trained on without end, 2**64
# overflowed in range()).
MAX_THREADS, MAX_EPOCHS = 4096, 100_000
INT_KEYS: dict[str, tuple[int, int | None]] = {
    "steps": (1, MAX_STEPS),
    "batch": (1, None),
    "dense_epochs": (0, MAX_EPOCHS),
    "sparse_epochs": (0, MAX_EPOCHS),
    "finetune_epochs": (0, MAX_EPOCHS),
    "seed": (0, SEED_MAX),
    "threads": (1, MAX_THREADS),
    "lava_samples": (1, None),
}
# number keys: (least value, whether it is excluded, greatest value or None). Upper bounds where
# a larger value has no use and trained on to NaN weights that were then measured (lr=1e12,
# penalty_rho, spike_scale, e_ac_pj, dual_lr or temp_start of 1e300 each did):
# - lr, mask_lr, bn_lr <= 10: the Adam step size; snn.lif_convnet's and event.bivision's bound
#   (the defaults are 2e-3 and 1e-2);
# - weight_decay: AdamW scales each weight by (1 - lr x weight_decay) per step, so the product
#   is bounded (``_check_decay``): above 1 each step flips every weight's sign (above 2 it
#   grows them too);
# - penalty_rho <= 1e6 (5e5x the default 2, which already holds E within 1% of its target):
#   past it the penalty alone sets the gradient; 1e300 overflowed float32 to inf;
# - spike_scale <= 100 (a share of the energy gradient; 0.1-1 were tried): 1e300 overflowed
#   the threshold gradients to NaN;
# - e_ac_pj <= 1e6 pJ (1 uJ) per accumulate, over 100x any published platform's cost per
#   synaptic event (SpiNNaker's is of the order of nJ): training reads E / E_target, where it
#   cancels, but 1e300 overflowed the float32 energy to inf;
# - kd_temp <= 100 (the default 4; distillation uses t of 1-20): t^2 scales the distillation
#   term, and 1e30 overflowed t^2 in float32;
# - dual_lr <= 10 (500x the default 0.02): the multiplier moves by up to 3 dual_lr per batch;
# - temp_start, temp_end <= 1e4 (the defaults are 4 and 200): the gate sigmoid(t m) is a step
#   well before that, and temp_start=1e300 overflowed the mask gradient to NaN.
NUMBER_KEYS: dict[str, tuple[float, bool, float | None]] = {
    "budget_ratio": (0.0, True, 1.0),
    "energy_target_uj": (0.0, True, None),
    "aim": (0.0, True, 1.0),
    "lr": (0.0, True, MAX_LR),
    "mask_lr": (0.0, True, MAX_LR),
    "bn_lr": (0.0, True, MAX_LR),
    "weight_decay": (0.0, False, None),
    "temp_start": (0.0, True, 1e4),
    "temp_end": (0.0, True, 1e4),
    "dual_lr": (0.0, False, 10.0),
    "e_ac_pj": (0.0, True, 1e6),
    "kd_weight": (0.0, False, 1.0),
    "kd_temp": (0.0, True, 100.0),
    "target_anneal": (0.0, False, 1.0),
    "penalty_rho": (0.0, False, 1e6),
    "spike_scale": (0.0, False, 100.0),
}
CHOICE_KEYS = {"spike_grad": train.SPIKE_GRADS, "mask_gate": train.MASK_GATES, "arch": tuple(ARCHS)}


class EnergyBudgetError(NeuroedgeError, ValueError):
    """An energy budget that is malformed or cannot be met."""


@dataclass
class VariantResult:
    """One trained variant: its net, training log, measured metrics and per-layer counts."""

    name: str
    net: SpikingResNet
    logs: list[dict[str, float]]
    metrics: dict[str, Measurement]
    layers: list[LayerStats]
    notes: list[str] = field(default_factory=list)


def check_config(
    cfg: Mapping[str, Any], explicit: Mapping[str, Any] | None = None, device: bool = True
) -> dict[str, Any]:
    """``cfg`` with every value checked before any training; ConfigError naming the key, the
    value and what is expected. Returns a copy with ``variants`` made a list (a single name
    such as ``variants=dense`` is taken as a one-element list).

    ``explicit``: the keys the user set (``cfg`` is usually merged with defaults), used to refuse
    a config that sets both ``energy_target_uj`` and ``budget_ratio``. ``device=False`` leaves
    the device check (whether torch can use it) to a later ``check_device``.
    """
    out = dict(cfg)
    given = explicit or {}
    if given.get("energy_target_uj") is not None and "budget_ratio" in given:
        raise ConfigError(
            f"energy_target_uj={given['energy_target_uj']!r} and budget_ratio="
            f"{given['budget_ratio']!r} both given: set one budget only (energy_target_uj in uJ "
            "per sample, or budget_ratio as a fraction of the dense energy)"
        )
    for key, (least, most) in INT_KEYS.items():
        if key in out:
            out[key] = integer(out, key, least, most)
    if out.get("seeds") not in (None, ""):  # each seed of a bench under seed's rule
        int_list(out, "seeds", *INT_KEYS["seed"])
    if out.get("train_subset") is not None:
        hint = " or None (every training image)"
        out["train_subset"] = integer(out, "train_subset", 1, hint=hint)
    for key, bounds in NUMBER_KEYS.items():
        if key in out and not (key == "energy_target_uj" and out[key] is None):
            low, open_low, high = bounds
            out[key] = number(out, key, low, high, open_low)  # 2**64 as a float, not an int
    _check_decay(out)
    for key, choices in CHOICE_KEYS.items():
        if key in out and (not isinstance(out[key], str) or out[key] not in choices):
            raise ConfigError(f"{key}={out[key]!r}: expected one of {', '.join(choices)}")
    if "augment" in out and not isinstance(out["augment"], bool):
        raise ConfigError(f"augment={out['augment']!r}: expected true or false")
    data = out.get("data")
    if data is not None and (not isinstance(data, (str, os.PathLike)) or not str(data)):
        raise ConfigError(
            f"data={data!r}: expected the path of a cifar-10-batches-py folder, or None (digits)"
        )
    if "variants" in out:
        out["variants"] = check_variants(out["variants"])
    if "workers" in out:
        from neuroedge.bench.seeds import check_workers

        check_workers(out["workers"])
    if device:
        check_device(out.get("device", "cpu"))
    return out


def _check_decay(cfg: Mapping[str, Any]) -> None:
    """ConfigError when ``lr x weight_decay`` exceeds 1: AdamW's decoupled decay multiplies
    every weight by ``1 - lr x weight_decay`` per step (the dense phase runs at ``lr``), which
    then flips its sign, and above 2 grows it (weight_decay=1e6 trained to a net at chance)."""
    if "lr" in cfg and "weight_decay" in cfg and cfg["lr"] * cfg["weight_decay"] > 1:
        raise ConfigError(
            f"weight_decay={cfg['weight_decay']!r} with lr={cfg['lr']!r}: expected lr x "
            f"weight_decay <= 1 (weight_decay <= {1 / cfg['lr']:g}): AdamW scales each weight "
            "by 1 - lr x weight_decay per step, so a larger product flips their signs"
        )


def check_variants(value: Any) -> list[str]:
    """``variants`` as a list of known names; a single name is a one-element list."""
    names = [value] if isinstance(value, str) else value
    valid = ", ".join(train.VARIANTS)
    if not isinstance(names, (list, tuple)) or not names:
        raise ConfigError(f"variants={value!r}: expected a non-empty list of names from {valid}")
    unknown = [v for v in names if not isinstance(v, str) or v not in train.VARIANTS]
    if unknown:
        raise ConfigError(
            f"variants={value!r}: unknown variant{'s' * (len(unknown) > 1)} "
            f"{', '.join(map(repr, unknown))}; expected a list of names from {valid}"
        )
    if "random_mask" in names and "unisparse" not in names:
        raise ConfigError(
            f"variants={value!r}: random_mask matches unisparse's mask densities: run unisparse too"
        )
    return list(names)


def check_device(value: Any) -> str:
    """``device``: a string torch accepts, naming a device this machine has."""
    import torch

    hint = "expected 'cpu', 'cuda' or 'cuda:N' (with a CUDA device) or 'mps' (Apple silicon)"
    if not isinstance(value, str):
        raise ConfigError(f"device={value!r}: {hint}")
    try:
        dev = torch.device(value)
    except (RuntimeError, ValueError) as err:
        raise ConfigError(f"device={value!r}: torch refuses it ({err}); {hint}") from err
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0 or (dev.index is not None and dev.index >= count):
            raise ConfigError(
                f"device={value!r}: torch {torch.__version__} sees {count} CUDA device"
                f"{'s' * (count != 1)}; pass device=cpu"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device={value!r}: torch sees no MPS device; pass device=cpu")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"device={value!r}: {hint}")
    return value


def load_data(cfg: Mapping[str, Any]) -> ImageSplit:
    """Digits by default; CIFAR-10 from ``cfg["data"]`` (the python batch folder).

    ``train_subset`` keeps only the first N training images (quick tests and smoke runs).
    """
    data = load_cifar10(cfg["data"]) if cfg.get("data") else load_digits(int(cfg.get("seed", 0)))
    if cfg.get("train_subset") is not None:
        n = int(cfg["train_subset"])
        data = data._replace(x_train=data.x_train[:n], y_train=data.y_train[:n])
    return data


def check_arch_fits(cfg: Mapping[str, Any], data: ImageSplit) -> ImageSplit:
    """``data`` if its images and labels fit ``cfg["arch"]``, else ConfigError naming both
    (before any training: the mini-ResNet takes digits' 1x8x8, ResNet-18 CIFAR's 3x32x32)."""
    arch = ARCHS[str(cfg.get("arch", "mini"))]
    want = (arch.in_channels, arch.image, arch.image)
    shape = tuple(data.x_train.shape[1:])
    labels = int(max(data.y_train.max(initial=0), data.y_test.max(initial=0))) + 1
    if shape != want or labels > arch.classes:
        raise ConfigError(
            f"arch={arch.name!r} takes {'x'.join(map(str, want))} images and {arch.classes} "
            f"classes; the data has {'x'.join(map(str, shape))} images and labels up to "
            f"{labels - 1} (digits: arch=mini, CIFAR-10: arch=resnet18)"
        )
    return data


def resolve_target(cfg: Mapping[str, Any], dense_uj: float) -> float:
    """``energy_target_uj`` if given (not None; it wins over ``budget_ratio``, whose default
    is always present), else ``budget_ratio x`` the dense budgeted energy."""
    if cfg.get("energy_target_uj") is not None:
        target = float(cfg["energy_target_uj"])
    else:
        ratio = float(cfg["budget_ratio"])
        if not 0 < ratio <= 1:
            raise EnergyBudgetError(f"budget_ratio must be in (0, 1], got {ratio}")
        target = ratio * dense_uj
    if not (target > 0 and math.isfinite(target)):
        raise EnergyBudgetError(f"energy target must be a positive number of uJ, got {target}")
    return target


def energy_model(cfg: Mapping[str, Any]) -> EnergyModel:
    """Horowitz 45 nm with the accumulate priced at ``cfg["e_ac_pj"]`` (default 0.9 pJ, as
    ``train.DEFAULTS``); the MAC of the analog first layer stays at 4.6 pJ (no config key)."""
    return replace(HOROWITZ_45NM, e_ac_pj=float(cfg.get("e_ac_pj", HOROWITZ_45NM.e_ac_pj)))


def measure_variant(
    name: str,
    net: SpikingResNet,
    logs: list[dict[str, float]],
    data: ImageSplit,
    cfg: Mapping[str, Any],
    target_uj: float | None,
) -> VariantResult:
    """Fold, count and score ``net``; check the measured energy against the target.

    The energy is priced at ``cfg["e_ac_pj"]`` per SOP, the constant the training constraint
    uses (``constraint.constrained_terms``), so the dense energy that sets the target, the
    constraint and the ``budget_met`` check are in one currency. TrainingDiverged, before any
    figure, when the folded net holds NaN or inf (``divergence.check_weights``)."""
    from neuroedge.seeding import seeded

    energy = energy_model(cfg)
    with seeded(int(cfg.get("seed", 0))):  # fold's fresh layers draw (then are overwritten),
        folded = fold(net)  # not from the caller's generator
    # a NaN net fires nothing: 0 SOPs would read as its budget met (fit_phase stops training
    # at it; this covers any other caller and a fold that overflows)
    keys = DENSE_KEYS if name == "dense" else CONSTRAINED_KEYS
    check_weights(folded, f"snn.unisparse {name} (folded to measure)", keys)
    metrics, layers = evaluate_folded(
        folded,
        data.x_test,
        data.y_test,
        int(cfg["steps"]),
        energy=energy,
        device=str(cfg.get("device", "cpu")),
    )
    seconds = [log["seconds"] for log in logs]
    per_epoch = float(np.mean(seconds)) if seconds else math.nan  # no epochs (epochs=0): none
    metrics["train_s_per_epoch"] = Measurement(per_epoch, "s", "measured")
    result = VariantResult(name, net, logs, metrics, layers)
    if target_uj is not None and name != "dense":
        measured = metrics["energy_budgeted_uj"].value
        met = measured <= target_uj * (1 + BUDGET_SLACK)
        metrics["energy_target_uj"] = Measurement(target_uj, "uJ", "estimated")
        metrics["budget_met"] = Measurement(float(met), "bool", "measured")
        if not met:
            result.notes.append(
                f"energy budget NOT met: measured {measured:.4g} uJ > target "
                f"{target_uj:.4g} uJ (+{BUDGET_SLACK:.0%} slack)"
            )
    return result


def mask_densities(net: SpikingResNet) -> dict[str, float]:
    """Per-layer fraction of kept weights of a masked net (for the random-mask control)."""
    return {name: float(layer.mask_fixed.mean()) for name, layer in net.masked_layers().items()}


def run_variants(
    cfg: Mapping[str, Any], variants: Sequence[str] = ORDER, progress: bool = True
) -> tuple[dict[str, VariantResult], float]:
    """Train and measure ``variants`` (dense always first); returns them and the target."""
    variants = check_variants(variants)
    cfg = check_config(cfg)
    data = check_arch_fits(cfg, load_data(cfg))
    dense, logs = train.train_dense(data, cfg, progress)
    results = {"dense": measure_variant("dense", dense, logs, data, cfg, None)}
    target = resolve_target(cfg, results["dense"].metrics["energy_budgeted_uj"].value)
    target = lead_value(target)  # data-parallel: rank 0's measurement on every rank
    ordered = [v for v in ORDER if v in variants and v != "dense"]
    for name in ordered:
        densities = mask_densities(results["unisparse"].net) if name == "random_mask" else None
        net, logs = train.sparsify(dense.state_dict(), name, target, data, cfg, densities, progress)
        results[name] = measure_variant(name, net, logs, data, cfg, target)
    return results, target


def train_and_save(config: Mapping[str, Any], out: str | None = None) -> dict[str, Any]:
    """``neuroedge train snn.unisparse``: dense + unisparse, checkpoint of the unisparse net.
    Started by torchrun, the ranks train data-parallel (``neuroedge.distributed``) and rank 0
    writes the checkpoint (the others return ``path`` None)."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.distributed import data_parallel, local_device, world
    from neuroedge.paths import checkpoint_path

    from neuroedge.atomic import check_writable

    w = world()
    cfg = check_config({**train.DEFAULTS, **config}, config, device=False)
    cfg["device"] = check_device(local_device(cfg.get("device", "cpu"), w))
    path = Path(out) if out else checkpoint_path("snn.unisparse")
    path = check_writable(path) if w.lead else None  # rank 0 alone writes it
    with data_parallel(w, cfg["device"]):
        results, target = run_variants(cfg, ("dense", "unisparse"), progress=w.lead)
    best = results["unisparse"]
    summary = {k: m.value for k, m in best.metrics.items()}
    if path is not None:
        payload = {"state_dict": best.net.cpu().state_dict(), "config": cfg, "metrics": summary}
        save_checkpoint(path, {**payload, "energy_target_uj": target})
    return {
        "path": None if path is None else str(path),
        "data_parallel_ranks": w.size,
        "dense": {k: m.value for k, m in results["dense"].metrics.items()},
        "unisparse": summary,
        "notes": best.notes,
    }
