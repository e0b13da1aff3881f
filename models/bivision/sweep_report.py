"""The noise sweep's report: row labels, means over seeds, the claim check and its report.md
section, and the plot (``neuroedge bench event.bivision``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import mean_report, paired_difference
from neuroedge.models.bivision.bench_settings import SPREAD_METRICS, SWEEP_VARIANTS
from neuroedge.types import Report


def sweep_label(variant: str, rate: float, seed: int | str | None = None) -> str:
    """``<variant>@noise=R`` (the mean over seeds, or the only seed), ``...@seed=S`` per seed."""
    label = f"{variant}@noise={rate:g}"
    return label if seed is None else f"{label}@seed={seed}"


def mean_rows(per_seed: Mapping[tuple[str, float], list[Report]]) -> list[Report]:
    """One ``<variant>@noise=R`` row per (variant, rate): each metric's mean over the seeds,
    plus ``<metric>_sd`` (sample standard deviation) for accuracy and map50."""
    return [
        mean_report(
            reps,
            sweep_label(variant, rate),
            SPREAD_METRICS,
            f"per seed in rows {sweep_label(variant, rate, 'S')}",
        )
        for (variant, rate), reps in per_seed.items()
    ]


# the claim's two cost comparisons: verdict key -> the rows' metric (both must hold)
OPS_COUNTS = {
    "ops_at_most_baseline": "synaptic_ops_per_sample",
    "effective_ops_at_most_baseline": "effective_ops_per_sample",
}


def claim_check(
    per_seed: Mapping[tuple[str, float], list[Report]], rates: Sequence[float]
) -> dict[str, Any]:
    """The issue's claim from the measured rows: STATNF + E2S beats LIF + histogram on accuracy
    and map50 at the same or lower SOPs at every rate, and the margin grows with the noise rate.

    "Same or lower SOPs" is read on two counts, and the claim holds only if BOTH are at most
    the baseline's (mean over seeds) at every rate: ``ops_at_most_baseline`` on
    ``synaptic_ops_per_sample`` (SOPs + MACs, every element of an analog input charged: a
    dense accelerator's cost) and ``effective_ops_at_most_baseline`` on
    ``effective_ops_per_sample`` (SOPs + MACs on nonzero inputs only: NeuroBench's effective
    count, under which the histogram baseline's mostly-zero first-layer input is cheap).

    Decisions: "beats" compares the means over seeds; "grows" is read strictly, as margins
    (mean over seeds) that never fall from one rate to the next and end above the clean
    margin, for accuracy and for map50 each. The per-rate standard error of the margin (over
    seeds, paired by seed) is reported with it, and so is each step: the change of the margin
    from one rate to the next, per seed, as mean +- standard error over seeds (``step``,
    ``step_sem``), so that a fall smaller than the scatter is visible as such (``|step| <= 2
    SE``: not resolved by these seeds). The verdict stays the strict reading of the means.
    A single seed fails the claim (``reason`` says so), however its margins read.
    """
    rates = sorted({float(r) for r in rates})  # a repeated rate is not one more point
    model, baseline = SWEEP_VARIANTS
    out: dict[str, Any] = {"rates": rates, "seeds": len(per_seed[(model, rates[0])])}
    holds = len(rates) >= 3 and rates[0] == 0.0
    for metric in ("accuracy", "map50"):
        per_rate = [
            np.array([a.metrics[metric].value for a in per_seed[(model, r)]])
            - np.array([b.metrics[metric].value for b in per_seed[(baseline, r)]])
            for r in rates
        ]  # the margin of every seed at every rate
        margin, sem = np.array([paired_difference(m, np.zeros_like(m)) for m in per_rate]).T
        step, step_sem = (
            np.array([paired_difference(hi, lo) for lo, hi in zip(per_rate, per_rate[1:])])
            .reshape(-1, 2)
            .T
        )
        beats = bool(np.all(margin > 0))
        grows = bool(np.all(np.diff(margin) >= 0) and margin[-1] > margin[0])
        out[metric] = {
            "margin": margin.round(4).tolist(),
            "margin_sem": sem.round(4).tolist(),
            "step": step.round(4).tolist(),
            "step_sem": step_sem.round(4).tolist(),
            "beats_at_every_rate": beats,
            "margin_grows": grows,
            "falls_at": [rates[i + 1] for i in np.flatnonzero(np.diff(margin) < 0)],
        }
        holds = holds and beats and grows
    out.update(ops_verdicts(per_seed, rates))
    out["holds"] = bool(holds and all(out[key] for key in OPS_COUNTS) and out["seeds"] >= 2)
    if out["seeds"] < 2:  # as causal.cadre: one seed has no standard error over seeds
        out["reason"] = "one seed: the claim is read over seeds, single seeds fail it"
    return out


def ops_verdicts(
    per_seed: Mapping[tuple[str, float], list[Report]], rates: Sequence[float]
) -> dict[str, Any]:
    """For each count of ``OPS_COUNTS``: its mean over seeds per variant and rate (keyed by
    the metric's name) and whether STATNF + E2S's is at most the baseline's at every rate."""
    out: dict[str, Any] = {}
    for key, metric in OPS_COUNTS.items():
        ops = {
            v: [
                float(np.mean([r.metrics[metric].value for r in per_seed[(v, rate)]]))
                for rate in rates
            ]
            for v in SWEEP_VARIANTS
        }
        out[metric] = ops
        out[key] = bool(all(a <= b for a, b in zip(*ops.values())))
    return out


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines for the claim check."""
    lines = [
        "## Claim: STATNF + E2S vs LIF + histogram",
        "",
        f"Margins (statnf_e2s - lif_histogram), mean over {claim['seeds']} seed(s), "
        "+- standard error over seeds:",
        "",
        "| rate (Hz/pixel) | accuracy margin | map50 margin |",
        "|---|---|---|",
    ]
    for i, rate in enumerate(claim["rates"]):
        cells = [
            f"{claim[m]['margin'][i]:+.3f} +- {claim[m]['margin_sem'][i]:.3f}"
            for m in ("accuracy", "map50")
        ]
        lines.append(f"| {rate:g} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "Steps: change of the margin from one rate to the next, paired by seed, "
        "+- standard error (a step within 2 SE of 0 is not resolved by these seeds):",
        "",
        "| step (Hz/pixel) | accuracy | map50 |",
        "|---|---|---|",
    ]
    for i, (lo, hi) in enumerate(zip(claim["rates"], claim["rates"][1:])):
        cells = [
            f"{claim[m]['step'][i]:+.3f} +- {claim[m]['step_sem'][i]:.3f}"
            for m in ("accuracy", "map50")
        ]
        lines.append(f"| {lo:g} -> {hi:g} | {cells[0]} | {cells[1]} |")
    lines.append("")
    for metric in ("accuracy", "map50"):
        c = claim[metric]
        lines.append(
            f"- {metric}: beats at every rate: {c['beats_at_every_rate']}; margin "
            f"grows: {c['margin_grows']}"
            + (
                f" (falls at {', '.join(f'{r:g}' for r in c['falls_at'])} Hz)"
                if c["falls_at"]
                else ""
            )
        )
    return [
        *lines,
        *ops_lines(claim),
        f"- claim holds: **{claim['holds']}** (it needs both margins positive at every rate "
        "and growing, both cost counts at most the baseline's at every rate, and two or more "
        "seeds)" + (f": {claim['reason']}" if "reason" in claim else ""),
        "",
    ]


def ops_lines(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines for the claim's two cost counts: a table per rate and the verdicts."""
    model, baseline = SWEEP_VARIANTS
    lines = [
        "",
        f"Cost per classification sample, {model} / {baseline}, mean over seeds. SOPs + MACs "
        "charges every element of an analog input (a dense accelerator's cost); SOPs + "
        "effective MACs charges nonzero inputs only (NeuroBench's Effective_ACs + "
        'Effective_MACs). The claim\'s "same or lower SOPs" must hold on both:',
        "",
        "| rate (Hz/pixel) | SOPs + MACs | SOPs + effective MACs |",
        "|---|---|---|",
    ]
    for i, rate in enumerate(claim["rates"]):
        cells = [
            f"{claim[m][model][i]:.4g} / {claim[m][baseline][i]:.4g}" for m in OPS_COUNTS.values()
        ]
        lines.append(f"| {rate:g} | {cells[0]} | {cells[1]} |")
    return [
        *lines,
        "",
        f"- SOPs + MACs at most the baseline's at every rate: {claim['ops_at_most_baseline']}",
        "- SOPs + effective MACs at most the baseline's at every rate: "
        f"{claim['effective_ops_at_most_baseline']}",
    ]


def noise_sweep_plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Accuracy, mAP50 and SOPs + MACs against the noise rate, one line per variant (the mean
    over seeds, with the standard deviation over seeds as error bars when there are several),
    and the claim's margins with their standard error."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    series: dict[str, list[tuple[float, dict]]] = {}
    for row in doc["rows"]:
        if "@noise=" in row["variant"] and "@seed=" not in row["variant"]:
            name, rate = row["variant"].split("@noise=")
            series.setdefault(name, []).append((float(rate), row["metrics"]))
    if not series:
        return None
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    titles = {"synaptic_ops_per_sample": "SOPs + MACs per sample"}
    for ax, metric in zip(axes, ("accuracy", "map50", "synaptic_ops_per_sample")):
        for name, points in sorted(series.items()):
            points.sort(key=lambda p: p[0])
            spread = [p[1].get(f"{metric}_sd", {}).get("value", 0.0) for p in points]
            ax.errorbar(
                [p[0] for p in points],
                [p[1][metric]["value"] for p in points],
                yerr=spread if any(spread) else None,
                fmt="o-",
                capsize=3,
                label=name,
            )
        ax.set_xlabel("background activity (Hz per pixel)")
        ax.set_title(titles.get(metric, metric))
    axes[0].legend()
    claim, ax = doc.get("claim"), axes[3]
    if claim:
        for metric in ("accuracy", "map50"):
            sem = np.nan_to_num(np.asarray(claim[metric]["margin_sem"], float))
            ax.errorbar(
                claim["rates"],
                claim[metric]["margin"],
                yerr=sem if sem.any() else None,
                fmt="o-",
                capsize=3,
                label=metric,
            )
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.legend()
    ax.set_xlabel("background activity (Hz per pixel)")
    ax.set_title("margin statnf_e2s - lif_histogram (+- SE)")
    protocol = doc.get("config", {}).get("train_noise", "same")
    fig.suptitle(
        "event.bivision on simulated events: noise sweep "
        f"({'trained at each rate' if protocol == 'same' else 'trained on clean data'})"
    )
    fig.tight_layout()
    return finish_figure(fig, path)
