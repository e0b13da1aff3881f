"""apr.conrad's refusal of a key the user gives that the run would never read
(experiment.check_config calls it once the values are checked): the stage model's keys
(``decode``, ``lm_stages``) and the keys only some arms read (``ARM_KEYS``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.errors import ConfigError

# The keys only some arms read (experiment._forward; choose_exemplar in run_issue): the key,
# those arms, what it is.
ARM_KEYS = (
    ("samples", ("forward",), "forward exploration's passes"),
    ("temperature", ("forward",), "forward exploration's sampling temperature"),
    ("top_k", ("conrad", "no_guardian"), "the exemplars retrieved"),
)
WHY = {
    "scripted": "the scripted model has no language model",
    "endpoint": "a chat LLM on an endpoint always writes its reply",
}


def check_unread(given: Mapping[str, Any], model: str, arms: Sequence[str], by: str) -> None:
    """A key of the user's config (``given``) that the chosen stage model or arms never read,
    refused naming it and why: ``decode`` (a local model's way to answer) with the scripted
    model or an endpoint; ``lm_stages`` with the scripted model (no stage has a language
    model); a key of ``ARM_KEYS`` when none of its arms is run (``by``: ``method``, the one
    arm of a build, or ``arms``, the bench's)."""
    if "decode" in given and model in WHY:
        raise ConfigError(
            f"decode={given['decode']!r} with model={model!r}: decode is how a local model "
            f"(model=smollm2 or a model file / folder) answers, and {WHY[model]}; leave decode "
            "out, or name a local model"
        )
    if "lm_stages" in given and model == "scripted":
        raise ConfigError(
            f"lm_stages={given['lm_stages']!r} with model='scripted': lm_stages are the stages "
            "a language model decides, and the scripted model decides every stage; leave "
            "lm_stages out, or name a model (smollm2, a model file / folder or endpoint)"
        )
    run = f"method={arms[0]!r}" if by == "method" else f"arms={list(arms)!r}"
    for key, readers, what in ARM_KEYS:
        if key in given and not set(readers) & set(arms):
            names = " or ".join(readers)
            raise ConfigError(
                f"{key}={given[key]!r} ({what}) with {run}: only the {names} arm reads it, "
                f"and it is not run; leave {key} out, or run {names}"
            )
