"""Running a TensorRT engine on CUDA buffers that torch allocates.

``TensorRTRunner.run(fetch, feeds)`` has ONNX Runtime's session signature, so the onnxrt
backend's stepping logic (explicit state, sequence or step form) drives engines unchanged and
parity compares like with like. Buffers are torch CUDA tensors: torch is already a dependency,
so pycuda / cuda-python are not needed. Calls follow TensorRT's name-based tensor API (10.x and
11.x): ``set_input_shape``, ``infer_shapes``, ``set_tensor_address``, ``execute_async_v3``.

Latency the trtexec way has two numbers: end-to-end (host arrays in and out, as ``run``) and
GPU compute (``compute_times_ms``: CUDA events around ``execute_async_v3`` with the inputs
already on the device, trtexec's "GPU Compute Time").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.errors import ArtifactError
from neuroedge.export.tensorrt import InputProfile


def torch_dtype(np_dtype: Any) -> Any:
    """The torch dtype of a numpy dtype (float32, float16, int8, int32, int64, uint8, bool)."""
    import torch

    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


class TensorRTRunner:
    """An engine, one execution context and one CUDA stream; not thread-safe."""

    def __init__(self, engine: Any, profile: Sequence[InputProfile], keepalive: Any = None) -> None:
        import tensorrt as trt
        import torch

        self.keepalive = keepalive  # the runtime that deserialized ``engine`` must outlive it
        self.engine = engine
        self.context = engine.create_execution_context()
        if self.context is None:
            raise ArtifactError("TensorRT could not create an execution context (GPU memory?)")
        self.stream = torch.cuda.Stream()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if n not in self.inputs]
        self.dtypes = {n: torch_dtype(trt.nptype(engine.get_tensor_dtype(n))) for n in names}
        self.profile = {p.name: p for p in profile}

    def _bind(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """Copy inputs to the device, set shapes and addresses; returns the output buffers."""
        import torch

        missing = [n for n in self.inputs if n not in feeds]
        if missing:
            raise ValueError(f"engine inputs {missing} missing from feeds {sorted(feeds)}")
        held = {}
        for name in self.inputs:
            value = feeds[name]
            shape = tuple(int(d) for d in value.shape)
            bounds = self.profile.get(name)
            if bounds is not None and not bounds.admits(shape):
                raise ValueError(
                    f"input {name!r} shape {list(shape)} is outside the engine's optimisation "
                    f"profile (min {list(bounds.min)}, max {list(bounds.max)}); rebuild with a "
                    "wider range (option max_batch)"
                )
            if not isinstance(value, torch.Tensor):
                value = torch.from_numpy(np.ascontiguousarray(value))
            held[name] = value.to(device="cuda", dtype=self.dtypes[name]).contiguous()
            if not self.context.set_input_shape(name, shape):
                raise ValueError(f"TensorRT rejected shape {list(shape)} for input {name!r}")
            self.context.set_tensor_address(name, held[name].data_ptr())
        unresolved = self.context.infer_shapes()
        if unresolved:
            raise ValueError(f"TensorRT cannot infer shapes of {list(unresolved)}")
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            held[name] = torch.empty(shape, dtype=self.dtypes[name], device="cuda")
            self.context.set_tensor_address(name, held[name].data_ptr())
        return held

    def _execute(self) -> None:
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise ArtifactError("TensorRT execute_async_v3 failed (see the TensorRT log)")

    def run(self, fetch: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Outputs ``fetch`` (all when None) as host arrays, like ``InferenceSession.run``."""
        import torch

        fetch = list(self.outputs if fetch is None else fetch)
        unknown = [n for n in fetch if n not in self.outputs]
        if unknown:
            raise ValueError(f"engine has no outputs {unknown}; outputs: {self.outputs}")
        with torch.cuda.stream(self.stream):
            held = self._bind(feeds)
            self._execute()
            result = [held[n].cpu().numpy() for n in fetch]
        self.stream.synchronize()
        return result

    def compute_times_ms(
        self, feeds: Mapping[str, Any], repeats: int = 100, warmup: int = 10
    ) -> list[float]:
        """GPU time of ``execute_async_v3`` alone per call (CUDA events, inputs resident)."""
        import torch

        with torch.cuda.stream(self.stream):
            held = self._bind(feeds)  # kept alive until the stream is synchronised
            for _ in range(warmup):
                self._execute()
            events = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(repeats)
            ]
            for start, end in events:
                start.record(self.stream)
                self._execute()
                end.record(self.stream)
        self.stream.synchronize()
        del held
        return [start.elapsed_time(end) for start, end in events]
