"""``neuroedge bench snn.unisparse``: variants, export parity, the claim, tables and plots.

Rows: dense, unisparse, spike_only, weight_only, random_mask on ``host`` (trained and measured
in this run), plus ONNX Runtime rows (spike agreement with the host over every step) when
``onnxrt`` is asked for, and Lava rows ``<variant>/floating_pt`` and ``<variant>/fixed_pt``
(Loihi 2 simulator: spike agreement and its Cohen's kappa overall and per layer, accuracy
change, chip fit; on the first ``lava_samples`` test digits, default 64) when ``lava`` is.
report.md adds per-layer tables, the learned thresholds, the claim check, the NIR round trip
and the SOP counter's overhead; pareto.png plots accuracy vs SOPs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neuroedge.bench.seeds import seed_list, seed_rows, verdict
from neuroedge.config_values import check_backend_keys, check_seed_keys
from neuroedge.models.unisparse import seeds as seeds_mod
from neuroedge.models.unisparse.seeds import CLAIM_DROP_PTS, CLAIM_REDUCTION, RIVALS, SOPS, VERDICT
from neuroedge.models.unisparse import train
from neuroedge.models.unisparse.export_parity import (  # noqa: F401 (LAVA_MODES stays bench's)
    LAVA_KEYS,
    LAVA_MODES,
    lava_rows,
    nir_check,
    onnx_rows,
)
from neuroedge.models.unisparse.pipeline import ORDER, VariantResult, check_config, run_variants
from neuroedge.types import Measurement, Report

COLUMNS = (
    "accuracy",
    "sops_per_sample_no_first",
    "sops_per_sample_with_first",
    "sop_reduction",
    "energy_uj",
    "firing_rate",
    "weight_density",
    "budget_met",
    "spike_agreement",
    "spike_kappa",
    "train_s_per_epoch",
)


def claim_check(results: Mapping[str, VariantResult]) -> dict[str, Any]:
    """The issue's claim on digits, from measured numbers: >= 5x fewer SOPs than dense with at
    most 1.5 points accuracy drop, and at that SOP budget more accurate than spike-only and
    weight-only. A rival under 5x fewer SOPs than dense spent more: unless unisparse beats it
    anyway, that comparison is not decided (``beats`` None, its reason in ``reasons``).
    ``holds``: False when a part fails or a rival is missing, else None when a comparison is
    undecided, else True; None with a ``reason`` when the dense net did not learn
    (``seeds.dense_learned``)."""
    val = {n: {k: m.value for k, m in r.metrics.items()} for n, r in results.items()}
    dense, uni = val["dense"], val["unisparse"]

    def reduction(name: str) -> float:
        return dense[SOPS] / max(val[name][SOPS], 1e-9)

    drop = 100 * (dense["accuracy"] - uni["accuracy"])
    rivals = [n for n in RIVALS if n in val]
    parts = {
        "sop_reduction": reduction("unisparse"),
        "accuracy_drop_pts": drop,
        "reduction_holds": reduction("unisparse") >= CLAIM_REDUCTION,
        "drop_holds": drop <= CLAIM_DROP_PTS,
        "beats": {n: uni["accuracy"] > val[n]["accuracy"] for n in rivals},
        "rival_sops": {n: val[n][SOPS] for n in rivals},
        "rival_sop_reduction": {n: reduction(n) for n in rivals},
        "reasons": {},
    }
    # beaten though it spent more SOPs: beaten; else the comparison is not at one budget
    for n in (n for n in rivals if reduction(n) < CLAIM_REDUCTION and not parts["beats"][n]):
        parts["beats"][n] = None
        parts["reasons"][n] = (
            f"not at the claim's budget: {reduction(n):.2f}x fewer SOPs than dense, under "
            f"{CLAIM_REDUCTION:g}x"
        )
    parts["holds"] = verdict(
        [
            parts["reduction_holds"],
            parts["drop_holds"],
            len(rivals) == len(RIVALS),
            *parts["beats"].values(),
        ]
    )
    return seeds_mod.dense_learned(parts, {"this run": dense["accuracy"]})


def host_rows(model: str, results: Mapping[str, VariantResult]) -> list[Report]:
    dense_sops = results["dense"].metrics["sops_per_sample_no_first"].value
    rows = []
    for name in ORDER:
        if name not in results:
            continue
        r = results[name]
        sops = r.metrics["sops_per_sample_no_first"].value
        extra = {"sop_reduction": Measurement(dense_sops / max(sops, 1e-9), "x", "counted")}
        rows.append(
            Report(model, "host", name, metrics={**r.metrics, **extra}, notes=tuple(r.notes))
        )
    return rows


def layer_sections(results: Mapping[str, VariantResult]) -> list[str]:
    """Markdown per-layer tables: SOPs (or MACs), weight density and input firing rate."""
    names = [n for n in ORDER if n in results]
    lines = [
        "## Per-layer operations per sample (stem: MACs on the analog input)",
        "",
        "| layer | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    per = {n: {s.name: s for s in results[n].layers} for n in names}
    for layer in [s.name for s in results["dense"].layers]:
        cells = [f"{per[n][layer].ops:.4g}" for n in names]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per-layer weight density / input firing rate (spikes per input per step)",
        "",
        "| layer | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for layer in [s.name for s in results["dense"].layers]:
        cells = [f"{per[n][layer].density:.3f} / {per[n][layer].input_rate:.3f}" for n in names]
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines += [
        "",
        ("## Learned thresholds: mean theta_eff = theta sqrt(var+eps)/gamma per LIF layer"),
        "",
        "| LIF layer | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    thresholds = {
        n: [float(bn.effective_threshold().detach().mean()) for bn in results[n].net.spike_bns()]
        for n in names
    }
    for i in range(len(thresholds["dense"])):
        lines.append(f"| {i} | " + " | ".join(f"{thresholds[n][i]:.3g}" for n in names) + " |")
    return lines


def summary_sections(
    claim: Mapping[str, Any], target: float, extra: Mapping[str, Any], scope: str = ""
) -> list[str]:
    lines = [
        f"## Claim on digits{f' ({scope})' if scope else ''}: "
        + claim.get("said", VERDICT[claim["holds"]]),
        "",
        *([f"- {claim['reason']}"] if "reason" in claim else []),
        (
            f"- SOP reduction (no first layer) vs dense: {claim['sop_reduction']:.2f}x "
            f"(need >= {CLAIM_REDUCTION:g}x): {claim['reduction_holds']}"
        ),
        (
            f"- accuracy drop: {claim['accuracy_drop_pts']:.2f} points (need <= "
            f"{CLAIM_DROP_PTS:g}): {claim['drop_holds']}"
        ),
    ]
    lines += [
        f"- more accurate than {n} (at {claim['rival_sops'][n]:.4g} SOPs): {ok}"
        + (f" ({claim['reasons'][n]})" if n in claim.get("reasons", {}) else "")
        for n, ok in claim["beats"].items()
    ]
    lines += ["", f"Energy target (spike-driven part): {target:.4g} uJ per sample.", ""]
    for title, block in extra.items():
        lines += [f"## {title}", "", *(f"- {k}: {v}" for k, v in block.items()), ""]
    return lines


def pareto_plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Accuracy vs spike-driven SOPs per sample, host rows, with the non-dominated front."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    rows = [
        r
        for r in doc["rows"]
        if r["backend"] == "host" and "accuracy" in r["metrics"] and "@seed=" not in r["variant"]
    ]  # several seeds: their means
    if not rows:
        return None
    pts = sorted(
        (
            r["metrics"]["sops_per_sample_no_first"]["value"],
            100 * r["metrics"]["accuracy"]["value"],
            r["variant"],
        )
        for r in rows
    )
    fig, ax = plt.subplots(figsize=(6, 4))
    front, best = [], -1.0
    for x, y, _ in pts:
        if y > best:
            front.append((x, y))
            best = y
    ax.step(*zip(*front), where="post", color="0.6", label="Pareto front")
    for x, y, name in pts:
        ax.scatter(x, y, s=40)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    dense = next(r for r in rows if r["variant"] == "dense")["metrics"]
    ax.axvline(
        dense["sops_per_sample_no_first"]["value"] / CLAIM_REDUCTION,
        ls="--",
        c="C3",
        lw=0.8,
        label=f"dense / {CLAIM_REDUCTION:g}",
    )
    ax.axhline(
        100 * dense["accuracy"]["value"] - CLAIM_DROP_PTS,
        ls=":",
        c="C3",
        lw=0.8,
        label=f"dense - {CLAIM_DROP_PTS:g} pts",
    )
    ax.set_xscale("log")
    ax.set_xlabel("SOPs per sample (spike-driven, first layer excluded)")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(f"{doc['model']}: accuracy vs SOPs")
    ax.legend(fontsize=8)
    return finish_figure(fig, path)


def run_bench(
    out_dir: str, backends: Sequence[str], config: Mapping[str, Any], history: str | None = None
) -> dict[str, Any]:
    """Train every variant, measure, export, and write the report folder."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.seeding import torch_threads

    check_seed_keys(config)  # the user's own keys: seed and seeds together are ambiguous
    cfg = check_config({**train.DEFAULTS, **config}, config)  # every value, before any training
    check_backend_keys(config, backends, "lava", LAVA_KEYS)  # lava_samples: lava rows only
    with torch_threads(int(cfg.get("threads", 1))):
        out = Path(out_dir)
        seeds = seed_list(cfg)
        # the nets reported below are the first seed's: their deployed rows, the counter overhead
        # and the saved checkpoints read its split, and `seeds=[5]` alone trains seed 5
        cfg["seed"] = seeds[0]
        results, target, rows, claim, claim_lines = _host_part(cfg, seeds)
        if "onnxrt" in backends:
            rows += onnx_rows("snn.unisparse", results, out, cfg)
        lava_lines: list[str] = []
        if "lava" in backends:
            lava_part, lava_lines = lava_rows("snn.unisparse", results, cfg)
            rows += lava_part
        overhead, extra = _extra_blocks(results, out, cfg)
        doc = build_document(
            "snn.unisparse",
            rows,
            config=cfg,
            columns=list(COLUMNS),
            energy_target_uj=target,
            claim=claim,
            sop_counter={k: m.to_json() for k, m in overhead.items()},
            extra={k: {kk: str(vv) for kk, vv in v.items()} for k, v in extra.items()},
        )
        if "unisparse" not in results:
            sections = [*claim_lines, *layer_sections(results)]
        elif claim_lines:
            sections = [
                *claim_lines,
                *summary_sections(claim_check(results), target, extra, f"seed {seeds[0]} alone"),
                *layer_sections(results),
            ]
        else:
            sections = [*summary_sections(claim, target, extra), *layer_sections(results)]
        for name, r in results.items():
            _save(out / "checkpoints" / f"{name}.pt", r, cfg)
        write_report(
            doc,
            out,
            columns=COLUMNS,
            sections=[*sections, *lava_lines],
            plots=[pareto_plot],
            history=history,
            files=_written(out, results, rows),
        )
        return doc


def _written(out: Path, results: Mapping[str, VariantResult], rows: list[Report]) -> list[Path]:
    """The files this run wrote in its report folder (report.json lists them; a later run
    there removes those it does not write again): checkpoints, ONNX graphs, the NIR graph."""
    from neuroedge.export.onnx import state_file

    files = [out / "checkpoints" / f"{name}.pt" for name in results]
    if any(r.backend == "onnxrt" and r.metrics for r in rows):
        graphs = [out / "onnx" / f"{name}.onnx" for name in results]
        files += [p for g in graphs for p in (g, state_file(g)) if p.exists()]
    if "unisparse" in results:
        files.append(out / "unisparse.nir")
    return files


def _host_part(
    cfg: dict[str, Any], seeds: list[int]
) -> tuple[dict[str, VariantResult], float, list[Report], dict[str, Any], list[str]]:
    """Train and measure on host: results and target (of the first seed, ``cfg["seed"]``),
    rows, claim, lines."""
    if len(seeds) == 1:
        results, target = run_variants(cfg, tuple(cfg.get("variants", ORDER)))
        rows = host_rows("snn.unisparse", results)
        claim = claim_check(results) if "unisparse" in results else {"holds": False}
        claim_lines: list[str] = []
    else:  # the claim over seeds; exports, NIR and per-layer tables from the first seed
        per_seed = seeds_mod.run_seeds(cfg, seeds, cfg.get("workers", 1))
        results, target = per_seed[seeds[0]]
        rows = seed_rows(
            {s: host_rows("snn.unisparse", r) for s, (r, _) in per_seed.items()}, seeds_mod.SPREAD
        )
        if "unisparse" in results:
            claim = seeds_mod.claim_over_seeds({s: r for s, (r, _) in per_seed.items()})
            claim_lines = seeds_mod.claim_section(claim)
        else:  # e.g. one rival's accuracy at another budget, averaged over seeds
            claim = {"holds": False, "seeds": seeds, "reason": "no unisparse variant in the run"}
            claim_lines = [f"No claim: the run has no unisparse variant ({len(seeds)} seeds)."]
    return results, target, rows, claim, claim_lines


def _extra_blocks(
    results: Mapping[str, VariantResult], out: Path, cfg: Mapping[str, Any]
) -> tuple[dict[str, Measurement], dict[str, Any]]:
    """The SOP counter's overhead, and the report's extra blocks (overhead, NIR, epoch times)."""
    from neuroedge.models.unisparse.data import load_digits
    from neuroedge.models.unisparse.measure import counter_overhead
    from neuroedge.models.unisparse.module import fold

    overhead = counter_overhead(
        fold(results["dense"].net).cpu(),
        load_digits(int(cfg["seed"])).x_test[:64],
        int(cfg["steps"]),
    )
    extra = {
        "SOP counter overhead (dense mini-ResNet forward, batch 64, same run)": {
            k: f"{m.value:.4g} {m.unit}" for k, m in overhead.items()
        }
    }
    if "unisparse" in results:
        extra["NIR export (unisparse, read back, run by norse)"] = nir_check(
            results["unisparse"], out, cfg
        )
    extra["Training time per epoch (s)"] = {
        n: f"{r.metrics['train_s_per_epoch'].value:.1f}" for n, r in results.items()
    }
    return overhead, extra


def _save(path: Path, result: VariantResult, cfg: Mapping[str, Any]) -> None:
    from neuroedge.checkpoints import save_checkpoint

    save_checkpoint(
        path,
        {
            "state_dict": result.net.cpu().state_dict(),
            "config": dict(cfg),
            "metrics": {k: m.value for k, m in result.metrics.items()},
        },
    )
