"""The bench's export parity checks: each folded variant run by ONNX Runtime and by Lava (Loihi 2
simulator, floating_pt and fixed_pt) and compared with the host over every step, and the NIR
round trip of the unisparse net (neuroedge's NIR runner and norse). ``LAVA_KEYS`` are the
config keys only the Lava rows read: the bench refuses them when lava is not benchmarked or not
available (``config_values.check_backend_keys``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from neuroedge.models.unisparse.pipeline import VariantResult
from neuroedge.types import Measurement, Report, TorchProgram

if TYPE_CHECKING:
    from neuroedge.backends.base import Backend

# Read only by the Lava rows (``lava_rows``); with lava not benchmarked they were accepted,
# written into the report and never read.
LAVA_KEYS: dict[str, str] = {"lava_samples": "the test digits of the Lava rows"}


def onnx_rows(
    model: str, results: Mapping[str, VariantResult], out: Path, cfg: Mapping[str, Any]
) -> list[Report]:
    """Each folded variant exported (step form, explicit membranes) and run by ONNX Runtime:
    spike agreement (overall and worst LIF layer), Cohen's kappa (the mean of the layers' own,
    and the worst layer's), max abs error against the host over all T steps, and accuracy."""
    from neuroedge.backends.host import run_torch_program
    from neuroedge.bench.parity import compare, spike_layers
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.models.unisparse.module import fold
    from neuroedge.registry import get_backend, probed

    backend = get_backend("onnxrt")
    available = probed(backend)
    if not available.ok:
        return [Report(model, "onnxrt", rejections=(available.reason,))]
    split = load_digits(int(cfg["seed"]))
    xs = {"x": direct_encoding(split.x_test, int(cfg["steps"]))}
    rows = []
    for name, r in results.items():
        folded = fold(r.net).cpu()
        program = spec_mod.folded_program(folded)
        # the bench's own report folder: a rerun replaces its graphs (path= would refuse)
        art = backend.compile_at(
            program, spec_mod.SPEC, out / f"onnx/{name}.onnx", "step", "fp32", {}
        )
        host, got = run_torch_program(program, xs), backend.run(art, xs)
        # per LIF layer (mean and worst kappa), as the lava rows: pooled overstates it
        metrics = compare(host, got, layers=spike_layers(program))
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
    LIF layer) and its Cohen's kappa (``spike_kappa``, ``min_layer_spike_kappa``), logit
    error, accuracy on the same digits, chip fit. Returns the rows and a report.md section
    with the per-layer agreement and kappa."""
    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.models.unisparse.export import to_nir
    from neuroedge.models.unisparse.module import fold
    from neuroedge.registry import get_backend, probed

    backend = get_backend("lava")
    available = probed(backend)
    if not available.ok:
        return [Report(model, "lava", rejections=(available.reason,))], []
    split = load_digits(int(cfg["seed"]))
    n, steps = min(int(cfg.get("lava_samples", 64)), len(split.y_test)), int(cfg["steps"])
    xs, labels = direct_encoding(split.x_test[:n], steps), split.y_test[:n]
    rows, table = [], {}
    for name, r in results.items():
        folded = fold(r.net).cpu()
        program = spec_mod.folded_program(folded, nir=lambda f=folded: to_nir(f))
        host = run_torch_program(program, {"x": xs})
        host_acc = float((host["logits"].mean(0).argmax(-1) == labels).mean())
        for mode in LAVA_MODES:
            row, table[(name, mode)] = _lava_mode_row(
                model, name, mode, backend, program, xs, labels, host, host_acc
            )
            rows.append(row)
    return rows, _lava_section(table, n, steps)


def _lava_mode_row(
    model: str,
    name: str,
    mode: str,
    backend: Backend,
    program: TorchProgram,
    xs: np.ndarray,
    labels: np.ndarray,
    host: Mapping[str, np.ndarray],
    host_acc: float,
) -> tuple[Report, dict[str, tuple[float, float]]]:
    """One variant in one Lava mode against host: its row and its per-LIF-layer (agreement,
    Cohen's kappa)."""
    from neuroedge.bench.parity import layer_parity
    from neuroedge.models.unisparse import spec as spec_mod

    steps, n = xs.shape[0], len(labels)
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
    per_layer, per_kappa = layer_parity(host["spikes"], got, [pops[k][0, 0].size for k in spiking])
    fit = art.meta["chip_fit"]
    row = Report(
        model,
        "lava",
        f"{name}/{mode}",
        metrics={
            "spike_agreement": Measurement(
                float((got == host["spikes"]).mean()), "fraction", "measured"
            ),
            "min_layer_spike_agreement": Measurement(min(per_layer), "fraction", "measured"),
            # the mean of the layers' own kappas: pooled, layers at different firing rates
            # would understate the chance agreement and overstate kappa
            "spike_kappa": Measurement(float(np.mean(per_kappa)), "kappa", "measured"),
            "min_layer_spike_kappa": Measurement(min(per_kappa), "kappa", "measured"),
            "max_abs_err": Measurement(
                float(np.abs(logits - host["logits"]).max()), "abs", "measured"
            ),
            "accuracy": Measurement(acc, "fraction", "measured"),
            "accuracy_change_pts": Measurement(100 * (acc - host_acc), "points", "measured"),
            "loihi2_cores": Measurement(fit.cores, "cores", "counted"),
            "loihi2_synapses": Measurement(fit.synapses, "synapses", "counted"),
            "sim_s_per_sample": Measurement(seconds / n, "s", "measured"),
        },
        notes=(
            f"{n} test digits x {steps} steps compared with host (compile + "
            f"Loihi2SimCfg run); host accuracy on them {host_acc:.4f}",
        ),
    )
    return row, {k: (a, kappa) for k, a, kappa in zip(spiking, per_layer, per_kappa)}


def _lava_section(
    table: Mapping[tuple[str, str], Mapping[str, tuple[float, float]]], n: int, steps: int
) -> list[str]:
    """The report.md section: spike agreement with host per LIF layer, per variant and mode,
    then the same layout for Cohen's kappa (agreement beyond what the firing rates give by
    chance: a silent layer agrees 1 - rate with a firing one, but its kappa is 0)."""
    layers = list(next(iter(table.values()))) if table else []
    lines = [
        "## Lava (Loihi 2 simulator): spike agreement with host per LIF layer",
        "",
        f"{n} test digits x {steps} steps; membrane shortcuts are summed edges with one "
        "step of synaptic delay (DelaySparse). Agreement is the fraction of equal (step, "
        "neuron) slots; kappa (Cohen's) corrects it for chance agreement at the two firing "
        "rates: 1 identical, 0 no better than chance (a silent layer), < 0 anti-correlated.",
        "",
    ]
    for title, at in (("variant / mode", 0), ("variant / mode (kappa)", 1)):
        lines += [
            f"| {title} | " + " | ".join(layers) + " |",
            "|---|" + "---|" * len(layers),
        ]
        lines += [
            f"| {v} / {m} | " + " | ".join(f"{c[at]:.4f}" for c in per.values()) + " |"
            for (v, m), per in table.items()
        ]
        lines.append("")
    return lines


def nir_check(result: VariantResult, out: Path, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Write the unisparse net as .nir, read it back and run it with neuroedge's NIR runner
    (neuroedge.export.nir_run) and with norse; compare logits and final membranes with host.
    Without norse (not in the wheel's requirements) its comparison is recorded as unavailable,
    with the install line, and the rest still runs."""
    import nir
    import torch
    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse import spec as spec_mod
    from neuroedge.models.unisparse.data import direct_encoding, load_digits
    from neuroedge.export.nir import write_nir
    from neuroedge.models.unisparse.export import norse_logits, norse_missing, to_nir
    from neuroedge.models.unisparse.module import fold
    from neuroedge.types import NIRProgram

    folded = fold(result.net).cpu()
    written = to_nir(folded)
    path = write_nir(written.graph, out / "unisparse.nir")
    program = NIRProgram(nir.read(str(path)), dt=written.dt)
    split = load_digits(int(cfg["seed"]))
    xs = direct_encoding(split.x_test[:64], int(cfg["steps"]))
    host = run_torch_program(spec_mod.folded_program(folded), {"x": xs})
    report = {
        "path": str(path),
        "nodes": len(program.graph.nodes),
        "edges": len(program.graph.edges),
        "samples": 64,
    }
    missing = norse_missing()
    if missing:
        report["norse"] = f"unavailable: {missing}"
    else:
        logits = norse_logits(program, torch.from_numpy(xs)).numpy()
        report["norse_max_abs_err"] = float(np.abs(logits - host["logits"]).max())
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
