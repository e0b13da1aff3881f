"""The registered ModelSpec of apr.conrad (a HostProgram: one open issue repaired by one arm).

``run``: ``issue`` (the index of an open issue of the seed's generated repository) gives the
``patch`` (a unified diff, UTF-8, 0-padded to MAX_PATCH), whether the repository's whole test
suite ``passed`` with it, and the ``model_calls`` spent. ``--config method=...`` picks the arm
(``conrad`` by default; ``baseline``, ``no_guardian``, ``forward``), ``seed`` the
repository, ``model=smollm2`` a real language model for the stages (``model=endpoint
endpoint=URL llm_model=NAME``: a chat LLM on an OpenAI-compatible server); ``samples`` and
``temperature`` are the ``forward`` arm's, ``top_k`` ``conrad``'s and ``no_guardian``'s (refused
with another method); ``smoke``: 7 open issues unless ``targets`` is given. For a repository of
yours, ``python -m neuroedge.models.conrad`` (README).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.conrad.experiment import ARMS
from neuroedge.models.conrad.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

MAX_PATCH = 4096
BUILD_DEFAULTS: dict[str, Any] = {"seed": 0, "method": "conrad", "targets": 20}
SMOKE = {"targets": 7}  # the test matrix: a repository with 7 open issues, unless targets given


def build(config: Mapping[str, Any]) -> HostProgram:
    from neuroedge.models.conrad.corpus import generate
    from neuroedge.models.conrad.experiment import check_config, history_of, run_issue
    from neuroedge.models.conrad.protocol import ConradError
    from neuroedge.text_codes import encode

    from neuroedge.config_values import layered

    cfg = layered(config, BUILD_DEFAULTS, SMOKE)[2]  # smoke's targets under the user's keys
    method = cfg.pop("method")
    if method not in ARMS:
        raise ConradError(f"method {method!r}; expected one of {list(ARMS)}")
    cfg = check_config(cfg, method)  # a key the method never reads is refused
    seed = cfg["seeds"][0]
    corpus = generate(seed, cfg["targets"])
    history = history_of(corpus, cfg["timeout_s"])

    def repair(issue: Any) -> dict[str, np.ndarray]:
        arr = np.asarray(issue).reshape(-1)
        if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ConradError(f"issue: expected one integer index, got {arr.dtype} {arr.shape}")
        i = int(arr[0])
        if not 0 <= i < len(corpus.targets):
            raise ConradError(f"issue index {i} outside [0, {len(corpus.targets)})")
        res = run_issue(
            corpus, corpus.targets[i], history, cfg, 1_000_003 * seed + 101 * i, arms=(method,)
        )
        rec = res[method]
        patch = rec["patch"].encode("utf-8")[: MAX_PATCH - 1].decode("utf-8", "ignore")
        return {
            "patch": encode(patch, MAX_PATCH, "patch"),
            "passed": np.asarray([rec["passed"]]),
            "model_calls": np.asarray([rec["calls"]], np.int64),
        }

    return HostProgram(repair, meta={"method": method, "seed": seed})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """The first open issue."""
    return {"issue": np.asarray([0], np.int64)}


SPEC = ModelSpec(
    name="apr.conrad",
    family="algorithm",
    summary="ConRAD: repository-level repair guided by plans distilled from verified past fixes",
    inputs=(IOSpec("issue", (1,), "int64"),),
    outputs=(
        IOSpec("patch", (MAX_PATCH,), "uint8"),
        IOSpec("passed", (1,), "bool"),
        IOSpec("model_calls", (1,), "int64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "ConRAD: From Patches to Plans, Reasoning Distillation for Repository-Level Program Repair",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2601.23257",
    ),
    efficiency=Efficiency("step"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.conrad.claims:bench",
    config_keys={
        "build": tuple(BUILD_DEFAULTS)
        + ("top_k", "samples", "temperature", "model", "lm_stages", "smoke")
        + ("decode", "endpoint", "llm_model"),
        "bench": tuple(BENCH_DEFAULTS),
    },
)
