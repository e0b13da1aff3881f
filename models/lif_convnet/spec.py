"""The registered ModelSpec of snn.lif_convnet.

The built net is fixed by the training settings ``NET_KEYS`` (time steps, data split seed and
channel counts): a checkpoint's saved ones, else the config's, else ``train.DEFAULTS``.
``example`` and ``evaluate`` follow them (a net trained with ``seed=3`` is evaluated on the
seed-3 test split, for its ``steps``), and the spec's axes ``channels1`` and ``channels2``
are fixed by the built net (``TorchProgram.meta["axes"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from neuroedge.config_values import check_split, integer
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, IOSpec, Measurement, ModelSpec, TorchProgram

STEPS = 8  # the default time steps (train.DEFAULTS["steps"])
# train keys that fix the built net (and its examples); build reads them too
NET_KEYS = ("steps", "seed", "channels1", "channels2")
# the key of a build's meta["config"] holding the training settings of the net it built
BUILT = "built_net"


def checked_seed(config: Mapping[str, Any]) -> int:
    """``seed`` (default 0) as an integer >= 0; also checks ``eval_batch`` (read later by
    ``evaluate``) so a bad value is refused before build trains or loads anything."""
    eval_batch(config)
    return integer({"seed": 0, **config}, "seed", 0)


def eval_batch(config: Mapping[str, Any]) -> int:
    """``eval_batch`` (default 120) as an integer >= 1: ConfigError otherwise."""
    return integer({"eval_batch": 120, **config}, "eval_batch", 1)


def _fresh(config: Mapping[str, Any]) -> bool:
    """``smoke`` or ``untrained``; with a checkpoint or train_config refused (not read)."""
    from neuroedge.config_values import fresh_build

    return fresh_build(config)


def _checkpoint(config: Mapping[str, Any]) -> tuple[Path, dict[str, Any] | None]:
    """(path, loaded checkpoint or None): the one a build with ``config`` reads, unless
    ``smoke``/``untrained`` or there is none yet. Its saved config is checked and settled over
    ``train.DEFAULTS`` (a checkpoint saved before a key existed took the default)."""
    from neuroedge.checkpoints import read_checkpoint, resolve_checkpoint
    from neuroedge.checkpoint_configs import checked_saved_config
    from neuroedge.models.lif_convnet import train

    fresh = _fresh(config)
    path = resolve_checkpoint(config, SPEC.name, check=not fresh)
    if fresh or not path.is_file():
        return path, None
    ckpt, identity = read_checkpoint(path, required=("state_dict", "config"))
    settled = checked_saved_config(
        ckpt["config"],
        path,
        lambda saved: train.check_config({k: saved[k] for k in train.DEFAULTS if k in saved}),
        train.DEFAULTS,
    )
    return path, {**ckpt, "config": settled, "file": identity}


def _training_request(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``train_if_missing`` build trains with: ``train_config`` over the config's own
    ``NET_KEYS``; a ``train_config`` value that contradicts one of them is refused."""
    from neuroedge.config_values import mapping
    from neuroedge.errors import ConfigError

    own = {k: config[k] for k in NET_KEYS if k in config}
    asked = mapping({"train_config": config.get("train_config")}, "train_config")
    for key in sorted(set(own) & set(asked)):
        if own[key] != asked[key]:
            raise ConfigError(
                f"{key}={own[key]!r} contradicts train_config {key}={asked[key]!r}: give it once"
            )
    return {**own, **asked}


def _asked_as_trained(config: Mapping[str, Any], saved: Mapping[str, Any], path: Path) -> None:
    """ConfigError unless each ``train_config`` value is the one the checkpoint at ``path``
    was trained with (``saved``): with a checkpoint, train_config would be ignored silently."""
    from neuroedge.config_values import mapping
    from neuroedge.errors import ConfigError
    from neuroedge.models.lif_convnet import train

    asked = mapping({"train_config": config.get("train_config")}, "train_config")
    wanted = train.check_config(asked)
    for key in asked:
        if wanted[key] != saved[key]:
            raise ConfigError(
                f"train_config {key}={asked[key]!r} contradicts the checkpoint {path} (trained "
                f"with {key}={saved[key]!r}; train_config is what train_if_missing trains with):"
                " drop it or name another checkpoint"
            )


def _settle(config: Mapping[str, Any]) -> tuple[Path, dict[str, Any] | None, dict[str, Any]]:
    """(checkpoint path, loaded checkpoint or None, settled training settings): see
    ``net_config``."""
    from neuroedge.config_values import flag
    from neuroedge.errors import ConfigError
    from neuroedge.models.lif_convnet import train

    checked_seed(config)
    own = train.check_config({k: config[k] for k in NET_KEYS if k in config})
    path, ckpt = _checkpoint(config)
    if ckpt is None:
        if not _fresh(config) and flag(config, "train_if_missing"):
            return path, None, train.check_config(_training_request(config))
        return path, None, own
    saved = ckpt["config"]
    for key in NET_KEYS:
        if key in config and own[key] != saved[key]:
            raise ConfigError(
                f"{key}={config[key]!r} contradicts the checkpoint {path} (trained with "
                f"{key}={saved[key]!r}): drop {key} or name another checkpoint"
            )
    _asked_as_trained(config, saved, path)
    return path, ckpt, saved


def net_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The training settings (``train.DEFAULTS`` keys) of the net a build with ``config``
    takes: the checkpoint's saved ones (read once), else what ``train_if_missing`` would train
    with, else the config's ``NET_KEYS`` over the defaults. A config ``steps``, ``seed``,
    ``channels1`` or ``channels2``, or a ``train_config`` value, that contradicts the
    checkpoint is refused (ConfigError): the checkpoint's would win silently.

    A build's ``meta["config"]`` holds the settings of the net it built under ``BUILT``: they
    are taken as they are, without reading the checkpoint file again (another process, e.g.
    ``neuroedge train``, may have replaced it since: its split is not this net's)."""
    from neuroedge.errors import ConfigError
    from neuroedge.models.lif_convnet import train

    cfg = dict(config or {})
    if BUILT not in cfg:
        return _settle(cfg)[2]
    checked_seed(cfg)
    if not isinstance(cfg[BUILT], Mapping):
        raise ConfigError(f"{BUILT}={cfg[BUILT]!r}: expected the settings of a built net")
    built = train.check_config(cfg[BUILT])
    own = train.check_config({k: cfg[k] for k in NET_KEYS if k in cfg})
    for key in NET_KEYS:
        if key in cfg and own[key] != built[key]:
            raise ConfigError(
                f"{key}={cfg[key]!r} contradicts the built net ({BUILT} {key}={built[key]!r})"
                f": drop {key}"
            )
    return built


def build(config: Mapping[str, Any]) -> TorchProgram:
    """The convnet, with trained weights when a checkpoint exists (or ``train_if_missing``).

    ``smoke`` (or ``untrained``) builds random weights at once: no training, no checkpoint.
    The net's settings (``NET_KEYS``) are the checkpoint's, else the config's (``net_config``);
    they go to ``meta["config"]`` and the channel counts to ``meta["axes"]``.
    """
    from neuroedge.atomic import check_writable
    from neuroedge.checkpoints import load_weights
    from neuroedge.config_values import flag
    from neuroedge.models.lif_convnet import module, train

    path, ckpt, cfg = _settle(config)
    if ckpt is None and not _fresh(config) and flag(config, "train_if_missing"):
        request = _training_request(config)
        check_writable(path)  # where the checkpoint goes: before the training, not after it
        train.train(request, out=path)
        path, ckpt, cfg = _settle(config)
    with seeded(cfg["seed"]):  # the init draws: untrained weights, or overwritten by the
        net = train.make_net(cfg)  # checkpoint's; either way the caller's generator stays put
    if ckpt is not None:
        net = load_weights(net, ckpt["state_dict"], path)
    net.eval()
    trained = ckpt is not None
    settled = {k: cfg[k] for k in NET_KEYS}
    return TorchProgram(
        net,
        ("x",),
        module.OUTPUT_NAMES,
        module.STATE_NAMES,
        net.init_state,
        meta={
            "trained": trained,
            "checkpoint": str(path) if trained else None,
            # what example_for and evaluate read to follow this net (ONNX export, calibration)
            "config": {
                **config,
                **settled,
                **({"checkpoint": str(path)} if trained else {}),
                BUILT: dict(cfg),
            },
            "axes": {"channels1": net.channels[0], "channels2": net.channels[1]},
            "weights": _weights(ckpt),
        },
    )


def _weights(ckpt: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a report says of the built net's weights: the checkpoint file read (path, sha256,
    bytes) and what it saved of its training (settings, thread counts, metrics)."""
    from neuroedge.bench.provenance import UNKNOWN_THREADS

    if ckpt is None:
        return {"trained": False, "note": "untrained (random initialisation)"}
    return {
        **ckpt["file"],
        "trained_with": dict(ckpt["config"]),
        "train_threads": _plain(ckpt.get("threads", UNKNOWN_THREADS)),
        "train_metrics": _plain(ckpt.get("metrics")),
    }


def _plain(value: Any) -> Any:
    """``value`` where JSON holds it, else its repr (a checkpoint may hold a tensor there)."""
    import json

    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)[:200]
    return value


def example(
    seed: int = 0, config: Mapping[str, Any] | None = None, split: str = "test"
) -> dict[str, np.ndarray]:
    """One real test digit (batch 1) of the built net's split, presented for its ``steps``
    (``net_config``: the checkpoint's, else the config's), picked by ``seed``; a training
    digit with ``split="train"`` (int8 calibration: never a digit ``evaluate`` scores)."""
    from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split

    cfg = net_config(config)
    data = load_digits_split(cfg["seed"])
    xs = data.x_train if check_split(split) == "train" else data.x_test
    i = int(np.random.default_rng(seed).integers(len(xs)))
    return {"x": direct_encoding(xs[i : i + 1], cfg["steps"])}


def evaluate(
    run: Callable[[dict[str, Any]], Mapping[str, Any]], config: Mapping[str, Any]
) -> dict[str, Measurement]:
    """Top-1 accuracy on the digits held out from the built net's training (the test split of
    its ``seed``), presented for its ``steps``, logits averaged over the T steps."""
    from neuroedge.models.lif_convnet.data import direct_encoding, load_digits_split

    batch = eval_batch(config)
    cfg = net_config(config)
    split = load_digits_split(cfg["seed"])
    correct = 0
    for first in range(0, len(split.y_test), batch):
        xs = direct_encoding(split.x_test[first : first + batch], cfg["steps"])
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
        IOSpec("spikes1", ("T", "batch", "channels1", 8, 8)),
        IOSpec("spikes2", ("T", "batch", "channels2", 4, 4)),
    ),
    build=build,
    example=example,
    efficiency=Efficiency("SOP"),
    tolerance={"onnxrt": 1e-4, "default": 1e-4},
    default_config={"train_if_missing": True},
    train="neuroedge.models.lif_convnet.train:train",
    evaluate=evaluate,
    exportable=("onnx", "nir"),
    # build: build() (train_config goes to train.train when train_if_missing trains; NET_KEYS
    # fix a net without checkpoint and must agree with a checkpoint's) and evaluate() (the
    # generic bench); train: train.DEFAULTS (train.py imports torch)
    config_keys={
        "build": (
            "checkpoint",
            "smoke",
            "untrained",
            "train_if_missing",
            "train_config",
            "eval_batch",
            *NET_KEYS,
        ),
        "train": ("steps", "epochs", "batch", "lr", "seed", "channels1", "channels2"),
    },
)
