"""The registered ModelSpec of snn.lif_convnet."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from neuroedge.config_values import integer
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, IOSpec, Measurement, ModelSpec, TorchProgram

STEPS = 8


def checked_seed(config: Mapping[str, Any]) -> int:
    """``seed`` (default 0) as an integer >= 0; also checks ``eval_batch`` (read later by
    ``evaluate``) so a bad value is refused before build trains or loads anything."""
    eval_batch(config)
    return integer({"seed": 0, **config}, "seed", 0)


def eval_batch(config: Mapping[str, Any]) -> int:
    """``eval_batch`` (default 120) as an integer >= 1: ConfigError otherwise."""
    return integer({"eval_batch": 120, **config}, "eval_batch", 1)


def build(config: Mapping[str, Any]) -> TorchProgram:
    """The convnet, with trained weights when a checkpoint exists (or ``train_if_missing``).

    ``smoke`` (or ``untrained``) builds random weights at once: no training, no checkpoint.
    """
    from neuroedge.checkpoints import load_checkpoint, load_weights, resolve_checkpoint
    from neuroedge.config_values import flag
    from neuroedge.models.lif_convnet import module, train

    seed = checked_seed(config)
    fresh = flag(config, "smoke") or flag(config, "untrained")
    path = resolve_checkpoint(config, SPEC.name, check=not fresh)
    if not fresh and not path.is_file() and flag(config, "train_if_missing"):
        train.train(config.get("train_config"), out=path)
    cfg, trained = dict(train.DEFAULTS), False
    if path.is_file() and not fresh:
        ckpt = load_checkpoint(path, required=("state_dict", "config"))
        cfg.update(ckpt["config"])
        net = train.make_net(cfg)
        load_weights(net, ckpt["state_dict"], path)
        trained = True
    else:
        with seeded(seed):
            net = train.make_net(cfg)
    net.eval()
    return TorchProgram(
        net,
        ("x",),
        module.OUTPUT_NAMES,
        module.STATE_NAMES,
        net.init_state,
        meta={"trained": trained, "checkpoint": str(path) if trained else None},
    )


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """One real digit (batch 1) presented for STEPS steps, picked by ``seed``."""
    from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split

    split = load_digits_split()
    i = int(np.random.default_rng(seed).integers(len(split.x_test)))
    return {"x": direct_encoding(split.x_test[i : i + 1], STEPS)}


def evaluate(
    run: Callable[[dict[str, Any]], Mapping[str, Any]], config: Mapping[str, Any]
) -> dict[str, Measurement]:
    """Top-1 accuracy on the held-out digits, logits averaged over the T steps."""
    from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split

    batch = eval_batch(config)
    split = load_digits_split()
    correct = 0
    for first in range(0, len(split.y_test), batch):
        xs = direct_encoding(split.x_test[first : first + batch], STEPS)
        logits = np.asarray(run({"x": xs})["logits"]).mean(axis=0)
        correct += int((logits.argmax(-1) == split.y_test[first : first + batch]).sum())
    return {"accuracy": Measurement(correct / len(split.y_test), "fraction", "measured")}


SPEC = ModelSpec(
    name="snn.lif_convnet",
    family="snn",
    summary="spiking LIF convnet on scikit-learn digits (8x8), explicit membrane state",
    inputs=(IOSpec("x", ("T", "batch", 1, 8, 8)),),
    outputs=(
        IOSpec("logits", ("T", "batch", 10)),
        IOSpec("spikes1", ("T", "batch", 16, 8, 8)),
        IOSpec("spikes2", ("T", "batch", 32, 4, 4)),
    ),
    build=build,
    example=example,
    efficiency=Efficiency("SOP"),
    tolerance={"onnxrt": 1e-4, "default": 1e-4},
    default_config={"train_if_missing": True},
    train="neuroedge.models.lif_convnet.train:train",
    evaluate=evaluate,
    exportable=("onnx", "nir"),
    # build: build() (train_config goes to train.train when train_if_missing trains) and
    # evaluate() (the generic bench); train: train.DEFAULTS (train.py imports torch)
    config_keys={
        "build": (
            "checkpoint",
            "smoke",
            "untrained",
            "train_if_missing",
            "train_config",
            "seed",
            "eval_batch",
        ),
        "train": ("steps", "epochs", "batch", "lr", "seed", "channels1", "channels2"),
    },
)
