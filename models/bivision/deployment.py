"""Deployment rows of ``neuroedge bench event.bivision``: the sweep's trained detector on the
host and on ONNX Runtime, side by side in one run.

The sweep (``noise_sweep.sweep_seed``) saves each seed's clean-trained classification nets
(``train_noise`` "clean", the default) as checkpoints under ``DIR/nets/seed<S>/``. With
``onnxrt`` among the bench's backends (the default), the first seed's STATNF + E2S net goes
through the SDK's generic path (``bench.runner.bench_model``): built from its checkpoint,
compiled for host (PyTorch eager) and ONNX Runtime (explicit state, T = 5 steps in one call),
timed at batch 1 (p50/p90/p99 over ``REPEATS`` calls), compared output by output with the
host reference (max abs error), and scored on ``EVAL_SAMPLES`` generated clean test recordings
(``spec.evaluate``). Rows ``statnf_e2s@deploy`` (backend host and onnxrt; a backend with
several variants keeps each in the label, e.g. ``statnf_e2s@deploy/fp16`` on tensorrt) carry
latency, throughput, accuracy, parity and the SOPs counted on the host; the summary line gives
each row's p50 ratio to host. Under torchrun only rank 0 measures them (it ran the first seed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from neuroedge.types import Report

VARIANT = "statnf_e2s"  # the paper's design
LABEL = f"{VARIANT}@deploy"
EVAL_SAMPLES = 256  # generated clean test recordings scored on each backend
REPEATS = 50  # timed calls per backend, after the runner's warm-up


def _label(variant: str) -> str:
    """A deployment row's variant: ``LABEL``, plus the backend's own variant when it has several
    (tensorrt's fp32 / fp16 / int8 give ``statnf_e2s@deploy/fp16`` etc.)."""
    return LABEL if variant == "default" else f"{LABEL}/{variant}"


def net_path(out: Path, seed: int, variant: str, task: str = "classification") -> Path:
    """Where the sweep keeps seed ``seed``'s clean-trained ``variant`` net for ``task``."""
    return Path(out) / "nets" / f"seed{seed}" / f"{variant}_{task}.pt"


def save_nets(out: Path, seed: int, trained: Mapping[tuple[str, str], Any], cfg: Mapping) -> None:
    """Checkpoints (state_dict + config, as ``neuroedge train`` writes them) of the nets in
    ``trained`` (keyed by (variant, task))."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.bivision.train import REPRESENTATION_VERSION

    for (variant, task), net in trained.items():
        config = {**cfg, "variant": variant, "task": task, "seed": seed}
        payload = {"state_dict": net.state_dict(), "config": _plain(config)}
        save_checkpoint(
            net_path(out, seed, variant, task),
            {**payload, "representation_version": REPRESENTATION_VERSION},
        )


def remove_nets(out: Path, seed: int) -> None:
    """Delete the nets ``save_nets`` may have left for ``seed`` under ``out`` (any variant and
    task), so that whatever is there after a sweep is that sweep's."""
    from neuroedge.models.bivision.bench_settings import SWEEP_VARIANTS
    from neuroedge.models.bivision.data import TASKS

    for variant in SWEEP_VARIANTS:
        for task in TASKS:
            net_path(out, seed, variant, task).unlink(missing_ok=True)


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    import json

    return json.loads(json.dumps(dict(cfg)))  # numbers, strings, lists only (weights_only)


def deployment_rows(
    out: Path, seed: int, backends: Sequence[str], progress: bool = False
) -> tuple[list[Report], str | None]:
    """``statnf_e2s@deploy`` rows on host and the other asked backends, and the summary line;
    no rows (and the reason as the line) when the sweep saved no net for ``seed``."""
    from neuroedge.bench.runner import bench_model, speedups
    from neuroedge.models.bivision.spec import SPEC

    others = [b for b in backends if b != "host"]
    if not others:
        return [], None
    path = net_path(out, seed, VARIANT)
    if not path.is_file():
        return [], (
            f"deployment rows: none, this run saved no clean-trained net of seed {seed} at "
            f"{path} (train_noise=same trains one net per rate; run with train_noise=clean)"
        )
    config = {"checkpoint": str(path), "eval_samples": EVAL_SAMPLES, "seed": seed}
    rows = [
        replace(r, variant=_label(r.variant))
        for r in bench_model(
            SPEC, ["host", *others], config=config, repeats=REPEATS, progress=progress
        )
    ]
    ratios = speedups(rows)  # keyed "<label>/<backend>": one key per row (variant kept)
    parts = []
    host = next(r for r in rows if r.backend == "host")
    for row in rows:
        ratio = ratios.get(f"{row.variant}/{row.backend}")
        if row.backend == "host" or ratio is None:
            continue
        m = row.metrics
        name = row.backend + row.variant.removeprefix(LABEL).replace("/", " ")
        parts.append(
            f"{name} {ratio:.2f}x faster than host "
            f"({m['latency_p50_ms'].value:.3g} vs {host.metrics['latency_p50_ms'].value:.3g} ms"
            f" at batch 1 over T=5), accuracy {m['accuracy'].value:.3f} vs "
            f"{host.metrics['accuracy'].value:.3f} on {EVAL_SAMPLES} recordings, max abs err "
            f"{m['max_abs_err'].value:.2g}"
        )
    reasons = [f"{r.backend}: {why}" for r in rows for why in (*r.rejections, *r.fallbacks)]
    line = f"deployment (seed {seed}'s STATNF + E2S net): " + "; ".join(parts + reasons)
    return rows, line
