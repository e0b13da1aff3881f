"""The registered ModelSpec of caption.date (a HostProgram: the DATE caption metric).

``run``: ``candidates`` [clips, MAX_BYTES] and ``references`` [clips, refs, MAX_BYTES], UTF-8
bytes 0-padded (``utf8_codes``), give per clip ``date``, ``similarity``, ``discrimination``
and the plain-embedding ``fense_sim``. The example is a generated set of 8 clips captioned by
the ``detailed_correct`` system. For text in Python, call ``functional.evaluate(encoder,
candidates, references, delta)`` directly (README, "Using it").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.models.mecat.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

MAX_BYTES = 512
BUILD_KEYS = ("delta", "model")


def utf8_codes(texts: Sequence[Any]) -> np.ndarray:
    """uint8 [*shape, MAX_BYTES]: each string's UTF-8 bytes, 0-padded (``text_codes``)."""
    from neuroedge.text_codes import encode

    return encode(texts, MAX_BYTES)


def texts_of(name: str, a: Any, ndim: int) -> np.ndarray:
    """``a`` (uint8 UTF-8 codes, ``ndim`` axes) back to strings; InputError (a ValueError)
    naming the entry and byte offset that is not UTF-8, or bytes after the 0 padding (the
    run names the user's file before it)."""
    import torch
    from neuroedge.errors import InputError
    from neuroedge.text_codes import decode

    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != ndim or a.shape[-1] != MAX_BYTES or 0 in a.shape:
        want = ", ".join(["clips", "refs"][: ndim - 1] + [str(MAX_BYTES)])
        raise InputError(f"{name}: expected [{want}] UTF-8 codes, got {list(a.shape)}")
    try:
        return decode(a, name)
    except InputError:
        raise
    except ValueError as err:
        raise InputError(str(err)) from err


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(candidates, references)`` -> per-clip DATE scores."""
    import torch
    from neuroedge.models.mecat import experiment as X
    from neuroedge.models.mecat.functional import evaluate

    cfg = X.check_config({**BENCH_DEFAULTS, **dict(config)})
    enc = X.encoder(cfg["model"])

    def score(candidates: Any, references: Any) -> dict[str, np.ndarray]:
        cands, refs = texts_of("candidates", candidates, 2), texts_of("references", references, 3)
        if len(cands) != len(refs):
            raise ValueError(f"candidates has {len(cands)} clips but references has {len(refs)}")
        with torch.no_grad():
            out = evaluate(enc, list(cands), [list(r) for r in refs], cfg["delta"])
        return {k: v.double().numpy() for k, v in out.items()}

    return HostProgram(score, meta={"delta": cfg["delta"], **enc.describe()})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Eight generated clips, three references each, captioned by ``detailed_correct``."""
    from neuroedge.models.mecat.data import scene_set

    sets = scene_set(8, 3, seed)
    return {
        "candidates": utf8_codes(sets.systems["detailed_correct"]),
        "references": utf8_codes(sets.references),
    }


SPEC = ModelSpec(
    name="caption.date",
    family="algorithm",
    summary="MECAT's DATE caption metric: TF-IDF-weighted MiniLM embeddings, similarity x "
    "discrimination",
    inputs=(
        IOSpec("candidates", ("clips", MAX_BYTES), "uint8"),
        IOSpec("references", ("clips", "refs", MAX_BYTES), "uint8"),
    ),
    outputs=(
        IOSpec("date", ("clips",), "float64"),
        IOSpec("similarity", ("clips",), "float64"),
        IOSpec("discrimination", ("clips",), "float64"),
        IOSpec("fense_sim", ("clips",), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "MECAT: A Multi-Experts Constructed Benchmark for Fine-Grained Audio Understanding "
        "Tasks (DATE metric)",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2507.23511",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 1e-6},
    bench="neuroedge.models.mecat.experiment:bench",
    seed_sweep=True,
    bench_backends=("host", "onnxrt"),
    config_keys={"build": BUILD_KEYS, "bench": tuple(BENCH_DEFAULTS)},
)
