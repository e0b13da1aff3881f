"""The registered ModelSpec of vla.specprune.

The program is the policy network with SpecPrune's in-graph pruning for one controller mode:
``(primary, wrist, proprio, text, prior) -> (actions, scores)``. ``config`` keys: ``smoke``
(untrained network, no files touched), ``method`` (unpruned, specprune, fastv, random),
``mode`` (coarse, fine), ``checkpoint``, ``train_if_missing``, ``train_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.specprune.data import vocabulary
from neuroedge.models.specprune.train import DEFAULTS as TRAIN_DEFAULTS
from neuroedge.config_values import SEED_MAX, flag, fresh_build, integer
from neuroedge.errors import ConfigError
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, IOSpec, ModelSpec, Paper, TorchProgram

IMAGE, TEXT_LEN, VISUAL, CHUNK = 64, 8, 128, 8


def load_trained(config: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(trained policy, its training config); trains first if allowed and no checkpoint exists.
    ``train_config`` is what that training takes: a value of it the existing checkpoint was
    not trained with is refused (ConfigError; it would be ignored), ``threads`` excepted (how
    to train, not which policy)."""
    from neuroedge.atomic import check_writable
    from neuroedge.checkpoint_configs import refuse_ignored_train_config
    from neuroedge.checkpoints import resolve_checkpoint
    from neuroedge.config_values import mapping
    from neuroedge.errors import ArtifactError
    from neuroedge.models.specprune import train

    # a non-mapping, a key training does not read or a bad value: before the demos or a load
    wanted = train.training_config(config.get("train_config"))
    path = resolve_checkpoint(config, SPEC.name)
    if not path.is_file():
        if not config.get("train_if_missing", True):
            raise ArtifactError(
                f"{path}: no trained vla.specprune checkpoint; run "
                "`neuroedge train vla.specprune` first"
            )
        check_writable(path)  # before the training (about 75 minutes), not after it
        train.train(wanted, out=path)
    policy, saved = train.load_policy_checkpoint(path)
    asked = mapping(config, "train_config")
    refuse_ignored_train_config(asked, wanted, saved, path, exempt=("threads",))
    return policy, saved


def build(config: Mapping[str, Any]) -> TorchProgram:
    from neuroedge.models.specprune import train
    from neuroedge.models.specprune.functional import PruneConfig, check_mode
    from neuroedge.models.specprune.module import METHODS

    seed = _build_seed(config)  # before a checkpoint is trained (about 75 minutes)
    method, mode = str(config.get("method", "specprune")), str(config.get("mode", "coarse"))
    if method not in METHODS:  # before a checkpoint is trained (minutes) or loaded
        raise ConfigError(f"method={method!r}: expected one of {list(METHODS)}")
    try:
        check_mode(mode)
    except ValueError as err:
        raise ConfigError(f"mode={mode!r}: {err}") from err
    if fresh_build(config):  # with a checkpoint or train_config: refused, as neither is read
        with seeded(seed):
            model, trained = train.make_policy(train.DEFAULTS).eval(), False
    else:
        model, trained = load_trained(config)[0], True
    prune = PruneConfig()
    model.configure(method, prune.budget(mode), prune.k_local(mode), prune)
    return TorchProgram(
        model,
        ("primary", "wrist", "proprio", "text", "prior"),
        ("actions", "scores"),
        meta={"trained": trained, "mode": mode},
    )


def _build_seed(config: Mapping[str, Any]) -> int:
    """Config ``seed`` (default 0), an integer in 0..2**32-1 (1.5 ran as 1), of a ``smoke``
    build only: it draws the untrained weights; a trained build's are its checkpoint's."""
    seed = integer({"seed": 0, **config}, "seed", 0, SEED_MAX)
    if "seed" in config and not flag(config, "smoke"):
        raise ConfigError(
            f"seed={config['seed']!r}: seed draws the untrained weights of smoke=true only; a "
            "trained build takes its checkpoint's weights, so the seed would be ignored (to "
            'train with it: train_config={"seed": N}; or add smoke=true)'
        )
    return seed


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """One generated observation (random frames, a real instruction) with a 10% prior; for
    ``method=random`` the prior is uniform noise, as the caller of that baseline passes (its
    top-k of a 0/1 mask is all ties, which torch and ONNX Runtime break differently)."""
    from neuroedge.models.specprune.data import tokenize
    from neuroedge.models.specprune.sim import TASKS

    rng = np.random.default_rng(seed)
    instruction = sorted(TASKS.values(), key=lambda t: t.env_name)[seed % len(TASKS)].instruction
    out = {
        "primary": rng.integers(0, 256, (1, IMAGE, IMAGE, 3), dtype=np.uint8),
        "wrist": rng.integers(0, 256, (1, IMAGE, IMAGE, 3), dtype=np.uint8),
        "proprio": rng.normal(0, 0.3, (1, 4)).astype(np.float32),
        "text": tokenize(instruction)[None],
    }
    draws = rng.random((1, VISUAL))  # drawn last: the other arrays do not depend on method
    noise = (config or {}).get("method") == "random"
    return {**out, "prior": (draws if noise else draws < 0.1).astype(np.float32)}


SPEC = ModelSpec(
    name="vla.specprune",
    family="vla",
    summary="SpecPrune-VLA two-level token pruning + action-aware controller on a small "
    "OpenVLA-OFT-shaped policy in Meta-World (MuJoCo)",
    inputs=(
        IOSpec("primary", ("batch", IMAGE, IMAGE, 3), "uint8"),
        IOSpec("wrist", ("batch", IMAGE, IMAGE, 3), "uint8"),
        IOSpec("proprio", ("batch", 4)),
        IOSpec("text", ("batch", TEXT_LEN), "int64", bounds=(0, len(vocabulary()) - 1)),
        IOSpec("prior", ("batch", VISUAL)),
    ),
    outputs=(IOSpec("actions", ("batch", CHUNK, 4)), IOSpec("scores", ("batch", VISUAL))),
    build=build,
    example=example,
    paper=Paper(
        "SpecPrune-VLA: Accelerating Vision-Language-Action Models via Action-Aware "
        "Self-Speculative Pruning",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2509.05614",
    ),
    efficiency=Efficiency("FLOP"),
    tolerance={"onnxrt": 1e-4, "default": 1e-4},
    default_config={"train_if_missing": True},
    train="neuroedge.models.specprune.train:train",
    bench="neuroedge.models.specprune.bench:run_bench",
    bench_backends=("host", "onnxrt"),
    exportable=("onnx",),  # one static-budget graph per (method, mode); see deploy.py
    # bench: run_bench's own keys plus load_trained's (checkpoint, train_if_missing,
    # train_config); its "episodes" are evaluation episodes per task
    config_keys={
        "build": (
            "smoke",
            "seed",
            "mode",
            "method",
            "checkpoint",
            "train_if_missing",
            "train_config",
        ),
        "train": tuple(TRAIN_DEFAULTS),
        "bench": (
            "threads",
            "tasks",
            "episodes",
            "baseline_budget",
            "lookback",
            "candidates",
            "seed0",
            "budgets",
            "blank_views",
            "checkpoint",
            "eval_backend",
            "workers",
            "repeats",
            "train_if_missing",
            "train_config",
        ),
    },
)
