"""Reduced-precision graphs against float32, on ONNX Runtime's CPU, before any GPU is involved.

    python -m neuroedge.bench.precision [--model snn.lif_convnet] [--calibration 16] [--samples 10]
        [--repeats 200]

Exports the model's sequence-form graph, prepares the fp16 and int8 (Q/DQ, calibrated on the
model's own examples of the seeds the onnxrt and tensorrt backends calibrate on,
``calibration_seeds``: 1000 on, 16 by default as there, training digits for the dataset
models) graphs that the TensorRT backend builds
engines from, runs all three on the same held-out examples (seeds 100 on, never used for
calibration) and prints, per
output, the spike agreement (spiking outputs) or the max abs error relative to the float32
output's largest magnitude, with the support agreement (entries zero in both or nonzero in
both) of an output whose reference has exact zeros: vla.specprune's ``scores`` are 0 for pruned
tokens, so one flipped selection shows as a relative error of ~1 while the kept tokens' scores
agree to 1e-3; then times the three graphs side by side in one run (batch 1, one
thread, calls interleaved round-robin so the machine's noise falls on all three alike) and
prints each p50 and its speed-up over float32 (on the last held-out example). The model's
trained checkpoint is used when one exists (``make demo`` writes the lif_convnet one);
otherwise its untrained weights, said so in the output: the bench never trains one (that
takes 17 s for lif_convnet, 11-20 min for vla.specprune) unless ``--config
train_if_missing=true`` asks for it. A model that has no untrained build without ``smoke``
(vla.specprune) is refused naming the training command; ``--config smoke=true`` runs it
untrained.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

VARIANTS = ("fp16", "int8")
HELD_OUT_FROM = 100  # the first held-out seed; calibration seeds start at CALIBRATION_SEED


def _metric(output: str) -> str:
    """What ``compare`` reports for one output: spike trains agree, values differ."""
    return "spike_agreement" if output.startswith("spikes") else "max_rel_err"


def _interleaved_p50(sessions: dict[str, Any], feed: dict[str, Any], repeats: int) -> dict:
    """p50 ms of each session on ``feed``, calls interleaved round-robin after a warm-up."""
    import time

    times: dict[str, list[float]] = {v: [] for v in sessions}
    for sess in sessions.values():
        for _ in range(5):
            sess.run(None, feed)
    for _ in range(repeats):
        for v, sess in sessions.items():
            start = time.perf_counter()
            sess.run(None, feed)
            times[v].append(1e3 * (time.perf_counter() - start))
    return {v: float(np.median(t)) for v, t in times.items()}


def _support_agreement(ref: Any, got: Any) -> float:
    """Fraction of entries that are zero in both or nonzero in both."""
    return float(np.mean((np.asarray(ref) == 0) == (np.asarray(got) == 0)))


def _compare_outputs(
    reference: Any, sessions: dict[str, Any], names: list[str], feeds: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]]]:
    """Per variant and output, ``_metric`` of each feed against the float32 reference, and
    the support agreement of each value output whose reference has exact zeros (a pruned
    token's score, a silent ReLU): which entries are zero can flip where values barely move."""
    from neuroedge.bench.parity import compare

    sums: dict[str, dict[str, list[float]]] = {v: {n: [] for n in names} for v in sessions}
    support: dict[str, dict[str, list[float]]] = {v: {} for v in sessions}
    for feed in feeds:
        ref = dict(zip(names, reference.run(None, feed)))
        for v, sess in sessions.items():
            got = dict(zip(names, sess.run(None, feed)))
            for n in names:
                sums[v][n].append(compare({n: ref[n]}, {n: got[n]})[_metric(n)].value)
                if _metric(n) == "max_rel_err" and np.any(np.asarray(ref[n]) == 0):
                    support[v].setdefault(n, []).append(_support_agreement(ref[n], got[n]))
    return sums, support


def _summarise(
    sums: dict[str, dict[str, list[float]]], support: dict[str, dict[str, list[float]]]
) -> dict[str, dict[str, dict]]:
    """Per variant and output: mean spike agreement, or the worst relative error (with the
    mean support agreement where the reference has zeros)."""
    out: dict[str, dict[str, dict]] = {}
    for v, per in sums.items():
        out[v] = {}
        for n, vals in per.items():
            spiking = n.startswith("spikes")
            row = {"metric": _metric(n), "value": float(np.mean(vals) if spiking else np.max(vals))}
            if n in support[v]:
                row["support_agreement"] = float(np.mean(support[v][n]))
            out[v][n] = row
    return out


def _build(spec: Any, config: dict[str, Any] | None) -> tuple[dict[str, Any], Any, str]:
    """(build config, program, its weights: the checkpoint, or "untrained"). A model whose
    default config trains when no checkpoint exists does not here: a precision comparison
    must not start a training run (minutes for vla.specprune) unless the config asks."""
    cfg = {**spec.default_config, **(config or {})}
    if "train_if_missing" in cfg and "train_if_missing" not in (config or {}):
        cfg["train_if_missing"] = False
    program = spec.build(cfg)
    meta = getattr(program, "meta", {}) or {}
    weights = (meta.get("checkpoint") or "trained") if meta.get("trained") else "untrained"
    return cfg, program, weights


def _untrained_hint(model: str) -> str:
    """Why the weights are untrained and, where the model's build can load a checkpoint
    (it reads ``train_if_missing``), how to measure trained ones."""
    from neuroedge.registry import get_model

    keys = get_model(model).valid_config_keys("build") or set()
    if "train_if_missing" not in keys and "checkpoint" in keys:
        return (
            f"untrained weights: asked for, or no checkpoint (`neuroedge train {model}` first, or "
            "--config checkpoint=PATH)"
        )
    if "train_if_missing" not in keys:
        return f"untrained weights: {model}'s build loads no checkpoint (it has none to train)"
    return (
        "untrained weights: the config asks for them (smoke, untrained) or there is no "
        f"checkpoint, and this bench trains none (`neuroedge train {model}`, or "
        "--config train_if_missing=true, first)"
    )


def _check_counts(calibration: int, samples: int, repeats: int) -> None:
    """ValueError for a count below 1, or held-out seeds that would reach the calibration
    seeds (CALIBRATION_SEED on)."""
    from neuroedge.backends.onnxrt import CALIBRATION_SEED

    if min(calibration, samples, repeats) < 1:
        raise ValueError(
            f"calibration ({calibration}), samples ({samples}), repeats ({repeats}) must be >= 1"
        )
    if HELD_OUT_FROM + samples > CALIBRATION_SEED:
        raise ValueError(
            f"samples ({samples}): held-out seeds from {HELD_OUT_FROM} must stay below the "
            f"calibration seeds from {CALIBRATION_SEED}"
        )


def compare_precisions(
    model: str = "snn.lif_convnet",
    calibration: int = 16,
    samples: int = 10,
    config: dict[str, Any] | None = None,
    repeats: int = 200,
) -> dict[str, Any]:
    """``{"weights": ..., "outputs": {variant: {output: {"metric", "value"}}},
    "latency_p50_ms": {variant: ms}, "speedup_vs_fp32": {variant: x}}``; ``config``
    overrides the model's default build config; ``repeats`` timed calls per graph."""
    from neuroedge.backends.onnxrt import open_session
    from neuroedge.export.tensorrt import calibration_feeds, prepare_precision
    from neuroedge.registry import get_backend, get_model

    from neuroedge.backends.onnxrt import calibration_examples, calibration_seeds

    _check_counts(calibration, samples, repeats)
    spec = get_model(model)
    spec.check_config(config, "build")
    if "onnx" not in spec.exportable:
        raise ValueError(f"{model} has no ONNX export (exportable: {list(spec.exportable)})")
    cfg, program, weights = _build(spec, config)
    with tempfile.TemporaryDirectory() as tmp:
        art = get_backend("onnxrt").compile(
            program,
            spec,
            {
                "form": "sequence",
                "path": str(Path(tmp) / "fp32.onnx"),
                "providers": "CPUExecutionProvider",
            },
        )
        seeds = calibration_seeds("int8", calibration)  # what the shipped int8 graph sees
        examples = calibration_examples(spec, program, seeds, cfg)
        feeds = calibration_feeds(None, art.meta, examples)
        graphs = {v: prepare_precision(art.path, v, tmp, feeds) for v in VARIANTS}
        sessions = {v: open_session(p, "CPUExecutionProvider")[0] for v, p in graphs.items()}
        reference = open_session(art.path, "CPUExecutionProvider")[0]
        first = HELD_OUT_FROM
        held_out = [spec.built_example(s, program, cfg) for s in range(first, first + samples)]
        held_out = calibration_feeds(None, art.meta, held_out)
        sums, support = _compare_outputs(reference, sessions, art.meta["outputs"], held_out)
        p50 = _interleaved_p50({"fp32": reference, **sessions}, held_out[-1], repeats)
        sizes = {"fp32": Path(str(art.path)).stat().st_size}
        sizes.update({v: Path(g).stat().st_size for v, g in graphs.items()})
    return {
        "model": model,
        "weights": weights,
        "calibration": calibration,
        "calibration_seeds": [seeds[0], seeds[-1]],
        "samples": samples,
        "held_out_seeds": [first, first + samples - 1],
        "outputs": _summarise(sums, support),
        "graph_bytes": sizes,
        "latency_p50_ms": p50,
        "speedup_vs_fp32": {v: p50["fp32"] / p50[v] for v in VARIANTS},
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m neuroedge.bench.precision",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="snn.lif_convnet")
    p.add_argument("--calibration", type=int, default=16, help="examples that calibrate int8")
    p.add_argument("--samples", type=int, default=10, help="held-out examples compared")
    p.add_argument("--repeats", type=int, default=200, help="timed calls per graph")
    from neuroedge.cli_args import add_config_option, config_items

    add_config_option(p, "build config (repeatable)")
    args = p.parse_args(argv)
    from neuroedge.errors import NeuroedgeError

    try:
        config = config_items(args.config)
        result = compare_precisions(
            args.model, args.calibration, args.samples, config, repeats=args.repeats
        )
    except (NeuroedgeError, ValueError, OSError) as err:
        print(f"neuroedge.bench.precision: error: {err}", file=sys.stderr)
        return 2
    first, last = result["held_out_seeds"]
    low, high = result["calibration_seeds"]
    print(
        f"{result['model']} (weights: {result['weights']}), int8 calibrated on "
        f"{result['calibration']} examples (seeds {low}-{high}), "
        f"{result['samples']} held-out examples (seeds {first}-{last})"
    )
    if result["weights"] == "untrained":
        print(_untrained_hint(result["model"]))
    for variant, per in result["outputs"].items():
        for name, row in per.items():
            line = f"{variant:<5} {name:<12} {row['metric']:<16} {row['value']:.4f}"
            if "support_agreement" in row:  # which entries are zero (pruned tokens) agree
                line += f"  support agreement {row['support_agreement']:.4f}"
            print(line)
    fp32 = result["latency_p50_ms"]["fp32"]
    print(f"latency p50, batch 1, one thread, same run: fp32 {fp32:.3f} ms", end="")
    for variant in VARIANTS:
        ms, x = result["latency_p50_ms"][variant], result["speedup_vs_fp32"][variant]
        print(f"; {variant} {ms:.3f} ms ({x:.2f}x)", end="")
    print()
    print("graph bytes: " + ", ".join(f"{v} {b:,}" for v, b in result["graph_bytes"].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
