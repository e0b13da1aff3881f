"""The registered ModelSpec of rl.prefix_rft (a HostProgram: a policy trained at build).

``run``: the greedy answers of a policy to digit prompts, and their exact-match reward (the
task: reverse the prompt, then EOS; functional.py). The policy is the weak base fine-tuned by
``variant`` (``prefix_rft``, the default; ``rft``, ``sft``, or ``base`` for the base alone)
for ``steps`` steps (at ``lr``) from the biased demonstrations (about 10 s; ``smoke``: 5 + 3
steps where ``base_steps`` and ``steps`` are not given; ``variant=base`` refuses ``steps`` and
``lr``, which it never reads). For your own policy,
``functional.rl_step(policy, opt, prompts, cfg, step, gen, hybrid=True)`` is one Prefix-RFT
batch and ``functional.prefix_advantages`` its token advantages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.prefix_rft.experiment import DEFAULTS as BENCH_DEFAULTS
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

DIGITS, LENGTH = 6, 6  # functional.DIGITS / LENGTH (functional.py imports torch)
VARIANTS = ("prefix_rft", "rft", "sft", "base")
BUILD_KEYS = ("variant", "seed", "hidden", "base_steps", "steps", "lr", "smoke")
SMOKE = {"base_steps": 5, "steps": 3}  # a smoke build's values where the config gives none


def check_prompts(prompts: Any) -> Any:
    """An int64 tensor [batch, LENGTH] of digits; ValueError naming the row, position, value."""
    import torch

    if isinstance(prompts, torch.Tensor):
        prompts = prompts.detach().cpu().numpy()
    try:
        a = np.asarray(prompts)
    except ValueError as err:  # ragged rows
        raise ValueError(f"prompts: not a [rows, {LENGTH}] array of digits ({err})") from None
    if a.ndim != 2 or a.shape[1] != LENGTH or len(a) == 0:
        raise ValueError(f"prompts: expected [rows >= 1, {LENGTH}] digits, got {list(a.shape)}")
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"prompts: expected integer digits 0..{DIGITS - 1}, got dtype {a.dtype}")
    bad = np.argwhere((a < 0) | (a >= DIGITS))
    if len(bad):
        row, pos = bad[0]
        raise ValueError(
            f"prompts row {row}, position {pos}: {a[row, pos]} is not a digit 0..{DIGITS - 1}"
        )
    return torch.as_tensor(a, dtype=torch.int64)


def build_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The variant and the checked config of a build (``config_values.layered``: the bench's
    defaults, ``smoke``'s values under the keys not given, the keys given). ConfigError names a
    bad value, and ``steps`` or ``lr`` given with ``variant=base`` (the base alone: no
    fine-tuning reads them)."""
    from neuroedge.config_values import layered
    from neuroedge.models.prefix_rft.experiment import check_config

    why = "the base alone, base_steps of SFT; steps and lr are the fine-tuning's"
    unread = {"base": (("steps", "lr"), why)}
    variant, _, cfg = layered(config, BENCH_DEFAULTS, SMOKE, VARIANTS, unread=unread)
    # early_steps is a bench key (its reward windows), not a build key, and the build reads no
    # windows: it follows steps here, so a short build is not refused over a key it cannot set
    cfg = check_config({**cfg, "early_steps": 1})
    cfg["early_steps"] = min(BENCH_DEFAULTS["early_steps"], cfg["steps"])
    return str(variant), cfg


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(prompts)`` -> ``answers`` (greedy, EOS = 6 last) and ``reward`` (exact match)."""
    import torch
    from neuroedge.models.prefix_rft import functional as F
    from neuroedge.models.prefix_rft.experiment import run_arm, train_base
    from neuroedge.seeding import one_thread

    variant, cfg = build_config(config)
    train, held_out = F.split(cfg["seed"])
    test = torch.as_tensor(F.index_prompts(held_out))
    with one_thread():
        policy = train_base(cfg, train)
        if variant != "base":
            policy, _ = run_arm(policy, variant, cfg, train, test)
    held_out_accuracy = F.evaluate(policy, test)["accuracy"]

    def answer(prompts: Any) -> dict[str, np.ndarray]:
        x = check_prompts(prompts)
        with torch.no_grad():
            out = policy.generate(x, greedy=True)
        return {"answers": out.numpy(), "reward": F.reward(x, out).double().numpy()}

    meta = {
        "variant": variant,
        "params": sum(p.numel() for p in policy.parameters()),
        "held_out_accuracy": held_out_accuracy,
    }
    return HostProgram(answer, meta=meta)


def trained_seed(config: Mapping[str, Any] | None = None) -> int:
    """The seed whose split a build with ``config`` trains the policy on (``seed``, else the
    bench default; the policy is trained at build, so there is no checkpoint to read it from).
    ConfigError names a bad value."""
    from neuroedge.config_values import integer

    return integer({"seed": BENCH_DEFAULTS["seed"], **(config or {})}, "seed", 0, 2**31 - 1)


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Eight held-out prompts of the split the policy of a build with ``config`` trained on
    (``trained_seed``), so never training prompts; ``seed`` picks which eight."""
    from neuroedge.models.prefix_rft import functional as F

    _, held_out = F.split(trained_seed(config))
    pick = (8 * int(seed) + np.arange(8)) % len(held_out)
    return {"prompts": F.index_prompts(held_out[pick]).astype(np.int64)}


SPEC = ModelSpec(
    name="rl.prefix_rft",
    family="ann",
    summary="Prefix-RFT: SFT and RL fine-tuning blended by demonstration-prefix rollouts",
    inputs=(IOSpec("prompts", ("batch", LENGTH), "int64"),),
    outputs=(
        IOSpec("answers", ("batch", LENGTH + 1), "int64"),
        IOSpec("reward", ("batch",), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Blending Supervised and Reinforcement Fine-Tuning with Prefix Sampling",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2507.01679",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"default": 0.0},
    bench="neuroedge.models.prefix_rft.experiment:bench",
    seed_sweep=True,
    config_keys={"build": BUILD_KEYS, "bench": tuple(BENCH_DEFAULTS)},
)
