"""Names, report columns and defaults of ``neuroedge bench event.bivision`` (the module
docstring of ``neuroedge.models.bivision.bench`` gives the reasons for the defaults)."""

from __future__ import annotations

import os
from typing import Any

from neuroedge.errors import ConfigError

MODEL = "event.bivision"
COLUMNS = (
    "accuracy",
    "map50",
    "map",
    "sops_per_sample",
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
    from neuroedge.config_values import integer, number, number_list

    check_path(cfg, "events_file" if bench else "data")
    out = dict(cfg)
    counts = ("train_samples", "test_samples", "epochs", "batch")
    for key in counts + (("throughput_tiles", "throughput_repeats") if bench else ()):
        out[key] = integer(cfg, key, 1, 10**7)
    out["size"] = integer(cfg, "size", 8, 1024)
    if out["size"] % 8:
        raise ConfigError(f"size={out['size']}: expected a multiple of 8 (three stride-2 stages)")
    out["lr"] = number(cfg, "lr", 0, 10, open_low=True)
    out["seed"] = integer(cfg, "seed", 0, 2**32 - 1)
    if bench:
        number_list(cfg, "rates", 0)  # checked; kept as given (they label the rows)
    else:
        out["noise_rate_hz"] = number(cfg, "noise_rate_hz", 0, 1e6)
    return out
