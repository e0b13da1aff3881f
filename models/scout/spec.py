"""The registered ModelSpec of ltu.scout (a HostProgram: SCOUT over one document).

``run``: ``document`` (the UTF-8 bytes of a text, 1-D uint8) and ``question`` (UTF-8 bytes,
0-padded to MAX_QUESTION) give the ``answer`` (UTF-8, 0-padded to MAX_ANSWER), the estimated
``tokens_read`` and whether the answer is ``grounded`` in an anchored span of the final state.
The policy is the offline keyword policy, a chat LLM on an OpenAI-compatible endpoint with
``--config endpoint=URL llm_model=NAME``, or the keyword forager with a local model's answers,
``--config local_model=smollm2`` (see ``experiment.policy_factory``). For a file on disk,
``python -m neuroedge.models.scout FILE "QUESTION"`` (README, "Using it").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.scout.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

MAX_QUESTION, MAX_ANSWER = 1024, 512
BUILD_KEYS = ("endpoint", "llm_model", "local_model", "local_role", "max_turns")


def encode(text: str, width: int | None, name: str) -> np.ndarray:
    """UTF-8 bytes as uint8: all of them (``width`` None) or 0-padded to ``width``."""
    from neuroedge.text_codes import encode as padded

    if width is None:
        return np.frombuffer(text.encode("utf-8"), np.uint8).copy()
    return padded(text, width, name)


def decode(a: Any, name: str, padded: bool) -> str:
    """The inverse of ``encode``; ScoutError naming the input and the bad byte offset."""
    from neuroedge.models.scout.protocol import ScoutError
    from neuroedge.text_codes import decode_bytes

    arr = np.asarray(a)
    if arr.ndim != 1 or arr.dtype != np.uint8:
        raise ScoutError(f"{name}: expected 1-D uint8 UTF-8 bytes, got {arr.dtype} {arr.shape}")
    try:
        return decode_bytes(arr.tobytes(), name, padded)
    except ValueError as err:
        raise ScoutError(str(err)) from err


def build(config: Mapping[str, Any]) -> HostProgram:
    from neuroedge.models.scout import experiment as X

    cfg = X.check_config(dict(config))  # the bench's DEFAULTS under the user's
    make = X.policy_factory(cfg)

    def ask(document: Any, question: Any) -> dict[str, np.ndarray]:
        from neuroedge.models.scout.agent import forage
        from neuroedge.models.scout.document import Document

        doc = Document.from_text(decode(document, "document", False), "document")
        result = forage(doc, decode(question, "question", True), make(), max_turns=cfg["max_turns"])
        return {
            "answer": encode(result.answer[: MAX_ANSWER // 4], MAX_ANSWER, "answer"),
            "tokens_read": np.asarray([result.ledger.total], np.int64),
            "grounded": np.asarray([result.grounded]),
        }

    return HostProgram(ask, meta={"policy": X.policy_name(cfg)})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """A generated 8,000-token document and its first (single-hop) question."""
    from neuroedge.models.scout.corpus import generate

    corpus = generate(8_000, 2, seed)
    return {
        "document": encode(corpus.text, None, "document"),
        "question": encode(corpus.questions[0].question, MAX_QUESTION, "question"),
    }


SPEC = ModelSpec(
    name="ltu.scout",
    family="algorithm",
    summary="SCOUT: active information foraging over long text, decoupled epistemic state",
    inputs=(
        IOSpec("document", ("bytes",), "uint8"),
        IOSpec("question", (MAX_QUESTION,), "uint8"),
    ),
    outputs=(
        IOSpec("answer", (MAX_ANSWER,), "uint8"),
        IOSpec("tokens_read", (1,), "int64"),
        IOSpec("grounded", (1,), "bool"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "SCOUT: Active Information Foraging for Long-Text Understanding with Decoupled "
        "Epistemic States",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2605.04496",
    ),
    efficiency=Efficiency("step"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.scout.experiment:bench",
    config_keys={"build": BUILD_KEYS, "bench": tuple(BENCH_DEFAULTS)},
)
