"""The registered ModelSpec of event.bivision (STATNF + E2S + BiSNet, T = 5).

The sensor is square, ``size`` x ``size`` pixels (a multiple of 8; ``SIZE`` = 32 unless a
checkpoint or the config says otherwise): a net trained on your own recordings with
``neuroedge train event.bivision --config data=FOLDER size=S`` runs and exports at S. The
spec's axes ``size`` and ``grid`` (= size / 4, the detection map) are fixed by the built net
(``TorchProgram.meta["axes"]``), so an input of another size is refused before the net runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from neuroedge.config_values import SEED_MAX, fresh_build, integer
from neuroedge.models.bivision.bench import SWEEP_DEFAULTS
from neuroedge.models.bivision.bench_settings import MAX_SIZE
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, IOSpec, Measurement, ModelSpec, Paper, TorchProgram

SIZE = 32  # sensor pixels per side of the registered model
STEPS = 5  # E2S time steps (20 ms each over a 100 ms window)


def _checkpoint(config: Mapping[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """(path, loaded checkpoint or None): the one a build with the user's ``config`` reads
    (``checkpoint``, else where ``neuroedge train`` saves a net of ``task``), unless ``smoke``.
    Its saved size and variant are checked, and a config ``size``, ``variant``, ``seed`` or
    ``task`` that contradicts its saved one is refused (the checkpoint's would win silently)."""
    from neuroedge.checkpoints import load_checkpoint, resolve_checkpoint
    from neuroedge.errors import ArtifactError, ConfigError
    from neuroedge.models.bivision.train import VARIANTS

    smoke = fresh_build(config)  # smoke=true with a checkpoint: refused, it would not be read
    if "seed" in config:  # checked before it is compared with a checkpoint's (True == 1)
        integer(config, "seed", 0, SEED_MAX)
    path = resolve_checkpoint(config, checkpoint_name(config), check=not smoke)
    if smoke or not path.is_file():
        return path, None
    ckpt = load_checkpoint(path, required=("state_dict", "config"))
    saved = ckpt["config"]
    if not isinstance(saved, Mapping) or not {"variant", "size"} <= set(saved):
        raise ArtifactError(f"{path}: checkpoint config lacks 'variant' and 'size'")
    size = saved["size"]
    if isinstance(size, bool) or not isinstance(size, int) or not 8 <= size <= MAX_SIZE or size % 8:
        raise ArtifactError(
            f"{path}: checkpoint config size={size!r}: expected a multiple of 8 in 8..{MAX_SIZE}"
        )
    if saved["variant"] not in VARIANTS:
        raise ArtifactError(
            f"{path}: checkpoint config variant={saved['variant']!r}: expected one of "
            f"{sorted(VARIANTS)}"
        )
    for key in ("size", "variant", "seed", "task"):  # a key it did not save: not compared
        if key in config and key in saved and config[key] != saved[key]:
            raise ConfigError(
                f"{key}={config[key]!r} contradicts the checkpoint {path} (trained with "
                f"{key}={saved[key]!r}): drop {key} or name another checkpoint"
            )
    _check_representation(path, ckpt)
    return path, ckpt


def checkpoint_name(config: Mapping[str, Any]) -> str:
    """The name of the checkpoint ``neuroedge train event.bivision`` saves for the config's
    ``task`` (default classification), and a build reads unless ``checkpoint`` names one."""
    from neuroedge.config_values import choice
    from neuroedge.models.bivision.data import TASKS

    return f"{SPEC.name}.{choice({'task': TASKS[0], **config}, 'task', TASKS)}"


def _check_representation(path: Any, ckpt: Mapping[str, Any]) -> None:
    """ArtifactError naming the file for a checkpoint whose net was trained on another input
    encoding than this neuroedge's (``representation_version``): its accuracy would be off
    without a word (0.585 on E2S of before a0ec326, 0.55 on today's, same split)."""
    from neuroedge.errors import ArtifactError
    from neuroedge.models.bivision.train import REPRESENTATION_VERSION

    if "representation_version" not in ckpt:
        return  # saved before the key was: a build notes it (``_note_unversioned``)
    version = ckpt["representation_version"]
    if type(version) is not int or version != REPRESENTATION_VERSION:
        raise ArtifactError(
            f"{path}: checkpoint representation_version={version!r}, this neuroedge encodes "
            f"inputs as version {REPRESENTATION_VERSION}: retrain it (`neuroedge train "
            "event.bivision`)"
        )


def _note_unversioned(path: Any, ckpt: Mapping[str, Any], variant: str) -> None:
    """One line on stderr for an E2S net whose checkpoint records no representation version:
    it may predate the current E2S encoding (a0ec326), which cannot be told from the file."""
    import sys

    from neuroedge.models.bivision.train import VARIANTS

    if "representation_version" not in ckpt and VARIANTS[variant][1] == "e2s":
        print(
            f"{SPEC.name}: note: {path} records no representation_version: it may predate the "
            "current E2S encoding (2026-12-02), and then scores lower; retrain it to be sure",
            file=sys.stderr,
        )


def built_geometry(config: Mapping[str, Any] | None = None) -> tuple[int, str]:
    """(sensor side, variant) a build with ``config`` takes: the checkpoint's (read once),
    else the config's ``size`` and ``variant``, else ``SIZE`` and the training default."""
    cfg = dict(config or {})
    return _geometry(cfg, _checkpoint(cfg)[1])


def _geometry(cfg: Mapping[str, Any], ckpt: Mapping[str, Any] | None) -> tuple[int, str]:
    """``built_geometry`` with the checkpoint already read (None: untrained)."""
    from neuroedge.config_values import choice
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision.train import DEFAULTS, VARIANTS

    if ckpt:
        return int(ckpt["config"]["size"]), str(ckpt["config"]["variant"])
    size = integer({"size": SIZE, **cfg}, "size", 8, MAX_SIZE)
    if size % 8:
        raise ConfigError(f"size={size}: expected a multiple of 8 (three stride-2 stages)")
    return size, choice({**DEFAULTS, **cfg}, "variant", tuple(VARIANTS))


def sensor_size(config: Mapping[str, Any] | None = None) -> int:
    """The square sensor side a build with ``config`` takes (``built_geometry``)."""
    return built_geometry(config)[0]


def build(config: Mapping[str, Any]) -> TorchProgram:
    """BiSNet (``variant`` statnf_e2s or lif_histogram), with a checkpoint's weights when one
    is given (``checkpoint``) or exists at the default path of its ``task`` (classification,
    or detection: what ``neuroedge train event.bivision --config task=detection`` saved);
    ``smoke`` forces untrained. The sensor side is the checkpoint's (else ``size``, else
    ``SIZE``); ``meta["task"]`` is the task its weights were trained for."""
    from neuroedge.checkpoints import load_weights
    from neuroedge.models.bivision import neuromorphic, train

    path, ckpt = _checkpoint(config)  # the user's keys: defaults contradict no checkpoint
    size, variant = _geometry(config, ckpt)  # checked: a ConfigError, not make_net's
    cfg = {**train.DEFAULTS, **config, "size": size, "variant": variant}
    trained = ckpt is not None
    if ckpt is not None:
        _note_unversioned(path, ckpt, variant)
        net = train.make_net(cfg)
        load_weights(net, ckpt["state_dict"], path)
    else:
        with seeded(integer(cfg, "seed", 0, SEED_MAX)):
            net = train.make_net(cfg)
    net.eval()
    return TorchProgram(
        net,
        ("x",),
        ("logits", "detection"),
        net.state_names(),
        net.init_state,
        meta={
            "trained": trained,
            "variant": cfg["variant"],
            "task": ckpt["config"].get("task") if ckpt else None,
            "checkpoint": str(path) if trained else None,
            "nir": neuromorphic.refuse_full_graph,
            "config": {**config, "size": size, "variant": variant},
            "axes": {"size": net.size, "grid": net.size // 4},
        },
    )


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """The input x (T, 1, 2, S, S) of one simulated 100 ms recording of a moving car, in the
    representation of the net a build with ``config`` makes (``built_geometry``: E2S spikes
    for statnf_e2s, the log event histogram for lif_histogram; S = 32 by default)."""
    from neuroedge.events.core import SensorSize
    from neuroedge.events.generate import random_object
    from neuroedge.events.simulator import DVSParams, simulate
    from neuroedge.models.bivision.data import represent
    from neuroedge.models.bivision.train import VARIANTS

    size, variant = built_geometry(config)
    sensor, rng = SensorSize(size, size), np.random.default_rng(seed)
    car = random_object("car", sensor, 100_000, rng)
    events = simulate([car], sensor, 100_000, DVSParams(noise_rate_hz=5.0), seed)
    x = represent(events, sensor, VARIANTS[variant][1])[:, None]
    return {"x": np.ascontiguousarray(x, dtype=np.float32)}


def evaluate(
    run: Callable[[dict[str, Any]], Mapping[str, Any]], config: Mapping[str, Any]
) -> dict[str, Measurement]:
    """Accuracy on a generated N-CARS-like test split (``eval_samples``, default 64),
    through whichever backend ``run`` belongs to, in the representation of the net's variant
    (E2S for statnf_e2s, the event histogram for lif_histogram)."""
    import tempfile

    from neuroedge.models.bivision.data import ensure_dataset, load_task
    from neuroedge.models.bivision.train import VARIANTS

    size, variant = built_geometry(config)
    cfg = {
        "train_samples": 0,
        "test_samples": int(config.get("eval_samples", 64)),
        "size": size,
        "seed": int(config.get("seed", 0)) + 100,
        "noise_rate_hz": float(config.get("noise_rate_hz", 0.0)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = load_task(
            ensure_dataset(tmp, "classification", cfg, progress=False),
            "classification",
            "test",
            VARIANTS[variant][1],
        )
    logits = np.asarray(
        run({"x": np.ascontiguousarray(data.x.transpose(1, 0, 2, 3, 4))})["logits"]
    ).mean(axis=0)
    accuracy = float((logits.argmax(-1) == data.labels).mean())
    return {"accuracy": Measurement(accuracy, "fraction", "measured")}


def _train(config: Mapping[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    from neuroedge.models.bivision.data import dataset_sensor
    from neuroedge.models.bivision.train import train

    cfg = dict(config or {})
    size = SIZE
    if isinstance(cfg.get("data"), str) and cfg["data"] and "size" not in cfg:  # your sensor
        from neuroedge.errors import ConfigError

        sensor, where = dataset_sensor(cfg["data"]), f"{cfg['data']}/config.json"
        if sensor.width != sensor.height or sensor.width % 8:
            raise ConfigError(
                f"{where}: a {sensor.width}x{sensor.height} sensor; the net takes a square "
                "sensor whose side is a multiple of 8 (three stride-2 stages): crop or rescale "
                "the events first"
            )
        size = sensor.width
    return train({"size": size, **cfg}, out)


SPEC = ModelSpec(
    name="event.bivision",
    family="event",
    summary="STATNF + E2S + BiSNet spiking detector/classifier for event cameras (32x32 "
    "by default, or the trained size; T=5)",
    inputs=(IOSpec("x", ("T", "batch", 2, "size", "size")),),
    outputs=(
        IOSpec("logits", ("T", "batch", 2)),
        IOSpec("detection", ("T", "batch", 5, "grid", "grid")),
    ),
    build=build,
    example=example,
    paper=Paper(
        "Bio-Vision-Inspired Spiking Neural Networks for Object Detection with Event Cameras",
        "ICML 2026",
        2026,
        "https://icml.cc/virtual/2026/poster/64518",
    ),
    efficiency=Efficiency("SOP"),
    tolerance={"onnxrt": 1e-4, "default": 1e-4},
    default_config={},
    train=_train,
    bench="neuroedge.models.bivision.bench:bench",
    recording="neuroedge.models.bivision.recording:recording_inputs",
    bench_backends=("host", "onnxrt"),
    seed_sweep=True,
    evaluate=evaluate,
    exportable=("onnx",),
    # build: build() and make_net (size: the sensor side when no checkpoint; task: which
    # default checkpoint, as train saves it); evaluate()'s
    # eval_samples and noise_rate_hz are left out: with a bench hook the generic bench never
    # runs it.
    # train: train.DEFAULTS (train.py imports torch) plus data and fit's threads. bench: the
    # sweep defaults, the seed list (bench.seeds), the recording for the throughput rows and
    # what train.fit reads (variant and noise_rate_hz are set by the sweep itself)
    config_keys={
        "build": ("checkpoint", "smoke", "seed", "variant", "size", "task"),
        "train": (
            "task",
            "variant",
            "epochs",
            "batch",
            "lr",
            "seed",
            "size",
            "train_samples",
            "test_samples",
            "noise_rate_hz",
            "augment",
            "data",
            "threads",
        ),
        "bench": (*SWEEP_DEFAULTS, "seeds", "events_file", "threads", "augment"),
    },
)
