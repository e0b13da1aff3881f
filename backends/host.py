"""The host backend: PyTorch eager (or a plain Python function), the numeric reference.

Every other backend is compared with what this one computes.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any, ClassVar

from neuroedge.backends.base import MeasuredBackend, axes_meta, check_options, unroll
from neuroedge.shapes import as_numpy, bind_inputs
from neuroedge.types import (
    Artifact,
    Availability,
    HostProgram,
    ModelSpec,
    NIRProgram,
    Program,
    Support,
    TorchProgram,
)


OPTIONS: tuple[str, ...] = ()  # compile reads none


class HostBackend(MeasuredBackend):
    name: ClassVar[str] = "host"
    # NaN refused on torch programs; a host function checks its own inputs (rows, columns)
    finite_inputs: ClassVar[bool] = False

    def probe(self) -> Availability:
        if importlib.util.find_spec("torch") is None:
            return Availability(False, "torch is not installed (pip install torch==2.13.0)")
        return Availability(True, "PyTorch eager on the CPU")

    def supports(self, spec: ModelSpec) -> Support:
        return Support(True)

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, str] | None = None
    ) -> Artifact:
        check_options(self.name, options, OPTIONS)
        if isinstance(program, NIRProgram):
            raise TypeError(
                "the host backend runs torch and host programs; convert a NIR graph "
                "with neuroedge.export.nir first"
            )
        meta = {"device": "cpu", **axes_meta(program)}  # a HostProgram may fix axes too (k)
        if isinstance(program, TorchProgram):
            program.module.eval()
            return Artifact(self.name, "torch", spec, meta=meta, handle=program)
        return Artifact(self.name, "python", spec, meta=meta, handle=program)

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        program = artifact.handle
        finite = not isinstance(program, HostProgram)
        bind_inputs(artifact.spec, inputs, finite=finite, fixed=artifact.meta.get("axes"))
        if isinstance(program, HostProgram):
            return dict(program.fn(**{k: host_array(v) for k, v in inputs.items()}))
        return run_torch_program(program, inputs)


def host_array(value: Any) -> Any:
    """An input as a numpy array a host function or ``torch.as_tensor`` takes: a tensor
    detached to the CPU, a masked array's data (``bind_inputs`` refused masked values), a
    view with negative strides (OpenCV's ``img[..., ::-1]``) copied, which torch refuses."""
    import numpy as np

    arr = as_numpy(value)
    return np.ascontiguousarray(arr) if any(s < 0 for s in arr.strides) else arr


def run_torch_program(program: TorchProgram, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Step ``program`` over its inputs' time axis (or call it once) and return numpy arrays."""
    import torch

    xs = [torch.as_tensor(host_array(inputs[name])) for name in program.input_names]
    module = program.module
    with torch.inference_mode():
        if not program.stateful:
            ys = module(*xs)
            ys = ys if isinstance(ys, (tuple, list)) else (ys,)
            return {n: y.numpy() for n, y in zip(program.output_names, ys)}
        state = program.init_state(int(xs[0].shape[1]))
        outs, final = unroll(
            lambda args: module(*args), xs, state, len(program.output_names), torch.stack
        )
    result = {n: y.numpy() for n, y in zip(program.output_names, outs)}
    result.update({f"{n}_final": s.numpy() for n, s in zip(program.state_names, final)})
    return result
