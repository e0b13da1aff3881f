"""The UniSparse experiment: dense phase, budget, sparsified variants, measured results.

Shared by the bench hook, ``neuroedge train snn.unisparse`` and the CIFAR-10 recipe. Every
variant is measured on its folded (deployed) network with neuroedge's SOP counter; the budget
is checked against the *measured* energy afterwards and a miss is reported, never ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.errors import NeuroedgeError
from neuroedge.models.unisparse import train
from neuroedge.models.unisparse.data import ImageSplit, load_cifar10, load_digits
from neuroedge.models.unisparse.measure import LayerStats, evaluate_folded
from neuroedge.models.unisparse.module import SpikingResNet, fold
from neuroedge.types import Measurement

ORDER = ("dense", "unisparse", "spike_only", "weight_only", "random_mask")
BUDGET_SLACK = 0.05  # measured energy may exceed the target by 5% (test set vs training batches)


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


def load_data(cfg: Mapping[str, Any]) -> ImageSplit:
    """Digits by default; CIFAR-10 from ``cfg["data"]`` (the python batch folder).

    ``train_subset`` keeps only the first N training images (quick tests and smoke runs).
    """
    data = load_cifar10(cfg["data"]) if cfg.get("data") else load_digits(int(cfg.get("seed", 0)))
    if cfg.get("train_subset"):
        n = int(cfg["train_subset"])
        data = data._replace(x_train=data.x_train[:n], y_train=data.y_train[:n])
    return data


def resolve_target(cfg: Mapping[str, Any], dense_uj: float) -> float:
    """``energy_target_uj`` if given, else ``budget_ratio x`` the dense budgeted energy."""
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


def measure_variant(
    name: str,
    net: SpikingResNet,
    logs: list[dict[str, float]],
    data: ImageSplit,
    cfg: Mapping[str, Any],
    target_uj: float | None,
) -> VariantResult:
    """Fold, count and score ``net``; check the measured energy against the target."""
    metrics, layers = evaluate_folded(
        fold(net), data.x_test, data.y_test, int(cfg["steps"]), device=str(cfg.get("device", "cpu"))
    )
    seconds = [log["seconds"] for log in logs]
    metrics["train_s_per_epoch"] = Measurement(float(np.mean(seconds)), "s", "measured")
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
    unknown = [v for v in variants if v not in train.VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; valid: {list(train.VARIANTS)}")
    if "random_mask" in variants and "unisparse" not in variants:
        raise ValueError("random_mask matches unisparse's mask densities: run unisparse too")
    data = load_data(cfg)
    dense, logs = train.train_dense(data, cfg, progress)
    results = {"dense": measure_variant("dense", dense, logs, data, cfg, None)}
    target = resolve_target(cfg, results["dense"].metrics["energy_budgeted_uj"].value)
    ordered = [v for v in ORDER if v in variants and v != "dense"]
    for name in ordered:
        densities = mask_densities(results["unisparse"].net) if name == "random_mask" else None
        net, logs = train.sparsify(dense.state_dict(), name, target, data, cfg, densities, progress)
        results[name] = measure_variant(name, net, logs, data, cfg, target)
    return results, target


def train_and_save(config: Mapping[str, Any], out: str | None = None) -> dict[str, Any]:
    """``neuroedge train snn.unisparse``: dense + unisparse, checkpoint of the unisparse net."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.paths import checkpoint_path

    cfg = {**train.DEFAULTS, **config}
    results, target = run_variants(cfg, ("dense", "unisparse"))
    best = results["unisparse"]
    path = Path(out) if out else checkpoint_path("snn.unisparse")
    summary = {k: m.value for k, m in best.metrics.items()}
    save_checkpoint(
        path,
        {
            "state_dict": best.net.cpu().state_dict(),
            "config": cfg,
            "metrics": summary,
            "energy_target_uj": target,
        },
    )
    return {
        "path": str(path),
        "dense": {k: m.value for k, m in results["dense"].metrics.items()},
        "unisparse": summary,
        "notes": best.notes,
    }
