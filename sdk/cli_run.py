"""``neuroedge run``: a model once on its example input or on the user's own arrays."""

from __future__ import annotations

import argparse
import os
from typing import Any

from neuroedge.cli_args import config_items, crop_items, option_items
from neuroedge.errors import InputError
from neuroedge.paths import refuse_empty


def _as_text(arr: Any, max_lines: int = 40) -> str:
    """``  text '...'`` for a 1-D uint8 output holding 0-padded printable UTF-8 (multi-line
    text, e.g. a diff: ``  text:`` and its first ``max_lines`` lines indented), else ""."""
    from neuroedge.text_codes import decode

    if arr.dtype.name != "uint8" or arr.ndim != 1:
        return ""
    try:
        text = decode(arr, "output")
    except ValueError:
        return ""
    lines = text.rstrip("\n").split("\n")
    if not all(line.expandtabs().isprintable() for line in lines) or len(lines) == 1:
        return f"  text {text[:120]!r}" if text.isprintable() else ""
    more = [f"    ... {len(lines) - max_lines} more lines"] if len(lines) > max_lines else []
    return "  text:\n" + "\n".join(["    " + line for line in lines[:max_lines]] + more)


def _print_outputs(outputs: dict[str, Any]) -> None:
    """One line per output: shape, mean, max, and a count of NaN/inf values when any (finite
    inputs can still overflow inside a model)."""
    import numpy as np

    for name, value in outputs.items():
        arr = np.asarray(value)
        line = f"{name:<14} shape {list(arr.shape)}  mean {arr.mean():.4g}  max {arr.max():.4g}"
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            line += f"  ({int((~np.isfinite(arr)).sum())} values NaN or inf)"
        print(line + _as_text(arr))


def _recording_inputs(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any]:
    """The model's inputs from the event recording ``args.events`` (its ``recording`` hook)."""
    from neuroedge.registry import get_model, model_names

    spec = get_model(args.name)
    hook = spec.hook("recording")
    if hook is None:
        takers = [m for m in model_names() if get_model(m).recording is not None]
        raise InputError(
            f"{args.name} takes no event recordings (--events); models that do: "
            f"{', '.join(takers) or 'none'}; --input X.npz takes arrays"
        )
    crop = crop_items(args.crop) if args.crop is not None else None
    inputs, line = hook(args.events, config=config, crop=crop, max_windows=args.max_windows)
    print(line)
    return inputs


def _inputs(args: argparse.Namespace, config: dict[str, Any]) -> dict[str, Any] | None:
    """The run's inputs from ``--events`` or ``--input``; None for the model's generated
    example, which ``deploy`` makes for the net it built (not from the config before the
    build: a checkpoint replaced in between would give the example of another net)."""
    from neuroedge.arrays import load_inputs
    from neuroedge.registry import get_model

    if args.events is not None:
        return _recording_inputs(args, config)
    if args.input is None:
        return None
    inputs = load_inputs(args.input, get_model(args.name))
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in inputs.items())
    print(f"input {args.input}: {shapes}")
    return inputs


def cmd_run(args: argparse.Namespace) -> int:
    from neuroedge.api import deploy_with_inputs, ready_backend
    from neuroedge.arrays import check_output_path, save_outputs
    from neuroedge.registry import get_backend

    config = config_items(args.config)
    if args.repeats < 1:
        raise InputError(f"--repeats {args.repeats}: expected an integer >= 1")
    given = [f for f, v in (("--input", args.input), ("--events", args.events)) if v is not None]
    if len(given) > 1:
        raise InputError("--input and --events both replace the example input: give one")
    if given and args.seed is not None:
        raise InputError(f"--seed picks the generated example input; with {given[0]} it has no use")
    if args.events is None and (args.crop is not None or args.max_windows is not None):
        raise InputError("--crop and --max-windows apply to an event recording: add --events FILE")
    for flag in given:  # '' was the folder '.', named as if the user had given it
        refuse_empty(getattr(args, flag[2:]), flag, "name a file", InputError)
    if args.events is not None and os.path.isdir(args.events):  # was "no such event file"
        raise InputError(f"--events {args.events}: is a directory, not an event recording file")
    if args.output is not None:  # '' too: a bad --output fails now, not after the run
        check_output_path(args.output)
    options = option_items(args.option)
    ready_backend(args.name, args.backend)  # a backend that cannot run it: before any input
    source = args.input if args.input is not None else args.events
    inputs = _inputs(args, config)
    try:
        artifact, report, inputs = deploy_with_inputs(
            args.name, args.backend, config, options, inputs, args.repeats, args.seed or 0
        )
        outputs = get_backend(args.backend).run(artifact, inputs)
    except InputError as err:  # what only the built model knows (a width): name the file too
        if source is None:
            raise
        raise InputError(f"{source}: {err}") from err
    _print_outputs(outputs)
    p50 = report.metrics.get("latency_p50_ms")  # a plugin backend's report may lack it
    if p50 is not None:
        print(f"latency p50 {p50.value:.3f} ms ({p50.how}) on {args.backend}")
    shown = [
        k
        for k in (
            "sops_per_sample",
            "energy_uj",
            "max_abs_err",
            "spike_agreement",
            "within_tolerance",
        )
        if k in report.metrics
    ]
    if shown:
        print("  ".join(f"{k} {report.metrics[k].value:.4g}" for k in shown))
    for note in (*report.fallbacks, *(n for n in report.notes if n.startswith("parity:"))):
        print(f"{args.backend}: {note}")
    for note in (n for n in report.notes if n.startswith("weights:")):  # untrained: say so
        print(note)
    if args.output is not None:
        print(f"outputs written to {save_outputs(args.output, outputs)}")
    return 0


def seed_value(text: str) -> int:
    """``--seed``'s value: an integer in [0, 2**32) (numpy's seed range), else argparse's
    error naming the flag and the value."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    from neuroedge.config_values import SEED_MAX

    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {value}")
    return value


def add_run_parser(sub: Any) -> None:
    """The ``run`` subcommand on ``sub`` (the top parser's subparsers)."""
    s = sub.add_parser("run", help="run a model once on its example input or on yours")
    s.add_argument("name")
    s.add_argument("--backend", default="host", help="host (default), onnxrt, lava, ...")
    s.add_argument(
        "--seed",
        type=seed_value,
        default=None,
        help="seed of the generated example input (default 0)",
    )
    s.add_argument(
        "--input",
        default=None,
        help=".npz with one array per model input, named as `neuroedge info NAME` lists "
        "(.npy for a one-input model); replaces the example",
    )
    s.add_argument(
        "--events",
        default=None,
        metavar="FILE",
        help="an event-camera recording (.raw EVT 2/3, .dat, .bin, .aedat4) as the input, "
        "for models that take one (event.bivision: 100 ms windows, one batch entry each)",
    )
    s.add_argument(
        "--crop",
        default=None,
        metavar="X0,Y0,SIDE",
        help="with --events: the square of the sensor to keep (default: the centred largest)",
    )
    s.add_argument(
        "--max-windows",
        type=int,
        default=None,
        help="with --events: keep the first N windows (default: the model's; event.bivision: "
        "600, fewer for a net of large side)",
    )
    s.add_argument("--output", default=None, help=".npz to write the output arrays to")
    s.add_argument(
        "--repeats", type=int, default=50, help="timed calls for the latency (default 50)"
    )
    s.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        default=None,
        help=(
            "backend option; repeat for more (onnxrt: form=step runs any T, threads=N, "
            "path=FILE.onnx keeps the export there; it never replaces a file)"
        ),
    )
    s.set_defaults(fn=cmd_run)
