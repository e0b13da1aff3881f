"""The generic benchmark of one model across backends, measured side by side in one run.

For each backend: probe and supports (a refusal becomes a row with its reason), compile,
parity with the host reference over the example's T steps, task metrics through the model's
``evaluate`` hook, and latency interleaved call by call with every other backend. SOPs, MACs
and firing rate are counted on the host reference with forward hooks while it evaluates; they
describe the network, so other backends' rows carry the same counts (noted as such).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from neuroedge.bench.energy import HOROWITZ_45NM, EnergyModel
from neuroedge.bench.latency import measure_side_by_side
from neuroedge.bench.parity import (
    compare,
    require_nonzero_state,
    silent_spike_outputs,
    spike_layers,
)
from neuroedge.bench.sops import OpCounter
from neuroedge.errors import NeuroedgeError
from neuroedge.registry import get_backend, probed
from neuroedge.shapes import bind_inputs
from neuroedge.types import Measurement, ModelSpec, Report, TorchProgram

COUNTED = (
    "sops_per_sample",
    "macs_per_sample",
    "sops_per_sample_no_first",
    "firing_rate",
    "energy_uj",
)


def count_metrics(
    program: Any, spec: ModelSpec, config: Mapping[str, Any], run: Any, energy: EnergyModel
) -> dict[str, Measurement]:
    """Task metrics from the host run, plus SOPs/MACs/energy/firing rate counted on the way."""
    if not isinstance(program, TorchProgram) or spec.evaluate is None:
        return dict(spec.evaluate(run, config)) if spec.evaluate else {}
    seen = {"samples": 0}

    def counting_run(inputs: dict[str, Any]) -> Mapping[str, Any]:
        seen["samples"] += bind_inputs(spec, inputs).get("batch", 1)
        return run(inputs)

    with OpCounter(program.module) as counter:
        metrics = dict(spec.evaluate(counting_run, config))
    metrics.update(ops_metrics(counter.totals(max(seen["samples"], 1)), energy))
    return metrics


def ops_metrics(ops: Any, energy: EnergyModel = HOROWITZ_45NM) -> dict[str, Measurement]:
    """The COUNTED metrics of an ``OpCounter.totals`` result."""
    return {
        "sops_per_sample": Measurement(ops.sops_per_sample, "SOP", "counted"),
        "macs_per_sample": Measurement(ops.macs_per_sample, "MAC", "counted"),
        "sops_per_sample_no_first": Measurement(ops.sops_per_sample_no_first, "SOP", "counted"),
        "firing_rate": Measurement(ops.firing_rate, "spikes/neuron/step", "measured"),
        "energy_uj": energy.measurement(ops.macs_per_sample, ops.sops_per_sample),
    }


@dataclass(frozen=True)
class BenchRun:
    """A generic bench's rows, the config the program was built and evaluated with (the
    defaults, the caller's keys and what the build settled, e.g. a checkpoint's training
    settings) and its weights (``provenance.weights_record``: None where it says none)."""

    rows: list[Report]
    config: dict[str, Any]
    weights: dict[str, Any] | None


def bench_model(spec: ModelSpec, backends: Sequence[str], **options: Any) -> list[Report]:
    """One Report per (backend, variant), in the order given; a backend lists its variants in
    a ``variants`` class attribute (compiled with ``{"variant": name}``); unavailable or
    refusing backends give rows with the reason. ``options``: ``bench_run``'s (config,
    repeats, energy, progress); ``bench_run`` says what ran, too."""
    return bench_run(spec, backends, **options).rows


def bench_run(
    spec: ModelSpec,
    backends: Sequence[str],
    *,
    config: Mapping[str, Any] | None = None,
    repeats: int = 50,
    energy: EnergyModel = HOROWITZ_45NM,
    progress: bool = True,
) -> BenchRun:
    """``bench_model``'s rows with the settled config and the weights, for report.json."""
    from neuroedge.bench.provenance import weights_record

    cfg = {**spec.default_config, **(config or {})}
    program = spec.build(cfg)
    meta = getattr(program, "meta", None) or {}
    # the example and evaluate follow what the build settled (its meta["config"]: e.g. the
    # checkpoint's split), not the checkpoint file read again: another process may replace it
    cfg = {**cfg, **(meta.get("config") or {})}
    host = get_backend("host")
    host_art = host.compile(program, spec)
    example = spec.example_for(0, cfg)
    reference = host.run(host_art, example)
    require_nonzero_state(reference)
    rows, artifacts = _compile_rows(
        spec, backends, cfg, program, host_art, reference, example, energy, progress
    )
    counts = _host_counts(spec, cfg, program, host_art, rows, energy)
    timed = _timed_rows(spec, backends, rows, artifacts, example, repeats, counts)
    return BenchRun(timed, cfg, weights_record(meta))


def _host_counts(
    spec: ModelSpec,
    cfg: Mapping[str, Any],
    program: Any,
    host_art: Any,
    rows: dict[tuple[str, str], Report],
    energy: EnergyModel,
) -> dict[str, Measurement]:
    """The COUNTED metrics every row takes from the host reference: its row's, or, when host
    is not among the benched backends but another backend ran, one counted host evaluation
    (the rows' note says they were counted on the host; they must not go missing)."""
    if ("host", "default") in rows:
        return {k: v for k, v in rows[("host", "default")].metrics.items() if k in COUNTED}
    ran = [k for k, r in rows.items() if k[0] != "null" and not r.rejections]
    if not ran:
        return {}
    host = get_backend("host")
    counted = count_metrics(program, spec, cfg, lambda i: host.run(host_art, i), energy)
    return {k: v for k, v in counted.items() if k in COUNTED}


def _compile_rows(
    spec: ModelSpec,
    backends: Sequence[str],
    cfg: Mapping[str, Any],
    program: Any,
    host_art: Any,
    reference: Mapping[str, Any],
    example: Mapping[str, Any],
    energy: EnergyModel,
    progress: bool,
) -> tuple[dict[tuple[str, str], Report], dict[tuple[str, str], Any]]:
    """Per (backend, variant): its row before timing (or rejection), and the compiled artifacts."""
    from tqdm import tqdm

    rows: dict[tuple[str, str], Report] = {}
    artifacts: dict[tuple[str, str], Any] = {}
    for name in tqdm(backends, desc=f"bench {spec.name}", disable=not progress):
        backend = get_backend(name)
        availability, support = probed(backend), backend.supports(spec)
        if not availability.ok or not support.ok:
            reason = availability.reason if not availability.ok else support.reason
            rows[(name, "default")] = Report(spec.name, name, rejections=(reason,))
            continue
        for variant in getattr(backend, "variants", ("default",)):
            key = (name, variant)
            try:
                art = (
                    host_art
                    if name == "host"
                    else backend.compile(
                        program, spec, {} if variant == "default" else {"variant": variant}
                    )
                )
            except NeuroedgeError as err:
                rows[key] = Report(
                    spec.name, name, variant, rejections=(f"compile refused: {err}",)
                )
                continue
            artifacts[key] = art
            rows[key] = _measure_row(
                spec, cfg, backend, art, variant, program, reference, example, energy
            )
    return rows, artifacts


def _timed_rows(
    spec: ModelSpec,
    backends: Sequence[str],
    rows: dict[tuple[str, str], Report],
    artifacts: dict[tuple[str, str], Any],
    example: Mapping[str, Any],
    repeats: int,
    host_counts: Mapping[str, Measurement],
) -> list[Report]:
    """The rows with latency measured side by side and the host's counted metrics added."""
    from neuroedge.seeding import one_thread

    batch = bind_inputs(spec, example).get("batch", 1)
    # torch on one intra-op thread, as ONNX Runtime's sessions (threads=1): on the default
    # thread count the host row timed two torch threads against one (p90 up to 0.9 s here)
    with one_thread():
        timings = measure_side_by_side(
            {
                key: (lambda b=get_backend(key[0]), a=a: b.run(a, example))
                for key, a in artifacts.items()
                if key[0] != "null"
            },
            repeats=repeats,
            batch=batch,
        )
    steps = _steps_per_call(backends, spec, example)
    out = []
    for key, row in rows.items():
        if key in timings:
            timed = timings[key].metrics()
            if steps:  # a backend asked for simulated time steps per second (e.g. lava)
                per_s = timed["throughput_per_s"].value * steps
                timed["throughput_per_s"] = Measurement(per_s, "time steps/s", "measured")
            taken = {k: v for k, v in host_counts.items() if k not in row.metrics}
            row = row.with_metrics(**timed, **taken)
            if taken and key[0] != "host":
                note = "SOPs, MACs, firing rate and energy counted on the host reference"
                row = replace(row, notes=(note, *row.notes))
        elif key[0] == "null" and key in artifacts:
            fake = get_backend("null").profile(artifacts[key], example, repeats=3)
            row = Report(spec.name, "null", metrics=fake.metrics, notes=row.notes + fake.notes)
        out.append(row)
    return out


def _steps_per_call(backends: Sequence[str], spec: ModelSpec, example: Mapping[str, Any]) -> int:
    """T (time steps per call) when a benched backend declares ``throughput_unit = "steps"``,
    so every row of the run reports simulated steps/s side by side; else 0 (samples/s)."""
    from neuroedge.registry import backend_table

    wants = any(
        getattr(get_backend(n), "throughput_unit", "samples") == "steps"
        for n in backends
        if n in backend_table()
    )
    return int(bind_inputs(spec, example).get("T", 0)) if wants else 0


def _measure_row(
    spec: ModelSpec,
    cfg: Mapping[str, Any],
    backend: Any,
    art: Any,
    variant: str,
    program: Any,
    reference: Mapping[str, Any],
    example: Mapping[str, Any],
    energy: EnergyModel,
) -> Report:
    """Task metrics and parity of one compiled artifact (latency is added afterwards)."""
    name = backend.name
    if name == "null":
        return Report(
            spec.name,
            name,
            variant,
            notes=("null backend: fake timing and zero outputs; no task metrics or parity",),
        )
    run = lambda inputs: backend.run(art, inputs)
    meta = getattr(program, "meta", {}) or {}
    weights = (
        f"weights: {meta['checkpoint']}"
        if meta.get("trained") and meta.get("checkpoint")
        else "weights: untrained (random initialisation)"
        if meta.get("trained") is False
        else None
    )
    if name == "host":
        metrics = count_metrics(program, spec, cfg, run, energy)
        notes: tuple[str, ...] = (weights,) if weights else ()
    else:
        metrics = dict(spec.evaluate(run, cfg)) if spec.evaluate else {}
        parity, breaches = check_parity(
            spec, name, variant, reference, run(example), layers=spike_layers(program)
        )
        metrics.update(parity)
        notes = tuple(breaches)  # _timed_rows adds the host's counts, and says so
    return Report(
        spec.name,
        name,
        variant,
        device=str(art.meta.get("device", "cpu")),
        metrics=metrics,
        fallbacks=tuple(art.meta.get("fallbacks", ())),
        notes=notes,
    )


def check_parity(
    spec: ModelSpec,
    backend: str,
    variant: str,
    reference: Mapping[str, Any],
    outputs: Mapping[str, Any],
    layers: Mapping[str, Sequence[int]] | None = None,
) -> tuple[dict[str, Measurement], list[str]]:
    """``compare`` plus ``within_tolerance`` (1 or 0: the spec's tolerance for this backend
    and full spike agreement), and a "parity: ..." note for each breach and for reference
    outputs the backend did not return (those are not compared). ``layers``: the program's
    concatenated spike outputs' layers (``parity.spike_layers``), scored per layer."""
    metrics = compare(reference, outputs, layers)
    tol = spec.tolerance_for(backend)
    err = metrics["max_abs_err"].value
    agree = metrics["spike_agreement"].value if "spike_agreement" in metrics else 1.0
    notes = []
    if err > tol:
        notes.append(
            f"parity: max abs error {err:.3g} exceeds {spec.name}'s tolerance "
            f"{tol:.3g} for {backend}" + (f" ({variant})" if variant != "default" else "")
        )
    if agree < 1.0:
        notes.append(
            f"parity: spike agreement {agree:.4f} < 1 on {backend}"
            + (f" ({variant})" if variant != "default" else "")
        )
    silent = silent_spike_outputs(reference, outputs)
    if silent:
        notes.append(
            f"parity: no spikes in {', '.join(silent)} on either side: their agreement is "
            "vacuous (use a stronger input)"
        )
    missing = sorted(set(reference) - set(outputs))
    if missing:
        notes.append(f"parity: {backend} returned no {', '.join(missing)} (not compared)")
    metrics["within_tolerance"] = Measurement(
        float(err <= tol and agree == 1.0), "bool", "measured"
    )
    return metrics, notes


def speedups(rows: Sequence[Report], reference: str = "host") -> dict[str, float]:
    """p50 latency of ``reference`` divided by each row's p50 (measured rows only)."""
    ref = next((r for r in rows if r.backend == reference and "latency_p50_ms" in r.metrics), None)
    if ref is None:
        return {}
    base = ref.metrics["latency_p50_ms"].value
    return {
        f"{r.variant}/{r.backend}": base / r.metrics["latency_p50_ms"].value
        for r in rows
        if "latency_p50_ms" in r.metrics and r.metrics["latency_p50_ms"].how == "measured"
    }
