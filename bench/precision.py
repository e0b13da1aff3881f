"""Reduced-precision graphs against float32, on ONNX Runtime's CPU, before any GPU is involved.

    python -m neuroedge.bench.precision [--model snn.lif_convnet] [--calibration 8] [--samples 10]

Exports the model's sequence-form graph, prepares the fp16 and int8 (Q/DQ, calibrated on the
model's own examples) graphs that the TensorRT backend builds engines from, runs all three on
the same held-out examples (seeds from 100, never used for calibration) and prints, per
output, the spike agreement (spiking outputs) or the max abs error relative to the float32
output's largest magnitude. The model's trained checkpoint is used when one exists (``make
demo`` writes the lif_convnet one); otherwise its untrained weights, said so in the output.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

VARIANTS = ("fp16", "int8")


def _metric(output: str) -> str:
    """What ``compare`` reports for one output: spike trains agree, values differ."""
    return "spike_agreement" if output.startswith("spikes") else "max_rel_err"


def compare_precisions(
    model: str = "snn.lif_convnet",
    calibration: int = 8,
    samples: int = 10,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"weights": ..., "outputs": {variant: {output: {"metric", "value"}}}}``; ``config``
    overrides the model's default build config."""
    from neuroedge.backends.onnxrt import open_session
    from neuroedge.bench.parity import compare
    from neuroedge.export.tensorrt import calibration_feeds, prepare_precision
    from neuroedge.registry import get_backend, get_model

    if calibration < 1 or samples < 1:
        raise ValueError(f"calibration ({calibration}) and samples ({samples}) must be >= 1")
    spec = get_model(model)
    program = spec.build({**spec.default_config, **(config or {})})
    meta = getattr(program, "meta", {}) or {}
    weights = meta.get("checkpoint") if meta.get("trained") else "untrained"
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
        feeds = calibration_feeds(None, art.meta, [spec.example(s) for s in range(calibration)])
        graphs = {v: prepare_precision(art.path, v, tmp, feeds) for v in VARIANTS}
        sessions = {v: open_session(p, "CPUExecutionProvider")[0] for v, p in graphs.items()}
        reference = open_session(art.path, "CPUExecutionProvider")[0]
        names = art.meta["outputs"]
        sums: dict[str, dict[str, list[float]]] = {v: {n: [] for n in names} for v in VARIANTS}
        for seed in range(100, 100 + samples):
            feed = calibration_feeds(None, art.meta, [spec.example(seed)])[0]
            ref = dict(zip(names, reference.run(None, feed)))
            for v, sess in sessions.items():
                got = dict(zip(names, sess.run(None, feed)))
                for n in names:
                    sums[v][n].append(compare({n: ref[n]}, {n: got[n]})[_metric(n)].value)
    outputs = {
        v: {
            n: {
                "metric": _metric(n),
                "value": float(np.mean(vals)) if n.startswith("spikes") else float(np.max(vals)),
            }
            for n, vals in per.items()
        }
        for v, per in sums.items()
    }
    return {
        "model": model,
        "weights": weights,
        "calibration": calibration,
        "samples": samples,
        "outputs": outputs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m neuroedge.bench.precision",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="snn.lif_convnet")
    p.add_argument("--calibration", type=int, default=8, help="examples that calibrate int8")
    p.add_argument("--samples", type=int, default=10, help="held-out examples compared")
    args = p.parse_args(argv)
    result = compare_precisions(args.model, args.calibration, args.samples)
    print(
        f"{result['model']} (weights: {result['weights']}), int8 calibrated on "
        f"{result['calibration']} examples, {result['samples']} held-out examples"
    )
    for variant, per in result["outputs"].items():
        for name, row in per.items():
            print(f"{variant:<5} {name:<12} {row['metric']:<16} {row['value']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
