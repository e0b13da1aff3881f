"""``neuroedge bench ttt.linear_attention``: forward throughput of the three forms, side by side.

For each sequence length L the recurrent (token loop), parallel (masked) and chunked (prefix-
scan) forms of the same token-level layer are timed interleaved in one run
(``measure_side_by_side``), so machine load hits them alike and their ratio means something.
Rows ``recurrent@L=...``, ``parallel@L=...``, ``chunked@L=...`` carry ``throughput_per_s``
(tokens/s at the p50 latency: medians resist a shared machine's bursts), the speedup over the
recurrent form, achieved GFLOP/s (matmul FLOPs counted from the shapes, ``layer_flops``, over
the measured p50) and its fraction of the roofline: this machine's fp32 1024 x 1024 matmul
GFLOP/s in the same run and thread count, the faster of PyTorch's and (where onnxruntime is
installed) ONNX Runtime's, measured once before the rows (the fastest of ten calls): on a
loaded machine a row can read above 1 (ORT's L=2048 parallel form: 1.21 of a 124 GFLOP/s
roofline, ~200-220 quiet). With ``onnxrt`` among the backends, the streaming step and the
dynamic-length parallel export are timed against the host too; the step is built from the
config's variant, d_model, heads, head_dim and seed like every other row, and ``block`` is the
chunked form's block size. The config is checked first (bench_checks.checked_config).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.latency import Latency, measure_latency, measure_side_by_side
from neuroedge.models.ttt.variants import get_variant
from neuroedge.types import Measurement, Report

BENCH_DEFAULTS: dict[str, Any] = {
    "variant": "v6",
    "d_model": 64,
    "heads": 2,
    "head_dim": 32,
    "batch": 1,
    "seed": 0,
    "lengths": [256, 512, 1024, 2048, 4096, 8192],
    "repeats": 5,
    "threads": 1,
    "stream_steps": 256,
    "onnx_length": 2048,
    "block": 64,
}
FORMS = ("recurrent", "parallel", "chunked")
COLUMNS = (
    "throughput_per_s",
    "latency_p50_ms",
    "speedup_vs_recurrent",
    "speedup_vs_host",
    "gflops_per_s",
    "roofline_fraction",
    "max_abs_err",
)


def _onnxrt_matmul(size: int, threads: int) -> Callable[[], object] | None:
    """One call of ONNX Runtime's CPU MatMul on two ``size`` x ``size`` fp32 inputs with
    ``threads`` intra-op threads (no spinning, like the bench's sessions); None without
    onnxruntime or onnx."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [size, size]) for n in "abc"]
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "mm", io[:2], io[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime the SDK supports
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    feed = {n: rng.standard_normal((size, size)).astype(np.float32) for n in "ab"}
    return lambda: session.run(None, feed)


def matmul_rates(size: int = 1024, repeats: int = 10) -> dict[str, float]:
    """Measured fp32 GFLOP/s of a ``size`` x ``size`` matmul in PyTorch (``torch``) and, where
    onnxruntime is installed, in ONNX Runtime (``onnxrt``), both at torch's current thread
    count (the bench's ``threads``, 1 by default).

    The fastest of ``repeats`` calls: a roofline is what the machine can reach, and on a shared
    machine the median mostly measures the neighbours.
    """
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    calls: dict[str, Callable[[], object]] = {"torch": lambda: a @ b}
    ort_call = _onnxrt_matmul(size, torch.get_num_threads())
    if ort_call is not None:
        calls["onnxrt"] = ort_call
    rates = {}
    for name, call in calls.items():
        timing = measure_latency(call, repeats=repeats, warmup=2)
        rates[name] = 2 * size**3 / (min(timing.times_ms) / 1e3) / 1e9
    return rates


def matmul_gflops(size: int = 1024, repeats: int = 10) -> float:
    """The roofline of this run: the faster of PyTorch's and ONNX Runtime's measured matmul
    (``matmul_rates``). ONNX Runtime's single-thread matmul can be ~2x PyTorch's, and a
    roofline below what one backend reaches would put its rows above 100%."""
    return max(matmul_rates(size, repeats).values())


def layer_flops(form: str, tokens: int, cfg: Mapping[str, Any]) -> float:
    """Matmul FLOPs one forward of ``cfg["batch"]`` sequences executes (the masked form computes
    the whole L x L score matrix; the chunked form pads L to whole blocks and carries the state
    between its L/block blocks with an exclusive prefix sum done as one (L/block)^2 matmul, or
    with momentum a scan plus a second state M). Every term, projections included, is per
    sequence; elementwise work is left out but the parallel form's mask product (L^2)."""
    d, h, dm, n = int(cfg["head_dim"]), int(cfg["heads"]), int(cfg["d_model"]), tokens
    variant = get_variant(cfg.get("variant", "v6"))
    projections = 2 * n * dm * 3 * h * d + 2 * n * h * d * dm
    projections += 2 * n * dm * h * (variant.per_token_lr + variant.momentum)  # eta, alpha gates
    if form == "recurrent":
        core = 4 * n * d * d  # k^T v into the state, q S out, per token
    elif form == "parallel":
        core = 4 * n * n * d + n * n + 2 * n * d * d
    else:
        s = min(int(cfg["block"]), n)
        blocks = -(-n // s)
        padded = blocks * s
        core = 4 * padded * s * d + 4 * padded * d * d  # intra-block masked form, dW, q W_in
        if variant.momentum:  # dM and q M_in; the scan over blocks is elementwise
            core += 4 * padded * d * d
        else:  # the exclusive prefix sum of the blocks' dW
            core += 2 * blocks * blocks * d * d
    return float((projections + h * core) * int(cfg["batch"]))


def _row(
    form: str,
    tokens: int,
    timing: Latency,
    flops: float,
    roofline: float,
    speedup: float,
    err: float | None,
    backend: str = "host",
    speedup_name: str = "speedup_vs_recurrent",
) -> Report:
    p50_s = timing.percentile(50) / 1e3
    gflops = flops / p50_s / 1e9
    metrics = {
        **timing.metrics(),
        "throughput_per_s": Measurement(timing.batch / p50_s, "tokens/s"),
        speedup_name: Measurement(speedup, "x"),
        "gflops_per_s": Measurement(gflops, "GFLOP/s"),
        "roofline_fraction": Measurement(gflops / roofline, "fraction"),
    }
    if err is not None:
        metrics["max_abs_err"] = Measurement(err, "abs")
    return Report("ttt.linear_attention", backend, f"{form}@L={tokens}", metrics=metrics)


def bench_forms(
    layer: Any, cfg: Mapping[str, Any], roofline: float, progress: bool = True
) -> list[Report]:
    """The three host forms at every length, timed side by side per length."""
    import torch
    from tqdm import tqdm

    rows = []
    g = torch.Generator().manual_seed(int(cfg["seed"]))
    for tokens in tqdm(list(cfg["lengths"]), desc="ttt forms", disable=not progress):
        x = torch.randn(int(cfg["batch"]), tokens, int(cfg["d_model"]), generator=g)
        with torch.inference_mode():
            outs = {f: layer(x, f) for f in FORMS}
            fns: dict[str, Callable[[], object]] = {
                f: (lambda f=f, x=x: layer(x, f)) for f in FORMS
            }
            reps = int(cfg["repeats"])
            # block=1: the forms alternate call by call, so a burst of load hits them alike
            timings = measure_side_by_side(
                fns, repeats=reps, warmup=1, block=1, batch=int(cfg["batch"]) * tokens
            )
        base = timings["recurrent"].percentile(50)
        for f in FORMS:
            err = None if f == "recurrent" else float((outs[f] - outs["recurrent"]).abs().max())
            rows.append(
                _row(
                    f,
                    tokens,
                    timings[f],
                    layer_flops(f, tokens, cfg),
                    roofline,
                    base / timings[f].percentile(50),
                    err,
                )
            )
    return rows


def step_program(cfg: Mapping[str, Any]) -> Any:
    """The registered streaming step at the bench config's variant, sizes and seed (the
    ``step@T`` rows are labelled with this config, so they must run it)."""
    from neuroedge.models.ttt.spec import SPEC

    keys = ("variant", "d_model", "heads", "head_dim", "seed")
    return SPEC.build({**SPEC.default_config, **{k: cfg[k] for k in keys}})


def bench_stream(cfg: Mapping[str, Any], out_dir: Path) -> list[Report]:
    """The registered streaming step on host and onnxrt over many steps, side by side."""
    from neuroedge.bench.parity import compare
    from neuroedge.models.ttt.spec import SPEC
    from neuroedge.registry import get_backend

    program = step_program(cfg)
    host, ort_backend = get_backend("host"), get_backend("onnxrt")
    host_art = host.compile(program, SPEC)
    # own report folder (a rerun replaces the graph); ORT runs torch's (the host's) threads
    path, threads = Path(out_dir) / "step.onnx", {"threads": str(int(cfg["threads"]))}
    ort_art = ort_backend.compile_at(program, SPEC, path, "step", "fp32", threads)
    steps = int(cfg["stream_steps"])
    x = (
        np.random.default_rng(int(cfg["seed"]))
        .standard_normal((steps, 1, int(program.meta["config"]["d_model"])))
        .astype(np.float32)
    )
    err = compare(host.run(host_art, {"x": x}), ort_backend.run(ort_art, {"x": x}))[
        "max_abs_err"
    ].value
    timing = measure_side_by_side(
        {
            "host": lambda: host.run(host_art, {"x": x}),
            "onnxrt": lambda: ort_backend.run(ort_art, {"x": x}),
        },
        repeats=int(cfg["repeats"]),
        warmup=1,
        batch=steps,
    )
    rows = []
    for name in ("host", "onnxrt"):
        metrics = {
            **timing[name].metrics(),
            "throughput_per_s": Measurement(
                steps / (timing[name].percentile(50) / 1e3), "tokens/s"
            ),
        }
        notes: tuple[str, ...] = ()
        if name == "onnxrt":
            metrics["speedup_vs_host"] = Measurement(
                timing["host"].percentile(50) / timing["onnxrt"].percentile(50), "x"
            )
            metrics["max_abs_err"] = Measurement(err, "abs")
            why = f"streaming step with explicit state; parity over {steps} steps from S_0"
            notes = (why,)
        rows.append(
            Report("ttt.linear_attention", name, f"step@T={steps}", metrics=metrics, notes=notes)
        )
    return rows


def bench_parallel_onnx(
    cfg: Mapping[str, Any], layer: Any, out_dir: Path, roofline: float
) -> Report:
    """The dynamic-length parallel export on onnxrt against the host parallel form."""
    import torch
    from neuroedge.models.ttt.export import export_parallel_onnx, onnx_session

    tokens = int(cfg["onnx_length"])
    path = export_parallel_onnx(layer, out_dir / "parallel.onnx")
    session = onnx_session(path, threads=int(cfg["threads"]))  # the host's (torch's) count
    xs = torch.randn(1, tokens, int(cfg["d_model"]), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = layer(xs, "parallel").numpy()
        timing = measure_side_by_side(
            {
                "host": lambda: layer(xs, "parallel"),
                "onnxrt": lambda: session.run(["y"], {"x": xs.numpy()}),
            },
            repeats=int(cfg["repeats"]),
            warmup=1,
            block=int(cfg["repeats"]),
            batch=tokens,
        )
    err = float(np.abs(session.run(["y"], {"x": xs.numpy()})[0] - ref).max())
    speedup = timing["host"].percentile(50) / timing["onnxrt"].percentile(50)
    return _row(
        "parallel",
        tokens,
        timing["onnxrt"],
        layer_flops("parallel", tokens, {**cfg, "batch": 1}),  # it ran one sequence
        roofline,
        speedup,
        err,
        backend="onnxrt",
        speedup_name="speedup_vs_host",
    )


def bench(
    out_dir: str | Path,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the benchmark, write report.json/report.md/scaling.png, return the document.
    The config is checked first (bench_checks.checked_config), before any work."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.ttt.bench_checks import checked_config
    from neuroedge.models.ttt.module import TTTLayer
    from neuroedge.config_values import backend_plan
    from neuroedge.seeding import seeded, torch_threads

    cfg = checked_config(config or {}, backends)  # BENCH_DEFAULTS under the user's
    out, skipped = Path(out_dir), []
    # the caller's thread count and random state come back after the measurements
    with torch_threads(int(cfg["threads"])), seeded(int(cfg["seed"])):
        shape = (cfg["d_model"], cfg["heads"], cfg["head_dim"], cfg["variant"])
        layer = TTTLayer(*shape, chunk=1, block=cfg["block"]).eval()
        rates = matmul_rates()
        roofline = max(rates.values())
        rows = bench_forms(layer, cfg, roofline, progress)
        out.mkdir(parents=True, exist_ok=True)
        measured, reason = backend_plan("onnxrt", backends)
        if measured:
            rows += [*bench_stream(cfg, out), bench_parallel_onnx(cfg, layer, out, roofline)]
        elif reason is not None:
            skipped.append(f"onnxrt rows skipped: {reason}")
    lines = ratio_lines(rows, rates)
    for line in [*lines, *skipped]:
        print(line)
    doc = build_document(
        "ttt.linear_attention",
        rows,
        config=cfg,
        columns=list(COLUMNS),
        roofline_gflops=roofline,
        ratios=lines,
        skipped=skipped,
    )
    write_report(
        doc,
        out,
        columns=COLUMNS,
        plots=[scaling_plot],
        history=history,
        sections=["## Side-by-side ratios (same run)", "", *(f"- {s}" for s in [*lines, *skipped])],
    )
    return doc


def ratio_lines(rows: Sequence[Report], rates: Mapping[str, float]) -> list[str]:
    """The report's summary lines; the roofline is the fastest of ``rates`` (matmul_rates)."""
    measured = ", ".join(f"{k} {v:.2f}" for k, v in rates.items())
    lines = [
        f"roofline: fp32 1024x1024 matmul {max(rates.values()):.2f} GFLOP/s on this machine "
        f"(same run and threads), the fastest of {measured} GFLOP/s"
    ]
    for r in rows:
        if r.backend == "host" and not r.variant.startswith(("recurrent", "step")):
            m = r.metrics
            lines.append(
                f"{r.variant}: {m['speedup_vs_recurrent'].value:.1f}x recurrent "
                f"throughput, {m['gflops_per_s'].value:.2f} GFLOP/s "
                f"({100 * m['roofline_fraction'].value:.0f}% of roofline)"
            )
        elif r.backend == "onnxrt":
            lines.append(
                f"onnxrt {r.variant}: {r.metrics['speedup_vs_host'].value:.2f}x faster "
                "than host (p50), "
                f"max abs err {r.metrics['max_abs_err'].value:.2e}"
            )
    return lines


def scaling_plot(doc: dict[str, Any], path: Path) -> Path:
    """Tokens/s and achieved GFLOP/s against L for each host form, with the roofline."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for form in FORMS:
        pts = [
            (int(r["variant"].split("=")[1]), r["metrics"])
            for r in doc["rows"]
            if r["backend"] == "host" and r["variant"].startswith(form + "@")
        ]
        lengths = [p[0] for p in pts]
        a1.plot(lengths, [p[1]["throughput_per_s"]["value"] for p in pts], "o-", label=form)
        a2.plot(lengths, [p[1]["gflops_per_s"]["value"] for p in pts], "o-", label=form)
    a2.axhline(doc["roofline_gflops"], color="k", ls="--", label="matmul roofline")
    for ax, label in ((a1, "tokens/s"), (a2, "achieved GFLOP/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel(label)
        ax.legend()
    a1.set_title(f"{doc['model']} ({doc['config']['variant']}): forward throughput")
    return finish_figure(fig, path)
