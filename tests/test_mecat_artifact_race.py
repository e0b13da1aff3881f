"""caption.date's deployment rows of runs at once: each times and quantizes its own encoder.

Every run used to export the encoder to the same ``.neuroedge/artifacts/onnxrt/caption.date/
encoder_fp32.onnx``, quantize it to ``encoder_int8.onnx`` beside it and load both back, so
two benches at once (a job array, two shells, another ``model=``) measured the other run's
encoder (``max_abs_err`` 1.0 instead of 0) or crashed on ONNX Runtime's temporary file beside
the graph. The pair now goes to a folder of its own named by the hash of its files
(``deploy.export_pair``, ``neuroedge.backends.export_folders``).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from neuroedge.backends.export_folders import content_hash  # noqa: E402
from neuroedge.models.mecat import deploy  # noqa: E402
from neuroedge.models.mecat.fields import DELTA  # noqa: E402
from neuroedge.models.mecat.minilm import MiniLM  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "dog", "barks", "rain", "car"]
CANDS = {"right": ["a dog barks", "rain"], "other": ["rain", "a car"]}
REFS = [["a dog barks"], ["rain on a car"]]
CFG = {"encode_batch": 2, "timing_repeats": 1, "delta": DELTA["long"]}


def _tiny_encoder(folder: Path, seed: int, hidden: int = 8) -> MiniLM:
    """A one-layer random BERT folder (MiniLM's files) of weights ``seed``, loaded."""
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n", "utf-8")
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": hidden}
    (folder / "config.json").write_text(json.dumps({**cfg, "layer_norm_eps": 1e-12}))
    p = "encoder.layer.0"
    shapes = {
        "embeddings.word_embeddings.weight": (len(WORDS), hidden),
        "embeddings.position_embeddings.weight": (16, hidden),
        "embeddings.token_type_embeddings.weight": (2, hidden),
        **{f"{p}.attention.self.{m}.weight": (hidden, hidden) for m in ("query", "key", "value")},
        f"{p}.attention.output.dense.weight": (hidden, hidden),
        f"{p}.intermediate.dense.weight": (2 * hidden, hidden),
        f"{p}.output.dense.weight": (hidden, 2 * hidden),
    }
    for name in list(shapes):  # every dense layer's bias
        if name.startswith(p):
            shapes[name.replace(".weight", ".bias")] = shapes[name][:1]
    for norm in (
        "embeddings.LayerNorm",
        f"{p}.attention.output.LayerNorm",
        f"{p}.output.LayerNorm",
    ):
        shapes[f"{norm}.weight"] = shapes[f"{norm}.bias"] = (hidden,)
    rng, header, data = np.random.default_rng(seed), {}, b""
    for name, shape in shapes.items():
        raw = rng.normal(0, 0.5, shape).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data)] * 2}
        header[name]["data_offsets"][1] += len(raw)
        data += raw
    head = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + data)
    return MiniLM(folder)


def _errors(rows: list[Any]) -> dict[str, float]:
    return {r.variant: r.metrics["max_abs_err"].value for r in rows if r.backend == "onnxrt"}


def test_a_run_exporting_meanwhile_never_lends_its_encoder(monkeypatch, tmp_path) -> None:
    # run B exports another encoder into the same folder while run A is between its fp32
    # export and its int8 quantization (two benches at once): each measures its own graphs
    enc_a, enc_b = (_tiny_encoder(tmp_path / f"enc{s}", s) for s in (0, 1))
    folder, quantize, other = tmp_path / "artifacts", deploy.quantize_int8, {}

    def meanwhile(src: Any, dst: Any) -> Path:
        if not other:
            other["b"] = None  # B's own quantization goes straight through
            other["b"] = deploy.deployment_rows(enc_b, CANDS, REFS, CFG, folder)
        return quantize(src, dst)

    monkeypatch.setattr(deploy, "quantize_int8", meanwhile)
    rows_a = deploy.deployment_rows(enc_a, CANDS, REFS, CFG, folder)
    for errors in (_errors(rows_a), _errors(other["b"])):
        # was 1.27 and 1.28 for run A: B's graphs, another encoder's embeddings
        assert errors["encoder"] < 1e-4, errors
        assert errors["encoder_int8"] < 0.05, errors  # ~0.003 its own, ~1 another's


def test_the_same_encoder_reuses_its_folder_and_leaves_nothing_behind(tmp_path) -> None:
    enc = [_tiny_encoder(tmp_path / f"enc{s}", s) for s in (0, 1)]
    folder = tmp_path / "artifacts"
    paths = [deploy.export_pair(enc[s], folder) for s in (0, 1, 0)]
    assert paths[0] == paths[2] != paths[1]
    assert sorted(p.name for p in folder.iterdir()) == sorted({p.parent.name for p in paths})
    for fp32 in paths:  # the name is the hash of the pair, which belongs together
        assert fp32.name == "encoder_fp32.onnx"
        assert sorted(p.name for p in fp32.parent.iterdir()) == [fp32.name, "encoder_int8.onnx"]
        assert fp32.parent.name == f"encoder-{content_hash(fp32.parent)[:16]}"
