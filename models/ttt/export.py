"""ONNX export of the TTT layer's fully parallel form with a dynamic sequence length.

The streaming step (state in, state out) goes through ``neuroedge.export.onnx.export_onnx``
(form "step"); this module covers the other deployable form: ``x (batch, L, d_model) -> y``
in one graph (MatMul, Trilu, no loop), exported with the TorchScript exporter
(``dynamo=False``) with both batch and L dynamic, checked, shape-inferred and written
atomically. The causal mask is built in the graph from the input's length, not baked in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from neuroedge.atomic import atomic_path
from neuroedge.errors import ExportRefused

OPSET = 17


def export_parallel_onnx(
    layer: Any, path: str | os.PathLike[str], *, tokens: int = 64, form: str = "parallel"
) -> Path:
    """Export ``TTTParallelForm(layer, form)`` to ``path``; traced at ``tokens`` tokens.

    Refuses (ExportRefused) a variant whose masked form is not exact, or a layer whose chunk
    does not divide the traced length (the export must not bake a pad size in).
    """
    import onnx
    import torch
    from neuroedge.models.ttt.module import TTTParallelForm
    from neuroedge.export.onnx import torch_onnx_export

    if form != "parallel":  # the chunked form reshapes into fixed blocks: a baked-in length
        raise ExportRefused(
            f"parallel ONNX export of form {form!r}: its fixed-size blocks bake the traced "
            "length's padding into the graph (it would run only at multiples of the block); "
            "export form 'parallel' (any length) or the streaming step"
        )
    reason = layer.variant.supports(form)
    if reason is not None:
        raise ExportRefused(f"parallel ONNX export: {reason}")
    if layer.variant.momentum or layer.chunk != 1:
        raise ExportRefused(
            "parallel ONNX export covers the token-level momentum-free layer "
            f"(chunk 1); this one has chunk {layer.chunk} and momentum "
            f"{layer.variant.momentum}: export the streaming step instead"
        )
    module = TTTParallelForm(layer, form).eval()
    x = torch.randn(1, tokens, layer.qkv.in_features, generator=torch.Generator().manual_seed(0))
    with atomic_path(path) as tmp:
        torch_onnx_export(
            module,
            (x,),
            str(tmp),
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={"x": {0: "batch", 1: "L"}, "y": {0: "batch", 1: "L"}},
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
            quiet_all=True,
        )
        model = onnx.load(str(tmp))
        onnx.checker.check_model(model, full_check=True)
        model = onnx.shape_inference.infer_shapes(model, check_type=True)
        onnx.save(model, str(tmp))
    return Path(path)


def onnx_session(path: str | os.PathLike[str], threads: int = 1) -> Any:
    """A CPU ONNX Runtime session on ``path`` (single-threaded by default, like the host)."""
    from neuroedge.backends.onnxrt import open_session

    return open_session(path, "CPUExecutionProvider", threads)[0]
