"""Torch -> ONNX export with explicit state, checks, and a refusal for hidden state.

A stateful model is exported in one of two forms, both with explicit state: state tensors
are graph inputs named as in ``TorchProgram.state_names`` and outputs named ``<state>_out``.

* ``step`` (streaming): one time step ``(x_t, state) -> (y_t, state')``; any number of steps,
  one runtime call each. Batch is axis 0 everywhere.
* ``sequence``: the T steps of the example unrolled into one graph
  ``(x[0:T], state) -> (y[0:T], state_T)``; one runtime call per sequence, T fixed at export.
  Batch is axis 1 of the time-major inputs and outputs, axis 0 of the state.

The form is stored in the model's metadata (``neuroedge.form``) so a loaded file runs right,
and the initial state (zeros for a neuron, learned tensors for TTT fast weights) is saved beside
the model as ``<name>.state.npz``.

A neuron that keeps its membrane potential as a module attribute exports *without error* and
the exported graph silently treats the state as a constant: ONNX Runtime then disagrees with
PyTorch from the second step on. ``find_hidden_state`` detects this before export (the module's
tensors change, or two identical calls disagree) and the export is refused with the reason.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path, write_bytes
from neuroedge.errors import ArtifactError, ConfigError, ExportRefused
from neuroedge.types import ModelSpec, TorchProgram

DEFAULT_OPSET = 17
FORMS = ("step", "sequence")
FORM_KEY = "neuroedge.form"
# set on stateful exports: the name of the initial-state file that must sit beside the model
STATE_KEY = "neuroedge.state_file"


def onnx_io_names(program: TorchProgram) -> tuple[list[str], list[str]]:
    """Graph input and output names for ``program`` (state outputs get ``_out``)."""
    inputs = [*program.input_names, *program.state_names]
    outputs = [*program.output_names, *(f"{s}_out" for s in program.state_names)]
    return inputs, outputs


class _Unrolled:
    """Builds an nn.Module that runs a step module over a time-major sequence."""

    @staticmethod
    def wrap(program: TorchProgram) -> Any:
        import torch
        from torch import nn

        n_in, n_out = len(program.input_names), len(program.output_names)

        class Unrolled(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.step = program.module

            def forward(self, *args: Any) -> tuple[Any, ...]:
                xs, state = args[:n_in], list(args[n_in:])
                trace: list[list[Any]] = [[] for _ in range(n_out)]
                for t in range(int(xs[0].shape[0])):
                    result = self.step(*(x[t] for x in xs), *state)
                    for slot, y in zip(trace, result[:n_out]):
                        slot.append(y)
                    state = list(result[n_out:])
                return (*(torch.stack(ys) for ys in trace), *state)

        return Unrolled().eval()


def sequence_arguments(program: TorchProgram, example: Mapping[str, Any]) -> tuple[Any, ...]:
    """The arguments of the unrolled form: whole inputs, then the initial state."""
    import torch

    xs = [torch.as_tensor(example[n]) for n in program.input_names]
    return (*xs, *program.init_state(int(xs[0].shape[1])))


def step_arguments(program: TorchProgram, example: Mapping[str, Any]) -> tuple[Any, ...]:
    """The arguments of one step: the first time slice of each input, then the initial state."""
    import torch

    xs = [torch.as_tensor(example[n]) for n in program.input_names]
    if not program.stateful:
        return tuple(xs)
    state = program.init_state(int(xs[0].shape[1]))
    return (*(x[0] for x in xs), *state)


def _tensor_snapshot(module: Any) -> dict[str, Any]:
    """Every tensor a module tree holds: parameters, buffers and plain tensor attributes."""
    import torch

    snap: dict[str, Any] = {}
    for prefix, sub in module.named_modules():
        for attr, value in vars(sub).items():
            if isinstance(value, torch.Tensor):
                snap[f"{prefix or '<root>'}.{attr}"] = value.detach().clone()
            elif isinstance(value, (list, tuple)) and any(
                isinstance(v, torch.Tensor) for v in value
            ):
                snap[f"{prefix or '<root>'}.{attr}"] = [
                    v.detach().clone() for v in value if isinstance(v, torch.Tensor)
                ]
    snap.update({f"param {k}": v.detach().clone() for k, v in module.state_dict().items()})
    return snap


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    return a.shape == b.shape and bool(torch.equal(a, b))


def find_hidden_state(program: TorchProgram, args: tuple[Any, ...]) -> str | None:
    """Why ``program`` keeps state outside its explicit inputs, or None if it does not.

    Calls the step twice with the same arguments: any module tensor that changes, appears, or
    any output that differs between the two calls is state the ONNX graph would drop.
    """
    import torch

    module = program.module
    with torch.inference_mode():
        before = _tensor_snapshot(module)
        first = module(*args)
        after = _tensor_snapshot(module)
        second = module(*args)
    changed = sorted(k for k in after if k not in before or not _same(before[k], after[k]))
    if changed:
        return (
            f"forward() changes tensors it keeps internally ({', '.join(changed)}); "
            "ONNX export would freeze them as constants. Pass that state as explicit "
            "inputs/outputs (state_names)"
        )
    first = first if isinstance(first, (tuple, list)) else (first,)
    second = second if isinstance(second, (tuple, list)) else (second,)
    for name, a, b in zip(onnx_io_names(program)[1], first, second):
        if not torch.equal(a, b):
            return (
                f"two identical calls give different {name!r}: the module carries hidden "
                "state (or randomness) that ONNX export would drop"
            )
    return None


def export_onnx(
    program: TorchProgram,
    spec: ModelSpec,
    path: str | os.PathLike[str],
    *,
    example: Mapping[str, Any] | None = None,
    opset: int = DEFAULT_OPSET,
    form: str = "step",
) -> Path:
    """Export ``program`` in ``form`` to ``path`` (atomically), check it, infer its shapes.

    Raises ``ExportRefused`` when the module hides state; ``ValueError`` for opset < 17 or an
    unknown form. A stateful program's initial state goes beside it (``state_file``); a
    stateless one removes the state file an earlier export to ``path`` left there.
    """
    import onnx

    state_file(path)  # a path with no file name fails now, not after the trace
    if form not in FORMS:
        raise ValueError(f"ONNX export form {form!r} is not one of {FORMS}")
    if opset < DEFAULT_OPSET:
        raise ValueError(f"opset {opset} is too old; neuroedge exports opset >= {DEFAULT_OPSET}")
    example = spec.example_for(0, program.meta.get("config")) if example is None else example
    args = step_arguments(program, example)
    program.module.eval()
    reason = find_hidden_state(program, args)
    if reason is not None:
        raise ExportRefused(f"{spec.name}: {reason}")
    in_names, out_names = onnx_io_names(program)
    module, dynamic = program.module, {name: {0: "batch"} for name in (*in_names, *out_names)}
    if form == "sequence" and program.stateful:
        module, args = _Unrolled.wrap(program), sequence_arguments(program, example)
        timed = (*program.input_names, *program.output_names)
        dynamic.update({name: {1: "batch"} for name in timed})
    with atomic_path(path) as tmp:
        torch_onnx_export(
            module,
            args,
            str(tmp),
            input_names=in_names,
            output_names=out_names,
            dynamic_axes=dynamic,
            opset_version=opset,
            dynamo=False,
            do_constant_folding=True,
        )
        model = onnx.load(str(tmp))
        onnx.checker.check_model(model, full_check=True)
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        entry = model.metadata_props.add()
        entry.key, entry.value = FORM_KEY, form if program.stateful else "step"
        if program.stateful:
            entry = model.metadata_props.add()
            entry.key, entry.value = STATE_KEY, state_file(path).name
        onnx.save(model, str(tmp))
        _save_initial_state(program, Path(path))  # before the .onnx lands
    return Path(path)


# torch's exporters and torch.fx's tracer patch process-wide state: one trace at a time
TRACE_LOCK = threading.Lock()


def torch_onnx_export(*args: Any, quiet_all: bool = False, **kwargs: Any) -> Any:
    """``torch.onnx.export`` without its deprecation and tracer warnings (every warning with
    ``quiet_all``), one thread at a time: torch keeps an export's state in one process-wide
    object (two threads exporting at once failed its assertion ``GLOBALS.in_onnx_export must
    be False``), and the warning filters are process-wide too."""
    import torch

    with TRACE_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        if quiet_all:
            warnings.simplefilter("ignore")
        return torch.onnx.export(*args, **kwargs)


def state_file(onnx_path: str | os.PathLike[str]) -> Path:
    """Where the initial state that goes with an exported stateful model is stored;
    ConfigError for a path with no file name ('' or '.', which ``Path("")`` becomes)."""
    if not Path(onnx_path).name:
        raise ConfigError(
            f"ONNX path {os.fspath(onnx_path)!r}: an empty path (an unset shell variable?); "
            "name the .onnx file to write"
        )
    # beside the graph, its whole name kept: with_suffix made ttt.v1 and ttt.v2 share one
    path = Path(onnx_path)
    return path.with_name(path.name.removesuffix(".onnx") + ".state.npz")


def _save_initial_state(program: TorchProgram, path: Path) -> None:
    """A stateful program's initial state beside its graph at ``path`` (``state_file``): never
    a new graph beside an old state. A stateless one removes the state file an earlier export
    of a stateful model to ``path`` left there (it would pass for this graph's)."""
    import io

    import numpy as np

    if not program.stateful:
        state_file(path).unlink(missing_ok=True)
        return
    buf = io.BytesIO()
    init = program.init_state(1)
    np.savez(buf, **{n: s.detach().numpy() for n, s in zip(program.state_names, init)})
    write_bytes(state_file(path), buf.getvalue())


def load_onnx(path: str | os.PathLike[str]) -> Any:
    """Load and check an .onnx file; a missing, corrupt or truncated file raises ArtifactError."""
    import onnx
    from google.protobuf.message import DecodeError

    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such ONNX file")
    size = path.stat().st_size
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except (DecodeError, onnx.checker.ValidationError, RuntimeError, ValueError) as err:
        raise ArtifactError(
            f"{path}: not a valid ONNX model ({size} bytes; corrupt or truncated?): {err}"
        ) from err
    if not model.graph.node:
        raise ArtifactError(f"{path}: ONNX model has no nodes ({size} bytes; truncated?)")
    return model
