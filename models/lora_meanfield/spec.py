"""The registered ModelSpec of theory.lora_meanfield and its bench hook.

``run``: base and LoRA-adapted token clouds after an L-layer attention flow, their W2 distance
and the cluster drift. ``bench``: the three experiments of ``experiments.py`` as report rows,
with a phase-diagram plot and a time-to-deviation plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.report import finish_figure, pyplot
from neuroedge.config_values import integer, number
from neuroedge.types import Efficiency, HostProgram, IOSpec, Measurement, ModelSpec, Paper, Report

DEFAULTS = {"horizon": 5.0, "layers": 64, "beta": 1.0}
BENCH_DEFAULTS = {"seeds": 5, "adapters": 30}
MAX_LAYERS = 10**5  # one Euler step per layer: 1e5 layers of 32 tokens take seconds, not hours
MAX_BETA = 1e3  # inverse temperature; beyond ~1e3 the softmax is already a hard argmax
# Each layer is an Euler step of h = horizon / layers. h = 1 is a plain residual layer
# x + attn(x), the coarsest step a Transformer takes; a larger step jumps past the dynamics
# (at horizon=1e6 over 64 layers every layer lands on the field's direction and the outputs
# mean nothing; at 1e300 the step overflows). So horizon <= MAX_STEP x layers, which with
# MAX_LAYERS also caps horizon at 1e5.
MAX_STEP = 1.0
# Bench work grows linearly in both: one adapter is a 1200-layer flow (about 50 ms on one
# core), one seed 18 flows of 16-256 layers (about 0.2 s); the caps keep each experiment
# within about ten minutes (10^4 adapters ~ 8 min, 10^3 seeds ~ 3 min).
MAX_ADAPTERS, MAX_SEEDS = 10**4, 10**3


def _run_values(cfg: Mapping[str, Any]) -> tuple[float, int, float]:
    """(horizon, layers, beta), refused with ConfigError unless horizon is finite and > 0,
    layers an integer in 1..MAX_LAYERS, the step horizon/layers at most MAX_STEP and beta (an
    inverse temperature) finite in [0, MAX_BETA]: a negative beta would make tokens repel,
    which is not the modelled flow."""
    from neuroedge.errors import ConfigError

    horizon = number(cfg, "horizon", 0.0, open_low=True)
    layers = integer(cfg, "layers", 1, MAX_LAYERS)
    if horizon > MAX_STEP * layers:
        need = math.ceil(horizon / MAX_STEP)
        more = (
            f"or layers >= {need}"
            if need <= MAX_LAYERS
            else f"(layers <= {MAX_LAYERS} allow horizon <= {MAX_STEP * MAX_LAYERS:g})"
        )
        raise ConfigError(
            f"horizon={horizon!r} over layers={layers}: each layer is an Euler step of "
            f"h = horizon / layers = {horizon / layers:.3g}, above {MAX_STEP:g} (a plain "
            "residual layer x + attn(x)); a larger step jumps past the attention flow: use "
            f"horizon <= {MAX_STEP * layers:g} {more}"
        )
    return horizon, layers, number(cfg, "beta", 0.0, MAX_BETA)


def bench_values(config: Mapping[str, Any]) -> dict[str, int]:
    """The bench's ``seeds`` (1..MAX_SEEDS) and ``adapters`` (1..MAX_ADAPTERS) over
    BENCH_DEFAULTS, integers (ConfigError otherwise); the report's config is this dict: the
    values the bench used."""
    cfg = {**BENCH_DEFAULTS, **{k: v for k, v in config.items() if k in BENCH_DEFAULTS}}
    most = {"seeds": MAX_SEEDS, "adapters": MAX_ADAPTERS}
    hint = " (the bench's work grows linearly in it; see MAX_SEEDS, MAX_ADAPTERS)"
    return {key: integer(cfg, key, 1, most[key], hint) for key in BENCH_DEFAULTS}


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(tokens, value, delta_value)``: base vs tied-LoRA flow (V, V + dV in every layer)."""
    from neuroedge.models.lora_meanfield.functional import (
        check_tokens,
        cluster_direction,
        run_flow,
        wasserstein2,
    )

    cfg = {**DEFAULTS, **{k: v for k, v in config.items() if k in DEFAULTS}}
    horizon, layers, beta = _run_values(cfg)

    def fn(tokens: np.ndarray, value: np.ndarray, delta_value: np.ndarray) -> dict[str, Any]:
        x0 = check_tokens(tokens)
        d = x0.shape[1]
        for name, m in (("value", value), ("delta_value", delta_value)):
            if np.shape(m) != (d, d) or not np.isfinite(m).all():
                raise ValueError(
                    f"{name}: expected a finite [{d}, {d}] matrix, got shape {list(np.shape(m))}"
                )
        base = run_flow(x0, value, value, horizon, layers, beta)
        adapted = run_flow(x0, value, value + delta_value, horizon, layers, beta)
        drift = np.linalg.norm(cluster_direction(base) - cluster_direction(adapted))
        return {
            "base_tokens": base,
            "adapted_tokens": adapted,
            "w2": np.array([wasserstein2(base, adapted)]),
            "cluster_drift": np.array([drift]),
        }

    return HostProgram(fn, meta={"config": cfg})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """32 tokens in d = 8 with the gap-0.3 base V and a rank-2 symmetric adapter."""
    from neuroedge.models.lora_meanfield.experiments import base_value
    from neuroedge.models.lora_meanfield.functional import sphere_tokens, tied_adapter

    return {
        "tokens": sphere_tokens(32, 8, seed),
        "value": base_value(),
        "delta_value": tied_adapter(8, 2, 0.1, seed),
    }


def bench(
    out_dir: str, backends: list[str], config: Mapping[str, Any], history: str | None = None
) -> dict[str, Any]:
    """Measure the three claims; rows per experiment, plots of the phase diagram and T*."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.lora_meanfield import experiments as ex

    cfg = bench_values(config)
    seeds, adapters = cfg["seeds"], cfg["adapters"]
    stab = ex.stability(n_adapters=adapters)
    phase = ex.phase_transition(seeds=seeds)
    devs = [ex.time_to_deviation(kick=k) for k in (0.0, 1e-6, 1e-3)]
    rows = [_stability_row(stab), *_phase_rows(phase), *_deviation_rows(devs)]
    logs = np.log(1.0 / np.array([d.eps0 for d in devs]))
    slope = float(np.polyfit(logs, [d.measured for d in devs], 1)[0])
    doc = build_document(
        SPEC.name,
        rows,
        config=cfg,
        phase_diagram={"cs": list(phase.cs), "depths": list(phase.depths), "w2": phase.w2.tolist()},
        deviation={
            "times": devs[0].times[::20].tolist(),
            "overlap": devs[0].overlap[::20].tolist(),
            "predicted": devs[0].predicted,
        },
        tstar_slope_vs_ln_inv_eps0=slope,
    )
    doc["columns"] = COLUMNS
    sections = [
        f"T* against ln(1/eps0): slope {slope:.3f} (theory 1/gap~ = {1 / 0.3:.3f}).",
        (
            "Rows: `stability` = Prop 3.3 on random tied adapters; `phase c=..` = mean W2 "
            "at T=5 per depth; `deviation eps0=..` = measured vs predicted T*."
        ),
    ]
    write_report(
        doc,
        out_dir,
        columns=COLUMNS,
        sections=sections,
        plots=[phase_diagram_plot, deviation_plot],
        history=history,
    )
    return doc


COLUMNS = (
    "bound_violations",
    "max_drift_over_bound",
    "w2_L16",
    "w2_L64",
    "w2_L256",
    "w2_ratio_L256_L16",
    "tstar_ratio",
)


def _stability_row(stab: Any) -> Report:
    return Report(
        SPEC.name,
        "host",
        "stability",
        metrics={
            "bound_violations": Measurement(stab.violations, "count", "counted"),
            "max_drift_over_bound": Measurement(stab.max_ratio, "ratio", "measured"),
            "adapters_checked": Measurement(len(stab.drifts), "count", "counted"),
            "adapters_outside_condition": Measurement(stab.skipped, "count", "counted"),
        },
    )


def _phase_rows(phase: Any) -> list[Report]:
    rows = []
    for j, c in enumerate(phase.cs):
        metrics = {
            f"w2_L{L}": Measurement(float(phase.w2[i, j]), "distance", "measured")
            for i, L in enumerate(phase.depths)
        }
        metrics["w2_ratio_L256_L16"] = Measurement(
            float(phase.w2[-1, j] / phase.w2[0, j]), "ratio", "measured"
        )
        rows.append(Report(SPEC.name, "host", f"phase c={c:g}", metrics=metrics))
    return rows


def _deviation_rows(devs: list[Any]) -> list[Report]:
    return [
        Report(
            SPEC.name,
            "host",
            f"deviation eps0={d.eps0:.1e}",
            metrics={
                "tstar_measured": Measurement(d.measured, "time", "measured"),
                "tstar_predicted": Measurement(d.predicted, "time", "estimated"),
                "tstar_ratio": Measurement(d.ratio, "ratio", "measured"),
            },
        )
        for d in devs
    ]


def phase_diagram_plot(doc: dict[str, Any], path: Path) -> Path:
    """W2 against c = eta/sqrt(L) for each depth (collapse = curves on top of each other)."""
    plt = pyplot()
    pd = doc["phase_diagram"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    for depth, w2 in zip(pd["depths"], pd["w2"]):
        ax.loglog(pd["cs"], w2, "o-", label=f"L = {depth}")
    ax.set_xlabel("c = eta / sqrt(L)")
    ax.set_ylabel("W2(base, LoRA) at T = 5")
    ax.legend()
    im = ax2.imshow(np.log10(pd["w2"]), aspect="auto", origin="lower", cmap="viridis")
    ax2.set_xticks(range(len(pd["cs"])), [f"{c:g}" for c in pd["cs"]])
    ax2.set_yticks(range(len(pd["depths"])), [str(d) for d in pd["depths"]])
    ax2.set_xlabel("c")
    ax2.set_ylabel("depth L")
    fig.colorbar(im, ax=ax2, label="log10 W2")
    fig.suptitle("LoRA norm phase transition collapses on eta/sqrt(L)")
    return finish_figure(fig, path)


def deviation_plot(doc: dict[str, Any], path: Path) -> Path:
    """Overlap with the adapted cluster direction over depth-time, with the predicted T*."""
    plt = pyplot()
    dev = doc["deviation"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(dev["times"], dev["overlap"], label="mean |<x_i, u~_1>|")
    ax.axvline(dev["predicted"], color="k", ls="--", label="ln(1/eps0)/gap~")
    ax.set_xlabel("time (depth)")
    ax.set_ylabel("overlap with the LoRA cluster")
    ax.legend()
    return finish_figure(fig, path)


SPEC = ModelSpec(
    name="theory.lora_meanfield",
    family="algorithm",
    summary="LoRA forgetting as perturbed mean-field attention on the sphere (W2, cluster drift)",
    inputs=(
        IOSpec("tokens", ("tokens", "dim"), "float64"),
        IOSpec("value", ("dim", "dim"), "float64"),
        IOSpec("delta_value", ("dim", "dim"), "float64"),
    ),
    outputs=(
        IOSpec("base_tokens", ("tokens", "dim"), "float64"),
        IOSpec("adapted_tokens", ("tokens", "dim"), "float64"),
        IOSpec("w2", (1,), "float64"),
        IOSpec("cluster_drift", (1,), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "The impact of LoRA on Oversmoothing: Understanding Catastrophic Forgetting in "
        "Mean-Field Attention Dynamics",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2402.15415",
    ),
    efficiency=Efficiency("step"),
    default_config=dict(DEFAULTS),
    bench=bench,
    config_keys={"build": tuple(DEFAULTS), "bench": tuple(BENCH_DEFAULTS)},
)
