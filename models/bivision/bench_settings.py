"""Names, report columns and defaults of ``neuroedge bench event.bivision`` (the module
docstring of ``neuroedge.models.bivision.bench`` gives the reasons for the defaults)."""

from __future__ import annotations

from typing import Any

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
