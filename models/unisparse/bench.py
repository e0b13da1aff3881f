"""``neuroedge bench snn.unisparse``: variants, export parity, the claim, tables and plots.

Rows: dense, unisparse, spike_only, weight_only, random_mask on ``host`` (trained and measured
in this run), plus ONNX Runtime rows (spike agreement with the host over every step) when
``onnxrt`` is asked for, and Lava rows ``<variant>/floating_pt`` and ``<variant>/fixed_pt``
(Loihi 2 simulator: spike agreement overall and per layer, accuracy change, chip fit; on the
first ``lava_samples`` test digits, default 64) when ``lava`` is. report.md adds per-layer
tables, the learned thresholds, the claim check, the NIR round trip and the SOP counter's
overhead; pareto.png plots accuracy vs SOPs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import seed_list, seed_rows
from neuroedge.models.unisparse import seeds as seeds_mod
from neuroedge.models.unisparse.seeds import CLAIM_DROP_PTS, CLAIM_REDUCTION, RIVALS
from neuroedge.models.unisparse import train
from neuroedge.models.unisparse.pipeline import ORDER, VariantResult, run_variants
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
    "train_s_per_epoch",
)


def claim_check(results: Mapping[str, VariantResult]) -> dict[str, Any]:
    """The issue's claim on digits, from measured numbers: >= 5x fewer SOPs than dense with at
    most 1.5 points accuracy drop, and more accurate than spike-only and weight-only."""
    val = {n: {k: m.value for k, m in r.metrics.items()} for n, r in results.items()}
    dense, uni = val["dense"], val["unisparse"]
    reduction = dense["sops_per_sample_no_first"] / max(uni["sops_per_sample_no_first"], 1e-9)
    drop = 100 * (dense["accuracy"] - uni["accuracy"])
    rivals = {n: val[n]["accuracy"] for n in RIVALS if n in val}
    parts = {
        "sop_reduction": reduction,
        "accuracy_drop_pts": drop,
        "reduction_holds": reduction >= CLAIM_REDUCTION,
        "drop_holds": drop <= CLAIM_DROP_PTS,
        "beats": {n: uni["accuracy"] > acc for n, acc in rivals.items()},
        "rival_sops": {n: val[n]["sops_per_sample_no_first"] for n in rivals},
    }
    parts["holds"] = bool(
        parts["reduction_holds"]
        and parts["drop_holds"]
        and all(parts["beats"].values())
        and len(rivals) == len(RIVALS)
    )
    return parts


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


def onnx_rows(
    model: str, results: Mapping[str, VariantResult], out: Path, cfg: Mapping[str, Any]
) -> list[Report]:
    """Each folded variant exported (step form, explicit membranes) and run by ONNX Runtime:
    spike agreement and max abs error against the host over all T steps, and accuracy."""
    from neuroedge.backends.host import run_torch_program
    from neuroedge.bench.parity import compare
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.models.unisparse.module import fold
    from neuroedge.registry import get_backend
    from neuroedge.types import TorchProgram

    backend = get_backend("onnxrt")
    available = backend.probe()
    if not available.ok:
        return [Report(model, "onnxrt", rejections=(available.reason,))]
    split = load_digits(int(cfg["seed"]))
    xs = {"x": direct_encoding(split.x_test, int(cfg["steps"]))}
    rows = []
    for name, r in results.items():
        folded = fold(r.net).cpu()
        program = TorchProgram(
            folded, ("x",), ("logits", "spikes"), spec_mod.STATE_NAMES, folded.init_state
        )
        art = backend.compile(
            program, spec_mod.SPEC, {"form": "step", "path": str(out / f"onnx/{name}.onnx")}
        )
        host, got = run_torch_program(program, xs), backend.run(art, xs)
        metrics = compare(host, got)
        correct = (got["logits"].mean(0).argmax(-1) == split.y_test).mean()
        metrics["accuracy"] = Measurement(float(correct), "fraction", "measured")
        rows.append(
            Report(
                model,
                "onnxrt",
                name,
                metrics=metrics,
                notes=(
                    f"{len(split.y_test)} test digits x {cfg['steps']} steps compared with host",
                ),
            )
        )
    return rows


LAVA_MODES = ("floating_pt", "fixed_pt")


def lava_rows(
    model: str, results: Mapping[str, VariantResult], cfg: Mapping[str, Any]
) -> tuple[list[Report], list[str]]:
    """Each folded variant's NIR graph (``export.to_nir``, membrane shortcuts as summed edges
    with synaptic delays) run as Lava processes under Loihi 2's simulator configuration, in
    floating_pt and fixed_pt: spike agreement with the host over all T steps (overall and per
    LIF layer), logit error, accuracy on the same digits, chip fit. Returns the rows and a
    report.md section with the per-layer agreement."""
    import time

    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.models.unisparse.export import to_nir
    from neuroedge.models.unisparse.module import fold
    from neuroedge.registry import get_backend
    from neuroedge.types import TorchProgram

    backend = get_backend("lava")
    available = backend.probe()
    if not available.ok:
        return [Report(model, "lava", rejections=(available.reason,))], []
    split = load_digits(int(cfg["seed"]))
    n, steps = min(int(cfg.get("lava_samples", 64)), len(split.y_test)), int(cfg["steps"])
    xs, labels = direct_encoding(split.x_test[:n], steps), split.y_test[:n]
    rows, table = [], {}
    for name, r in results.items():
        folded = fold(r.net).cpu()
        program = TorchProgram(
            folded,
            ("x",),
            ("logits", "spikes"),
            spec_mod.STATE_NAMES,
            folded.init_state,
            meta={"nir": lambda f=folded: to_nir(f)},
        )
        host = run_torch_program(program, {"x": xs})
        host_acc = float((host["logits"].mean(0).argmax(-1) == labels).mean())
        for mode in LAVA_MODES:
            start = time.perf_counter()
            art = backend.compile(program, spec_mod.SPEC, {"variant": mode})
            try:
                pops = art.handle.run(xs.astype(np.float32), every_population=True)
            finally:
                art.handle.close()
            seconds = time.perf_counter() - start
            spiking = art.meta["outputs"]["spikes"]  # the graph's "concat:spikes" parts
            got = np.concatenate([pops[k].reshape(steps, n, -1) for k in spiking], -1)
            if got.shape != host["spikes"].shape:
                raise ValueError(f"lava spikes {got.shape} vs host {host['spikes'].shape}")
            logits = pops[art.meta["outputs"]["logits"]]
            acc = float((logits.mean(0).argmax(-1) == labels).mean())
            cuts = np.cumsum([0] + [pops[k][0, 0].size for k in spiking])
            per_layer = [
                float((got[..., a:b] == host["spikes"][..., a:b]).mean())
                for a, b in zip(cuts[:-1], cuts[1:])
            ]
            table[(name, mode)] = dict(zip(spiking, per_layer))
            fit = art.meta["chip_fit"]
            rows.append(
                Report(
                    model,
                    "lava",
                    f"{name}/{mode}",
                    metrics={
                        "spike_agreement": Measurement(
                            float((got == host["spikes"]).mean()), "fraction", "measured"
                        ),
                        "min_layer_spike_agreement": Measurement(
                            min(per_layer), "fraction", "measured"
                        ),
                        "max_abs_err": Measurement(
                            float(np.abs(logits - host["logits"]).max()), "abs", "measured"
                        ),
                        "accuracy": Measurement(acc, "fraction", "measured"),
                        "accuracy_change_pts": Measurement(
                            100 * (acc - host_acc), "points", "measured"
                        ),
                        "loihi2_cores": Measurement(fit.cores, "cores", "counted"),
                        "loihi2_synapses": Measurement(fit.synapses, "synapses", "counted"),
                        "sim_s_per_sample": Measurement(seconds / n, "s", "measured"),
                    },
                    notes=(
                        f"{n} test digits x {steps} steps compared with host (compile + "
                        f"Loihi2SimCfg run); host accuracy on them {host_acc:.4f}",
                    ),
                )
            )
    layers = list(next(iter(table.values()))) if table else []
    lines = [
        "## Lava (Loihi 2 simulator): spike agreement with host per LIF layer",
        "",
        f"{n} test digits x {steps} steps; membrane shortcuts are summed edges with one "
        "step of synaptic delay (DelaySparse).",
        "",
        "| variant / mode | " + " | ".join(layers) + " |",
        "|---|" + "---|" * len(layers),
    ]
    lines += [
        f"| {v} / {m} | " + " | ".join(f"{a:.4f}" for a in per.values()) + " |"
        for (v, m), per in table.items()
    ]
    return rows, [*lines, ""]


def nir_check(result: VariantResult, out: Path, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Write the unisparse net as .nir, read it back and run it with neuroedge's NIR runner
    (neuroedge.export.nir_run) and with norse; compare logits and final membranes with host."""
    import nir
    import torch
    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.export.nir import write_nir
    from neuroedge.models.unisparse.export import norse_logits, to_nir
    from neuroedge.models.unisparse.module import fold
    from neuroedge.types import NIRProgram, TorchProgram

    folded = fold(result.net).cpu()
    written = to_nir(folded)
    path = write_nir(written.graph, out / "unisparse.nir")
    program = NIRProgram(nir.read(str(path)), dt=written.dt)
    split = load_digits(int(cfg["seed"]))
    xs = direct_encoding(split.x_test[:64], int(cfg["steps"]))
    host = run_torch_program(
        TorchProgram(folded, ("x",), ("logits", "spikes"), spec_mod.STATE_NAMES, folded.init_state),
        {"x": xs},
    )
    report = {
        "path": str(path),
        "nodes": len(program.graph.nodes),
        "edges": len(program.graph.edges),
        "samples": 64,
        "norse_max_abs_err": float(
            np.abs(norse_logits(program, torch.from_numpy(xs)).numpy() - host["logits"]).max()
        ),
    }
    try:
        from neuroedge.export.nir_run import run_nir
    except ImportError as err:
        report["neuroedge_nir_run"] = f"unavailable: {err}"
        return report
    ran = run_nir(program.graph, {"input": xs})
    nir_names = ["stem_lif"] + [f"b{i}_lif{j}" for i in range(len(folded.blocks)) for j in (1, 2)]
    report["neuroedge_nir_run_max_abs_err"] = max(
        [float(np.abs(ran["logits"] - host["logits"]).max())]
        + [
            float(np.abs(ran[f"{n}_v_final"] - host[f"{s}_final"]).max())
            for n, s in zip(nir_names, spec_mod.STATE_NAMES)
        ]
    )
    return report


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
    verdict = "HOLDS" if claim["holds"] else "DOES NOT HOLD"
    lines = [
        f"## Claim on digits{f' ({scope})' if scope else ''}: {verdict}",
        "",
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
    import torch
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.unisparse.measure import counter_overhead
    from neuroedge.models.unisparse.module import fold

    cfg = {**train.DEFAULTS, **config}
    torch.set_num_threads(int(cfg.get("threads", 1)))
    out = Path(out_dir)
    seeds = seed_list(cfg)
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
        cfg["seed"] = seeds[0]
    if "onnxrt" in backends:
        rows += onnx_rows("snn.unisparse", results, out, cfg)
    lava_lines: list[str] = []
    if "lava" in backends:
        lava_part, lava_lines = lava_rows("snn.unisparse", results, cfg)
        rows += lava_part
    from neuroedge.models.unisparse.data import load_digits

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
    write_report(
        doc,
        out,
        columns=COLUMNS,
        sections=[*sections, *lava_lines],
        plots=[pareto_plot],
        history=history,
    )
    for name, r in results.items():
        _save(out / "checkpoints" / f"{name}.pt", r, cfg)
    return doc


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
