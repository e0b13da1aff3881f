"""One prepared GPU check: every exportable model on host-CUDA, onnxrt (CUDA EP), TensorRT.

Run it as ``bash bench/gpu_check.sh`` on a machine with an NVIDIA GPU, a CUDA build of torch,
onnxruntime-gpu and tensorrt; it needs no internet. For each registered model that exports to
ONNX it builds the smoke configuration (``{"smoke": True}``; ``--full`` uses the model's
default configuration, which may train), runs the host CPU reference, then every route:

* ``host-cuda``: the same torch module on the GPU (TF32 off), explicit state stepped on device;
* ``onnxrt-cuda``: the onnxrt backend asked for CUDAExecutionProvider only (a session-level
  CPU fallback, a session running without that provider, is recorded and fails the check;
  single nodes ONNX Runtime assigns to its CPU provider only log a warning and are not seen);
* ``tensorrt-fp32|fp16|int8``: the tensorrt backend's three variants.

It prints a package table (what is missing, how to install it; the wrapper refuses to start
without the packages every checked model imports), a parity table (max abs error and spike
agreement against the host CPU reference; fp32 routes must meet the model's tolerance and agree
on every spike, fp16/int8 are reported, judged only where the model sets a
``tensorrt-fp16``/``tensorrt-int8`` tolerance; a spike output silent on both sides, as the
untrained smoke builds' are, is named in a note: its agreement proves nothing) and a latency
table: end-to-end p50/p90/p99 per call (host arrays in and out, interleaved side by side per
model), TensorRT's GPU compute p50 (CUDA events, trtexec's "GPU Compute Time") and the speedup
over host-CUDA. A time budget (default 540 s) keeps the whole run under 10 minutes: models it
cannot reach are listed as such. Reports (report.json/md, latency.png) go to
``--out/<model>/``. Exit status 0 only when every package the asked routes need was present
and every route ran and passed; 1 otherwise, each reason on a ``did not pass:`` line; 2 when
``--routes``/``--models`` leave nothing to check.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from neuroedge.bench.gpu_tables import (  # public names, kept importable from here
    FP32_ROUTES,  # noqa: F401
    PACKAGES,  # noqa: F401
    ROUTES,
    align,
    package_table,
    route_blockers,
    tables,
    verdict,
)
from neuroedge.types import Measurement, ModelSpec, Report, TorchProgram

Runner = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def device_steps(program: TorchProgram, device: str = "cuda") -> Callable[[Mapping[str, Any]], Any]:
    """``inputs -> (outputs, final states)``, tensors left on ``device``: the torch module
    there, TF32 off, explicit state kept on the device between steps. Tests pass "meta": like
    CUDA, it refuses any op that meets a CPU tensor made mid-forward."""
    import torch
    from neuroedge.backends.base import unroll

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    module = copy.deepcopy(program.module).to(device).eval()
    outputs = len(program.output_names)

    def steps(inputs: Mapping[str, Any]) -> Any:
        xs = [torch.as_tensor(inputs[n]).to(device) for n in program.input_names]
        with torch.inference_mode():
            if not program.stateful:
                ys = module(*xs)
                return (ys if isinstance(ys, (tuple, list)) else (ys,)), []
            state = [s.to(device) for s in program.init_state(int(xs[0].shape[1]))]
            return unroll(lambda args: module(*args), xs, state, outputs, torch.stack)

    return steps


def host_cuda_runner(program: TorchProgram, device: str = "cuda") -> Runner:
    """``device_steps`` on the GPU, outputs and final states returned as host arrays."""
    steps, names = device_steps(program, device), program.output_names

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        ys, final = steps(inputs)
        result = {n: y.cpu().numpy() for n, y in zip(names, ys)}
        result.update({f"{n}_final": s.cpu().numpy() for n, s in zip(program.state_names, final)})
        return result

    return run


def compile_route(route: str, spec: ModelSpec, program: Any) -> tuple[Runner, Any]:
    """A runner for ``route`` and its artifact (None for host-cuda)."""
    from neuroedge.registry import get_backend

    if route == "host-cuda":
        if not isinstance(program, TorchProgram):
            raise TypeError(f"{spec.name} builds a {program.kind} program; host-cuda runs torch")
        return host_cuda_runner(program), None
    if route == "onnxrt-cuda":
        backend = get_backend("onnxrt")
        art = backend.compile(
            program, spec, {"providers": "CUDAExecutionProvider", "form": "sequence"}
        )
    else:
        backend = get_backend("tensorrt")
        art = backend.compile(program, spec, {"variant": route.split("-")[1]})
    return (lambda inputs: backend.run(art, inputs)), art


def gpu_compute_p50(art: Any, example: Mapping[str, Any]) -> Measurement | None:
    """TensorRT's GPU compute time per call (sequence form: one engine call per example)."""
    import numpy as np
    from neuroedge.export.tensorrt import calibration_feeds

    if art is None or art.backend != "tensorrt" or art.meta.get("form") == "step":
        return None
    feed = calibration_feeds(None, art.meta, [example])[0]
    times = art.handle.compute_times_ms(feed, repeats=100)
    return Measurement(float(np.percentile(times, 50)), "ms", "measured")


def check_model(
    spec: ModelSpec,
    routes: Sequence[str],
    blocked: Mapping[str, str],
    config: Mapping[str, Any],
    repeats: int,
    deadline: float,
) -> list[Report]:
    """Parity and side-by-side latency of every route for one model."""
    from neuroedge.bench.latency import measure_side_by_side
    from neuroedge.bench.parity import require_nonzero_state
    from neuroedge.registry import get_backend
    from neuroedge.shapes import bind_inputs

    program = spec.build(dict(config))
    host = get_backend("host")
    example = spec.built_example(0, program, {**spec.default_config, **dict(config)})
    reference = host.run(host.compile(program, spec), example)
    require_nonzero_state(reference)  # else stateful parity would pass vacuously
    rows: dict[str, Report] = {}
    runners: dict[str, Runner] = {}
    for route in routes:
        if route in blocked:
            rows[route] = Report(spec.name, route, rejections=(f"not run: {blocked[route]}",))
            continue
        if time.monotonic() > deadline:
            rows[route] = Report(spec.name, route, rejections=("not run: time budget spent",))
            continue
        rows[route], run = _check_route(spec, route, program, reference, example)
        if run is not None:
            runners[route] = run
    batch = bind_inputs(spec, example).get("batch", 1)
    timings = (
        measure_side_by_side(
            {r: (lambda f=f: f(example)) for r, f in runners.items()}, repeats=repeats, batch=batch
        )
        if runners
        else {}
    )
    return [
        rows[r].with_metrics(**timings[r].metrics()) if r in timings else rows[r] for r in routes
    ]


def _check_route(
    spec: ModelSpec,
    route: str,
    program: Any,
    reference: Mapping[str, Any],
    example: Mapping[str, Any],
) -> tuple[Report, Runner | None]:
    """One route's parity row and its runner (None when it failed: the row says why); a note
    names spike outputs silent on both sides, whose agreement of 1 proves nothing."""
    from neuroedge.bench.parity import compare, silent_spike_outputs, spike_layers

    try:
        run, art = compile_route(route, spec, program)
        outputs = run(example)
        metrics = dict(compare(reference, outputs, spike_layers(program)))
        extra = gpu_compute_p50(art, example)
    # A check script reports every failure as a row and carries on; the exit status fails.
    except Exception as err:  # noqa: BLE001
        return Report(spec.name, route, rejections=(f"error: {type(err).__name__}: {err}",)), None
    if extra is not None:
        metrics["gpu_compute_p50_ms"] = extra
    silent = silent_spike_outputs(reference, outputs)
    notes = (
        (f"engine cache {art.meta['engine_cache']}",)
        if art is not None and "engine_cache" in art.meta
        else ()
    ) + ((f"no spike on either side in {', '.join(silent)}: agreement vacuous",) if silent else ())
    row = Report(
        spec.name,
        route,
        device="cuda",
        metrics=metrics,
        notes=notes,
        fallbacks=tuple(art.meta.get("fallbacks", ())) if art else (),
    )
    return row, run


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_check", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", default="reports/gpu_check", help="report folder")
    p.add_argument("--repeats", type=int, default=200, help="timed calls per route")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop starting work after")
    p.add_argument("--models", default="", help="comma list (default: every exportable)")
    p.add_argument("--routes", default=",".join(ROUTES), help="comma list of routes")
    p.add_argument("--full", action="store_true", help="default config instead of smoke")
    return p.parse_args(argv)


def run_models(
    specs: Sequence[ModelSpec],
    routes: Sequence[str],
    blocked: Mapping[str, str],
    args: argparse.Namespace,
    deadline: float,
) -> tuple[dict[str, tuple[ModelSpec, list[Report]]], list[str]]:
    """Check each model in turn; write its report; return results and what was skipped."""
    from neuroedge.bench.report import build_document, write_report
    from tqdm import tqdm

    results: dict[str, tuple[ModelSpec, list[Report]]] = {}
    skipped = [
        f"{s.name}: no ONNX export (exportable: {', '.join(s.exportable) or 'none'})"
        for s in specs
        if "onnx" not in s.exportable
    ]
    try:
        for spec in tqdm([s for s in specs if "onnx" in s.exportable], desc="gpu check"):
            config = {**spec.default_config, "smoke": False} if args.full else {"smoke": True}
            if time.monotonic() > deadline:
                skipped.append(f"{spec.name}: not run, time budget of {args.budget_s:.0f} s spent")
                continue
            try:
                rows = check_model(spec, routes, blocked, config, args.repeats, deadline)
            except Exception as err:  # noqa: BLE001 - one model's failure must not hide others
                skipped.append(
                    f"{spec.name}: error before any route ran: {type(err).__name__}: {err}"
                )
                continue
            results[spec.name] = (spec, rows)
            doc = build_document(
                spec.name,
                rows,
                config=config,
                routes=list(routes),
                columns=[
                    "max_abs_err",
                    "spike_agreement",
                    "latency_p50_ms",
                    "latency_p90_ms",
                    "latency_p99_ms",
                    "gpu_compute_p50_ms",
                ],
            )
            write_report(doc, f"{args.out}/{spec.name}", columns=doc["columns"])
    except KeyboardInterrupt:  # gpu_check.sh's hard time limit: print what was measured
        skipped.append("interrupted by the time limit: later models not run")
    return results, skipped


def requested_routes(text: str) -> list[str]:
    """The routes of ``--routes``; none, or an unknown one, is a ConfigError listing the valid
    ones (an empty list would check nothing and pass)."""
    from neuroedge.errors import ConfigError

    routes = [r.strip() for r in text.split(",") if r.strip()]
    unknown = sorted(set(routes) - set(ROUTES))
    if unknown or not routes:
        what = f"unknown routes {unknown}" if unknown else f"--routes {text!r} names no route"
        raise ConfigError(f"{what}; valid: {', '.join(ROUTES)}")
    return routes


def requested_models(text: str) -> list[ModelSpec]:
    """The specs of ``--models`` (default: every registered model; those without an ONNX
    export are listed as skipped). A named model without one is a ConfigError: no route
    could run it, and a check of nothing must not pass."""
    from neuroedge.errors import ConfigError
    from neuroedge.registry import get_model, model_names

    names = [n.strip() for n in text.split(",") if n.strip()]
    specs = [get_model(n) for n in names or model_names()]  # UnknownNameError lists them
    no_onnx = [s.name for s in specs if "onnx" not in s.exportable]
    if names and no_onnx:
        exportable = [n for n in model_names() if "onnx" in get_model(n).exportable]
        raise ConfigError(
            f"--models: {', '.join(no_onnx)} has no ONNX export, so no GPU route runs it; "
            f"models that export to ONNX: {', '.join(exportable)}"
        )
    return specs


def shortfalls(
    results: Mapping[str, tuple[ModelSpec, list[Report]]],
    skipped: Sequence[str],
    blocked: Mapping[str, str],
) -> list[str]:
    """Why the check did not pass (empty when it did): a missing package, a route that
    failed or never ran (the time budget), a model cut short, or no route run at all."""
    rows = [(spec, row) for spec, rows in results.values() for row in rows]
    why = [f"routes blocked by a missing package: {', '.join(blocked)}"] if blocked else []
    for label, want in (("failed", "FAIL"), ("not run", "NOT-RUN")):
        hit = [
            f"{spec.name} {row.backend}"
            for spec, row in rows
            if verdict(spec, row) == want and row.backend not in blocked
        ]
        why += [f"routes {label}: {', '.join(hit)}"] if hit else []
    why += [s for s in skipped if "budget" in s or "error" in s or "interrupted" in s]
    if not any(row.metrics for _, row in rows):
        why.append("no route of the requested models ran")
    return why


def main(argv: Sequence[str] | None = None) -> int:
    from neuroedge.backends.onnxrt import CALIBRATION_SEED
    from neuroedge.errors import NeuroedgeError
    from neuroedge.export.tensorrt import CALIBRATION_SAMPLES

    args = parse_args(argv)
    try:  # before any work: a check of nothing would pass
        routes, specs = requested_routes(args.routes), requested_models(args.models)
    except NeuroedgeError as err:
        print(f"gpu_check: error: {err}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget_s
    packages = package_table()
    rows = [
        ("package", "status", "detail"),
        *((n, "ok" if ok else "MISSING", d) for n, ok, d in packages),
    ]
    print(align(rows) + "\n")
    # only the asked routes' packages count: --routes host-cuda needs no TensorRT
    blocked = {r: why for r, why in route_blockers(packages).items() if r in routes}
    results, skipped = run_models(specs, routes, blocked, args, deadline)
    parity, latency = tables(results)
    print(
        f"parity vs the host CPU reference (example seed 0; int8 calibrated on seeds "
        f"{CALIBRATION_SEED}-{CALIBRATION_SEED + CALIBRATION_SAMPLES - 1})\n{parity}\n\n"
        f"latency per call (end-to-end, {args.repeats} calls per route, interleaved)\n{latency}"
    )
    for line in skipped:
        print(f"skipped {line}")
    for spec, model_rows in results.values():
        for row in model_rows:
            for reason in (*row.rejections, *row.fallbacks, *row.notes):
                print(f"{spec.name} {row.backend}: {reason}")
    why = shortfalls(results, skipped, blocked)
    print("\n" + "".join(f"did not pass: {line}\n" for line in why), end="")
    print(f"gpu check {'did not pass' if why else 'passed'}; reports in {args.out}/")
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
