"""The ``neuroedge`` command: list, info, doctor, train, export, bench, run, nir."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from neuroedge.cli_args import add_config_options, backend_items
from neuroedge.cli_args import bench_backends as _bench_backends
from neuroedge.cli_args import config_items as _config
from neuroedge.cli_run import add_run_parser, seed_value
from neuroedge.config_values import check_seed_keys
from neuroedge.errors import NeuroedgeError, PluginError
from neuroedge.registry import available_backends, get_model, model_names
from neuroedge.cli_exit import (  # noqa: F401 (the exit codes stay importable from here)
    EXIT_INTERRUPTED,
    EXIT_READER_GONE,
    command_status,
)


def cmd_list(args: argparse.Namespace) -> int:
    for name in model_names():
        try:
            spec = get_model(name)
        except PluginError as err:  # one broken plugin must not hide every other model
            print(f"{name:<28} {'broken':<9} {err}")
            continue
        print(f"{name:<28} {spec.family:<9} {spec.summary}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    spec = get_model(args.name)
    print(f"name:       {spec.name}\nfamily:     {spec.family}\nsummary:    {spec.summary}")
    if spec.paper:
        venue = spec.paper.venue  # "ICML 2026" already says the year
        when = venue if str(spec.paper.year) in venue else f"{venue} {spec.paper.year}"
        print(f"paper:      {spec.paper.title} ({when}) {spec.paper.url}")
    print("inputs:     " + ", ".join(io.describe() for io in spec.inputs))
    if spec.recording is not None:
        print("recordings: run --events FILE (.raw EVT 2/3, .dat, .bin, .aedat4) makes the input")
    print("outputs:    " + ", ".join(io.describe() for io in spec.outputs))
    print(
        f"efficiency: {spec.efficiency.op_unit}"
        + (
            f", {spec.efficiency.ops_per_sample:g} per sample"
            if spec.efficiency.ops_per_sample
            else ""
        )
    )
    print(f"exports:    {', '.join(spec.exportable) or 'none'}")
    print(f"tolerance:  {dict(spec.tolerance) or 'default 1e-4'}")
    print(
        "bench:      "
        + (
            f"its own, on {', '.join(spec.bench_backends)}"
            + ("; seeds=[...] shares out over torchrun" if spec.seed_sweep else "")
            if spec.bench
            else "the generic latency/parity bench, any backend"
        )
    )
    for use, label in (("build", "run/export"), ("train", "train"), ("bench", "bench")):
        keys = spec.valid_config_keys(use)
        if keys is not None:
            print(f"config ({label}): {', '.join(sorted(keys)) or 'none'}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    for name, availability in available_backends().items():
        state = "available" if availability.ok else "missing"
        print(f"{name:<10} {state:<10} {availability.reason}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    spec = get_model(args.name)
    train = spec.hook("train")
    if train is None:
        raise NeuroedgeError(f"{spec.name} has nothing to train (family {spec.family})")
    config = _config(args.config)
    spec.check_config(config, "train")
    from neuroedge.distributed import world

    w = world()
    if w.active and not spec.data_parallel:  # every process would train its own copy
        able = [n for n in model_names() if get_model(n).data_parallel]
        raise NeuroedgeError(
            f"{spec.name} does not train data-parallel; run `neuroedge train` without "
            f"torchrun (models that do, their ranks sharing every batch: {', '.join(able)})"
        )
    if w.lead:  # the destination, before the training, not after it
        _check_train_destination(spec, config, args.out)
    result = train(config, args.out)
    if w.lead:  # under torchrun, one summary: rank 0's, which wrote the checkpoint
        print(json.dumps(result, indent=2, default=str))
    return 0


def _check_train_destination(spec: Any, config: dict[str, Any], out: str | None) -> None:
    """Refuse an unwritable checkpoint destination before training: ``--out`` ('' too, not
    the default path), else the config's ``checkpoint`` where training writes there (checked
    by ``resolve_checkpoint``: an empty or non-path value is refused), else the default; and
    ``--out`` with another ``checkpoint`` (only --out was written). A model that saves no
    checkpoint (its build reads none: the TTT ladder writes a results folder) checks its own
    destination in its train hook."""
    from neuroedge.atomic import check_writable
    from neuroedge.checkpoints import resolve_checkpoint

    if "checkpoint" not in (spec.valid_config_keys("build") or set()):
        return
    named = "checkpoint" in (spec.valid_config_keys("train") or ()) and "checkpoint" in config
    given = {"checkpoint": config["checkpoint"]} if named else {}
    if out is not None:
        check_writable(out)
    path = resolve_checkpoint(given, spec.name, check=False)
    if out is not None and named and os.path.abspath(out) != os.path.abspath(path):
        raise NeuroedgeError(
            f"--out {out} and --config checkpoint={config['checkpoint']}: two destinations "
            "for the one checkpoint training writes; give one of them"
        )
    check_writable(path if out is None else out)


def cmd_export(args: argparse.Namespace) -> int:
    from neuroedge.api import export

    path = export(args.name, args.target, args.out, _config(args.config), args.precision)
    print(f"wrote {path}")
    if args.target == "onnx":
        import onnx
        from neuroedge.export.onnx import STATE_KEY, state_file

        model = onnx.load(str(path), format="protobuf", load_external_data=False)
        meta = {p.key for p in model.metadata_props}
        if STATE_KEY in meta:
            print(f"wrote {state_file(path)} (the initial state: keep it beside the .onnx)")
    return 0


DEFAULT_REPEATS = 100
CLAIM_WORDS = {True: "holds", False: "NOT met", None: "not all measured, none failed"}


def _bench_world(spec: Any, bench: Any) -> Any:
    """The torchrun launch this bench runs in (``neuroedge.distributed.world``); a launch of
    several processes is refused for a bench that has no seed sweep to share out (each
    process would run all of it, and time it on the same cores)."""
    from neuroedge.distributed import world

    w = world()
    if w.active and (bench is None or not spec.seed_sweep):
        raise NeuroedgeError(
            f"{spec.name}'s benchmark has no seed sweep to share over torchrun's "
            f"{w.size} processes; run it in one process (without torchrun)"
        )
    return w


def _own_bench(args: argparse.Namespace, spec: Any, bench: Any, w: Any, config: dict) -> int:
    """A model's own benchmark (its ``bench`` hook) on the backends it measures; under
    torchrun every rank runs its seeds and rank 0 reports. Prints the table and the claim's
    verdict, where the bench reads one (exit 0 either way: the bench ran)."""
    from neuroedge.bench.report import text_table

    asked = backend_items(args.backend, args.repeats)
    backends = _bench_backends(spec, asked, explicit=bool(args.backend))
    if not backends:
        raise NeuroedgeError(f"{spec.name}: none of {asked} is measured")
    if args.repeats is not None:
        raise NeuroedgeError(
            f"{spec.name} has its own benchmark, which sets its own "
            "repetitions (a --config key of that benchmark); --repeats "
            "applies to the generic latency bench only"
        )
    if not w.lead:  # under torchrun: every rank runs its seeds, rank 0 reports
        with tempfile.TemporaryDirectory(prefix=f"neuroedge-rank{w.rank}-") as tmp:
            out, history = (os.path.join(tmp, f) for f in ("report", "history.sqlite"))
            bench(out_dir=out, backends=backends, config=config, history=history)
        return 0
    doc = bench(out_dir=args.out, backends=backends, config=config, history=args.history)
    print(text_table(doc, doc.get("columns", ())))
    if isinstance(doc.get("claim"), dict) and "holds" in doc["claim"]:
        holds = doc["claim"]["holds"]
        said = doc["claim"].get("said") or CLAIM_WORDS.get(holds, holds)  # a model's own words
        print(f"\nclaim: {said} (its parts in report.md)")
    print(f"\nreport: {args.out}/report.json, report.md")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from neuroedge.atomic import check_writable
    from neuroedge.bench.history import check as check_history
    from neuroedge.bench.report import build_document, speedup_lines, text_table, write_report
    from neuroedge.bench.runner import bench_run, speedups
    from neuroedge.paths import home

    spec = get_model(args.name)
    backends = backend_items(args.backend, args.repeats)
    config = _config(args.config)
    bench = spec.hook("bench")
    spec.check_config(config, "build" if bench is None else "bench")
    if spec.seed_sweep:  # its seeds are read through bench.seeds
        check_seed_keys(config)

    w = _bench_world(spec, bench)
    if w.lead:  # the rank that writes them (other machines may lack these paths)
        home()  # an empty $NEUROEDGE_HOME fails now, not at the first artifact after training
        check_history(args.history)  # a bad history path fails now, not after the run
        check_writable(args.out, folder=True)  # and so does a report folder that is a file
    if bench is not None:
        return _own_bench(args, spec, bench, w, config)
    repeats = DEFAULT_REPEATS if args.repeats is None else args.repeats
    ran = bench_run(spec, backends, config=config, repeats=repeats)
    rows = ran.rows
    doc = build_document(
        spec.name,
        rows,
        config=ran.config,  # what the program was built with: a checkpoint's settings too
        repeats=repeats,
        speedup_vs_host=speedups(rows),
        **({"weights": ran.weights} if ran.weights is not None else {}),
    )
    written = write_report(doc, args.out, history=args.history)
    print(text_table(doc))
    for line in speedup_lines(doc):
        print(line)
    for row in rows:
        parity = [n for n in row.notes if n.startswith("parity:")]
        for reason in (*row.rejections, *row.fallbacks, *parity):
            print(f"{row.backend}: {reason}")
    print(f"\nreport: {args.out}/{', '.join(p.name for p in written.values())}")
    return 0


def cmd_nir(args: argparse.Namespace) -> int:
    from neuroedge.api import check_nir
    from neuroedge.atomic import check_writable

    if args.out is not None:  # '' too: refused, not silently skipped
        check_writable(args.out)  # a bad --out fails now, not after the run
    options = {"variant": args.variant}
    if args.input_scale is not None:
        options["input_scale"] = args.input_scale
    report = check_nir(
        args.file,
        args.backend,
        args.input,
        args.dt,
        args.steps,
        args.batch,
        args.density,
        args.seed,
        options,
    )
    print(
        f"{report['file']} on {report['backend']} ({args.variant}), {report['steps']} steps x "
        f"{report['batch']} samples, dt {report['dt']:g} s, {report['seconds']:.1f} s"
    )
    for name, row in report["outputs"].items():
        print(
            f"{name:<14} shape {row['shape']}  equal {row['equal_fraction']:.6f}  "
            + (f"kappa {row['spike_kappa']:.4f}  " if "spike_kappa" in row else "")
            + f"max abs err {row['max_abs_err']:.3g}  (reference mean {row['reference_mean']:.4g})"
        )
        if row.get("warning"):
            print(f"  warning: {row['warning']}")
    if "chip_fit" in report:
        fit = report["chip_fit"]
        print(
            f"chip fit: {fit['neurons']} neurons, {fit['synapses']} synapses, {fit['cores']} cores"
        )
    if args.out is not None:
        from neuroedge.atomic import atomic_path

        with atomic_path(args.out) as tmp:
            tmp.write_text(json.dumps(report, indent=2))
    return 0


EXIT_CODES = (
    "exit status: 0 ran (a bench whose claim is not met ran: 0 too), 1 internal error (a "
    "traceback), 2 bad input or refused (or a training run that diverged), 130 interrupted "
    "(Ctrl-C), 141 the reader of the output left (a closed pipe), 143 stopped by SIGTERM; "
    "NEUROEDGE_DEBUG=1 shows the traceback of an error that would exit 2"
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuroedge", description=__doc__, epilog=EXIT_CODES)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="registered models").set_defaults(fn=cmd_list)
    s = sub.add_parser("info", help="one model's spec")
    s.add_argument("name")
    s.set_defaults(fn=cmd_info)
    sub.add_parser("doctor", help="every known backend, available or not and why").set_defaults(
        fn=cmd_doctor
    )
    s = sub.add_parser("train", help="train a model and save its checkpoint")
    s.add_argument("name")
    s.add_argument("--out", help="checkpoint path (default under .neuroedge/; ttt: ./ttt_ladder)")
    s.set_defaults(fn=cmd_train)
    s = sub.add_parser("export", help="export a model")
    s.add_argument("name")
    s.add_argument("--target", default="onnx", help="onnx, nir or tensorrt (an engine; GPU)")
    s.add_argument(
        "--precision",
        default="fp32",
        help="fp32, fp16 or int8 (onnx: Q/DQ calibrated on the model's examples; tensorrt)",
    )
    s.add_argument("--out", default=None)
    s.set_defaults(fn=cmd_export)
    s = sub.add_parser("bench", help="measure a model on backends; writes a report folder")
    s.add_argument("name")
    s.add_argument(
        "--backend",
        action="append",
        default=None,
        help="backend name; repeat or comma-separate (default host,onnxrt)",
    )
    s.add_argument("--out", required=True, help="report folder")
    s.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"timed calls per backend of the generic bench (default {DEFAULT_REPEATS})",
    )
    s.add_argument("--history", default=None, help="SQLite history file")
    s.set_defaults(fn=cmd_bench)
    add_run_parser(sub)
    s = sub.add_parser("nir", help="run a NIR file on a backend and compare it with the host")
    s.add_argument("file")
    s.add_argument("--backend", default="lava")
    s.add_argument("--variant", default="floating_pt", help="lava: floating_pt or fixed_pt")
    s.add_argument("--input", default=None, help=".npy of shape (T, batch, *input shape)")
    s.add_argument("--dt", type=float, default=None, help="seconds per step only if file has none")
    s.add_argument("--steps", type=int, default=None, help="of the random input (default 20)")
    s.add_argument("--batch", type=int, default=None, help="of the random input (default 2)")
    s.add_argument("--density", type=float, help="random spike input density (default 0.3)")
    s.add_argument("--seed", type=seed_value, default=None, help="of the random input (0)")
    s.add_argument("--input-scale", type=float, help="fixed_pt 1..255; default 1, or 255 if graded")
    s.add_argument("--out", default=None, help="write the comparison as JSON")
    s.set_defaults(fn=cmd_nir)
    add_config_options(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The command's exit status (EXIT_CODES); with NEUROEDGE_DEBUG set (not 0) an error is
    raised with its traceback instead of printed as one line."""
    args = parser().parse_args(argv)
    # SIGTERM unwinds as Ctrl-C does: temp files go, workers end
    return command_status(lambda: int(args.fn(args)))


if __name__ == "__main__":
    sys.exit(main())
