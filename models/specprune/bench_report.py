"""Report rows of the vla.specprune benchmark: FLOP and token counts, metrics, plots.

``row`` builds a timed row (latency, speedup, success, tokens, FLOPs), ``sweep_row`` a
budget-sweep or view-ablation row (not timed); FLOPs are counted from the token counts with
functional.layer_flops. ``speedup_plot`` and ``budget_plot`` draw report.md's figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.specprune.bench_variants import (
    BLANK_VALUE,
    SWEEP_METHODS,
    base_method,
    blanked_view,
)
from neuroedge.models.specprune.functional import (
    LOOKBACKS,
    PruneConfig,
    kept_after_dynamic,
    layer_flops,
)
from neuroedge.types import Measurement, Report


def decoder_flops(
    model: Any, static_kept: int | None, prune: PruneConfig | None
) -> tuple[float, list[int]]:
    """Decoder FLOPs of one inference with ``static_kept`` visual tokens after layer 1, and the
    visual tokens each layer processes."""
    cfg = model.config
    dim, ffn, depth = cfg["dim"], cfg["ffn"], cfg["depth"]
    other = 1 + cfg["text_len"] + cfg["chunk"]
    visual = model.n_visual
    counts = [visual] * depth
    if static_kept is not None:
        layers = prune.dynamic_layers if prune is not None else ()
        keep = prune.dynamic_keep if prune is not None else 1.0
        counts = [visual, visual, *kept_after_dynamic(static_kept, layers, keep, depth)]
    return float(sum(layer_flops(n + other, dim, ffn) for n in counts)), counts


def static_counts(
    model: Any, method: str, result: Mapping[str, Any], prune: PruneConfig
) -> tuple[float, list[int]]:
    """Mean decoder FLOPs over the method's inferences, and the mean tokens per layer."""
    if method == "unpruned":
        return decoder_flops(model, None, None)
    per_call = [
        decoder_flops(model, k, prune if method == "specprune" else None)
        for k in result["kept_all"]
    ]
    counts = np.mean([c for _, c in per_call], axis=0).tolist()
    return float(np.mean([f for f, _ in per_call])), counts


def vision_flops(model: Any) -> float:
    """Patch embedding and the ViT blocks (attention + GELU MLP of width 2D) of both views."""
    p, d, n = model.patch, model.config["dim"], model.per_view
    block = 2.0 * (4 * n * d * d + 2 * n * n * d + 2 * n * d * 2 * d)
    return 2 * (2.0 * n * 3 * p * p * d + model.config.get("vit_depth", 1) * block)


def outcome_metrics(
    result: Mapping[str, Any], flops: float, counts: list[int]
) -> dict[str, Measurement]:
    """Success (overall and per task), visual tokens and FLOPs of one evaluated method."""
    metrics = {
        "success_rate": Measurement(float(np.mean(list(result["per_task"].values()))), "fraction"),
        "visual_tokens_kept": Measurement(result["kept"], "tokens", "counted"),
        "visual_tokens_per_layer": Measurement(float(np.mean(counts)), "tokens", "counted"),
        "flops_per_inference": Measurement(flops, "FLOP", "counted"),
    }
    metrics.update(
        {f"success_rate_{t}": Measurement(v, "fraction") for t, v in result["per_task"].items()}
    )
    return metrics


def row(
    method: str,
    result: Mapping[str, Any],
    latency: Any,
    base_p50: float,
    flops: float,
    counts: list[int],
    budget: int | None,
    backend: str = "host",
    evaluated_on: str = "host",
) -> Report:
    metrics = {
        **{k: v for k, v in latency.metrics().items() if k != "peak_rss_mb"},
        "speedup": Measurement(base_p50 / latency.percentile(50), "x"),
        **outcome_metrics(result, flops, counts),
    }
    base = base_method(method)
    notes = [f"fine-mode fraction {result['fine_fraction']:.2f}"] if base == "specprune" else []
    if base == "specprune":
        notes += lookback_notes(result)
    if budget is not None and base in ("fastv", "random"):
        notes.append(
            f"baseline_budget={budget} visual tokens after layer 1 at every step, "
            "no layer-level pruning"
        )
    if backend != evaluated_on:
        notes.append(
            f"success_rate from the {evaluated_on} engine; this backend's actions "
            "match it (see export.max_abs_err)"
        )
    return Report("vla.specprune", backend, method, metrics=metrics, notes=tuple(notes))


def lookback_notes(result: Mapping[str, Any]) -> list[str]:
    """Which dynamic-set reference frame ran, and how many env steps back the references were
    (inferences after the first of each episode)."""
    if "lookback" not in result:
        return []
    steps = result.get("lookbacks") or []
    spread = (
        f": {np.mean(steps):.1f} env steps back (min {min(steps)}, max {max(steps)})"
        if steps
        else ""
    )
    return [f"lookback={result['lookback']} ({LOOKBACKS[result['lookback']]}){spread}"]


def sweep_row(
    label: str, result: Mapping[str, Any], flops: float, counts: list[int], evaluated_on: str
) -> Report:
    """A budget-sweep or view-ablation row: success and token counts (not timed)."""
    metrics = outcome_metrics(result, flops, counts)
    view = blanked_view(label)
    notes = [
        f"view ablation: the {view} camera is a uniform gray frame ({BLANK_VALUE}) at "
        "every query; success and tokens only, not timed"
        if view
        else "budget sweep: success and tokens only, not timed"
    ]
    if base_method(label) == "specprune":
        notes.append(f"fine-mode fraction {result['fine_fraction']:.2f}")
        notes += lookback_notes(result)
    return Report("vla.specprune", evaluated_on, label, metrics=metrics, notes=tuple(notes))


def speedup_plot(doc: dict[str, Any], path: Path) -> Path:
    """Success rate against end-to-end speedup, one point per method."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for row in doc["rows"]:
        m = row["metrics"]
        if "speedup" not in m:  # budget-sweep rows are not timed
            continue
        marker = "o" if row["backend"] == "host" else "s"
        ax.scatter(m["speedup"]["value"], 100 * m["success_rate"]["value"], s=40, marker=marker)
        ax.annotate(
            f"{row['variant']} ({row['backend']})",
            (m["speedup"]["value"], 100 * m["success_rate"]["value"]),
            textcoords="offset points",
            xytext=(5, 4 if marker == "o" else -12),
            fontsize=8,
        )
    ax.set_xlabel("end-to-end policy speedup vs unpruned (p50, same run)")
    ax.set_ylabel("success rate (%)")
    ax.set_title("vla.specprune on Meta-World")
    ax.grid(alpha=0.3)
    return finish_figure(fig, path)


def budget_plot(doc: dict[str, Any], path: Path) -> Path:
    """Success rate against visual tokens kept: the main rows and the budget sweep, one line
    per method (a method that uses what it keeps falls off more slowly as tokens go)."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    backend = doc["success_evaluated_on"]
    rows = [r for r in doc["rows"] if r["backend"] == backend]
    for method in SWEEP_METHODS:
        points = sorted(
            (
                r["metrics"]["visual_tokens_kept"]["value"],
                100 * r["metrics"]["success_rate"]["value"],
            )
            for r in rows
            if base_method(r["variant"]) == method
        )
        ax.plot(*zip(*points), marker="o", label=method)
    base = [r for r in rows if r["variant"] == "unpruned"]
    if base:
        ax.axhline(
            100 * base[0]["metrics"]["success_rate"]["value"],
            color="gray",
            ls="--",
            label="unpruned",
        )
    ax.set_xscale("log")
    ax.set_xlabel("visual tokens kept after layer 1 (mean, log scale)")
    ax.set_ylabel("success rate (%)")
    ax.set_title("vla.specprune: success vs token budget")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finish_figure(fig, path)
