"""The sentence encoder on ONNX Runtime: export, session, and the same ``Encoder`` interface.

``export_encoder`` writes ``minilm.BertEncoder`` (``inputs_embeds`` + mask -> normalised
sentence embedding) as one ONNX graph with dynamic batch and length (opset 17, written
atomically, checked with onnx's full checker). ``OnnxEncoder`` runs it in ONNX Runtime behind
the interface ``functional.evaluate`` takes: tokenisation, the embedding-row lookup and the
TF-IDF weights stay on the host (numpy/torch), the 6 transformer layers run in the session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from neuroedge.models.mecat.minilm import MiniLM

OPSET = 17


def export_encoder(enc: MiniLM, path: str | os.PathLike[str]) -> Path:
    """``enc``'s encoder as ONNX at ``path`` (inputs ``embeds`` [batch, length, hidden] float32
    and ``mask`` [batch, length] int64; output ``embedding`` [batch, hidden])."""
    import onnx
    from neuroedge.atomic import atomic_path
    from neuroedge.export.onnx import torch_onnx_export

    ids, mask = enc.ids(["a dog barks in the park", "rain"])  # any example: axes are dynamic
    args = (enc.word_embeddings(ids), mask)
    dynamic = {"embeds": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}}
    dynamic["embedding"] = {0: "batch"}
    with atomic_path(path) as tmp:
        torch_onnx_export(
            enc.module,
            args,
            str(tmp),
            input_names=["embeds", "mask"],
            output_names=["embedding"],
            dynamic_axes=dynamic,
            opset_version=OPSET,
            dynamo=False,
            do_constant_folding=True,
        )
        onnx.checker.check_model(str(tmp), full_check=True)
    return Path(path)


class OnnxEncoder:
    """``enc``'s tokenizer and embedding rows on the host, its transformer in ONNX Runtime."""

    def __init__(self, enc: MiniLM, path: str | os.PathLike[str], threads: int = 1) -> None:
        from neuroedge.backends.onnxrt import open_session

        self.host, self.path = enc, Path(path)
        self.tokenizer = enc.tokenizer
        self.session, self.fallbacks = open_session(self.path, None, threads)

    def ids(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.host.ids(texts)

    def word_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        return self.host.word_embeddings(ids)

    def encode_embeds(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feed = {
            "embeds": np.ascontiguousarray(embeds.detach().float().numpy()),
            "mask": np.ascontiguousarray(mask.numpy().astype(np.int64)),
        }
        (out,) = self.session.run(["embedding"], feed)
        return torch.from_numpy(out)

    def describe(self) -> dict[str, Any]:
        return {"onnx": str(self.path), "providers": self.session.get_providers()}


def quantize_int8(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """ONNX Runtime's dynamic int8 quantization of ``src`` (weights int8 per tensor, activations
    quantized per call), written atomically to ``dst``."""
    from neuroedge.atomic import atomic_path
    from neuroedge.log_handlers import quiet_root_logger
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # its "consider pre-processing" advice on every call, and a root handler left behind
    with atomic_path(dst) as tmp, quiet_root_logger():
        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8)
    return Path(dst)


def export_pair(enc: MiniLM, folder: Path) -> Path:
    """``enc`` exported (``encoder_fp32.onnx``) and int8-quantized (``encoder_int8.onnx``
    beside it) in a private folder under ``folder``, published whole as ``encoder-<hash of
    the files>`` (``backends.export_folders``); the fp32 graph's path there. Fixed names in
    ``folder`` itself let runs at once (a job array, two shells, another ``model=``) time
    and quantize each other's encoder; the same weights reuse the folder already there."""
    from neuroedge.backends.export_folders import export_once

    def write(work: Path) -> Path:
        fp32 = export_encoder(enc, work / "encoder_fp32.onnx")
        quantize_int8(fp32, work / "encoder_int8.onnx")
        return fp32

    return export_once(folder, "encoder", write)


def deployment_rows(
    enc: MiniLM,
    cands: dict[str, list[str]],
    refs: list[list[str]],
    cfg: dict[str, Any],
    folder: Path,
) -> list[Any]:
    """The encoder on host, on ONNX Runtime (fp32) and int8-quantized, side by side: latency of
    one batch of ``cfg["encode_batch"]`` reference sentences, embedding error against the
    host, and every system's DATE through each encoder against the host's. The graphs go to
    a folder of their own under ``folder`` (``export_pair``)."""
    from neuroedge.bench.latency import measure_side_by_side
    from neuroedge.models.mecat.functional import evaluate
    from neuroedge.types import Measurement, Report

    fp32 = export_pair(enc, folder)
    int8 = fp32.with_name("encoder_int8.onnx")
    runners = {"host": enc, "fp32": OnnxEncoder(enc, fp32), "int8": OnnxEncoder(enc, int8)}
    flat = [s for r in refs for s in r][: cfg["encode_batch"]]
    ids, mask = enc.ids(flat)
    embeds = enc.word_embeddings(ids)
    lat = measure_side_by_side(
        {k: (lambda r=r: r.encode_embeds(embeds, mask)) for k, r in runners.items()},
        repeats=cfg["timing_repeats"],
        warmup=2,
        batch=len(flat),
        block=5,
    )
    base = enc.encode_embeds(embeds, mask)
    dates = {
        k: {name: evaluate(r, c, refs, cfg["delta"])["date"] for name, c in cands.items()}
        for k, r in runners.items()
    }
    order = sorted(cands, key=lambda n: -float(dates["host"][n].mean()))
    rows = []
    for key, variant, backend in (
        ("host", "encoder", "host"),
        ("fp32", "encoder", "onnxrt"),
        ("int8", "encoder_int8", "onnxrt"),
    ):
        m = lat[key].metrics()
        m["speedup_vs_host"] = Measurement(
            lat["host"].percentile(50) / lat[key].percentile(50), "x"
        )
        m["max_abs_err"] = Measurement(
            float((runners[key].encode_embeds(embeds, mask) - base).abs().max()), "abs"
        )
        diffs = torch.cat([(dates[key][n] - dates["host"][n]).abs() for n in cands])
        m["date_max_abs_diff"] = Measurement(float(diffs.max()), "abs")
        m["date_mean_abs_diff"] = Measurement(float(diffs.mean()), "abs")
        own = sorted(cands, key=lambda n: -float(dates[key][n].mean()))
        m["system_order_kept"] = Measurement(float(own == order), "bool")
        path = {"host": None, "fp32": fp32, "int8": int8}[key]
        if path is not None:
            m["file_mb"] = Measurement(path.stat().st_size / 1e6, "MB")
        rows.append(Report("caption.date", backend, variant, metrics=m))
    return rows
