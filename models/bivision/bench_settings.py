"""Names, report columns and defaults of ``neuroedge bench event.bivision`` (the module
docstring of ``neuroedge.models.bivision.bench`` gives the reasons for the defaults)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from neuroedge.errors import ConfigError

MODEL = "event.bivision"
MAX_NOISE_HZ = 1e6  # background activity per pixel, for training and the sweep's rates
# The largest sensor side S of a net, in training, the bench and a build alike (a build takes
# only what training can make: it accepted up to 4096, training 1024). At S = 1024 one 100 ms
# window is 10.5M input values (5 steps x 2 x S x S), under a recording's default batch of
# 2**24 values (``recording.DEFAULT_INPUT_VALUES``); a generated dataset holds that per sample.
MAX_SIZE = 1024
COLUMNS = (
    "accuracy",
    "map50",
    "map",
    "sops_per_sample",
    "effective_ops_per_sample",
    "macs_per_sample",
    "synaptic_ops_per_sample",
    "energy_uj",
    "e2s_signal_pass",
    "e2s_noise_pass",
    "firing_rate",
    "throughput_per_s",
    "throughput_per_cpu_s",
    "latency_p50_ms",
    "max_abs_err",
)
SWEEP_DEFAULTS: dict[str, Any] = {
    "rates": [0, 2, 5, 10, 30],
    "size": 32,
    "train_samples": 768,
    "test_samples": 1536,
    "epochs": 20,
    "batch": 16,
    "lr": 5e-3,
    "seed": 0,
    "workers": 2,
    "throughput_tiles": 10,
    "throughput_repeats": 5,
    "train_noise": "clean",
}
DEFAULT_SEEDS = (0, 1, 2, 3, 4, 5)  # the claim is read over seeds (single seeds fail it)
TRAIN_NOISE = ("same", "clean")  # train at each tested rate, or once on clean data
SPREAD_METRICS = ("accuracy", "map50")  # mean rows also carry their spread over seeds
SWEEP_VARIANTS = ("statnf_e2s", "lif_histogram")  # the paper's design, then the baseline


def check_train_noise(value: Any) -> str:
    """``train_noise`` of a config: one of TRAIN_NOISE, else ValueError naming the value."""
    if value not in TRAIN_NOISE:
        raise ValueError(f"train_noise must be one of {', '.join(TRAIN_NOISE)}, got {value!r}")
    return str(value)


# the path keys: what each names (absent or None: the default recording / a generated dataset)
PATH_KEYS = {"events_file": "an event recording", "data": "a dataset folder"}


def check_path(cfg: Any, key: str) -> None:
    """ConfigError naming ``key`` and its value unless ``cfg[key]`` is absent, None or a
    non-empty path (``--config events_file=123`` parses as a number, ``'data=[1]'`` a list)."""
    value = cfg.get(key)
    if value is None:
        return
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ConfigError(
            f"{key}={value!r}: expected the path of {PATH_KEYS[key]} (a non-empty string; leave "
            f"the key out for the default), got {type(value).__name__}"
        )


def check_values(cfg: dict[str, Any], bench: bool) -> dict[str, Any]:
    """Every number and path the bench (``bench``) or training reads, before any work:
    ConfigError naming the key and value (``train_samples=2.5`` trained on 2 recordings,
    ``epochs=0`` saved an untrained net, a negative rate or seed ran, ``events_file=123`` ended
    in a TypeError)."""
    from neuroedge.config_values import MAX_LR, SEED_MAX, integer, number

    check_path(cfg, "events_file" if bench else "data")
    out = dict(cfg)
    counts = ("train_samples", "test_samples", "epochs", "batch")
    for key in counts + (("throughput_tiles", "throughput_repeats") if bench else ()):
        out[key] = integer(cfg, key, 1, 10**7)
    out["size"] = integer(cfg, "size", 8, MAX_SIZE)
    if out["size"] % 8:
        raise ConfigError(f"size={out['size']}: expected a multiple of 8 (three stride-2 stages)")
    out["lr"] = number(cfg, "lr", 0, MAX_LR, open_low=True)
    out["seed"] = integer(cfg, "seed", 0, SEED_MAX)
    if bench:
        check_rates(cfg)  # kept as given (they label the rows)
    else:
        out["noise_rate_hz"] = number(cfg, "noise_rate_hz", 0, MAX_NOISE_HZ)
    check_fit_choices(cfg, bench)
    return out


def check_rates(cfg: Mapping[str, Any]) -> list[float]:
    """The bench's ``rates`` as floats: ConfigError for a rate outside [0, MAX_NOISE_HZ] (1e9
    ran out of memory after the throughput rows) or one given twice (``[0, 5, 5.0]`` passed
    the claim's "three rates" rule with two)."""
    from neuroedge.config_values import number_list

    rates = number_list(cfg, "rates", 0, high=MAX_NOISE_HZ)
    repeated = sorted({r for r in rates if rates.count(r) > 1})  # -0.0 == 0.0 counts too
    if repeated:
        raise ConfigError(
            f"rates={cfg['rates']!r}: {', '.join(f'{r:g}' for r in repeated)} given more than "
            "once (each rate is one row of the sweep and one point of the claim; give it once)"
        )
    return rates


def check_fit_choices(cfg: Mapping[str, Any], bench: bool) -> None:
    """ConfigError for the names and thread count that training reads (an unknown variant
    was a KeyError, threads=0 a RuntimeError, both after the data was generated; threads=2.5
    ran on 2). The bench sets variant and task itself, so only training reads them."""
    from neuroedge.config_values import choice, integer
    from neuroedge.models.bivision.data import TASKS
    from neuroedge.models.bivision.train import DEFAULTS, VARIANTS, augmentations

    if not bench:
        choice(cfg, "task", TASKS)
        choice(cfg, "variant", tuple(VARIANTS))
    if "threads" in cfg:
        integer(cfg, "threads", 1, 4096)  # torch takes any count >= 1; the cap catches typos
    augmentations(cfg.get("augment", DEFAULTS["augment"]))
