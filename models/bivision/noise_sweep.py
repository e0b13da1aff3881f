"""The noise sweep of ``neuroedge bench event.bivision``: its datasets, the E2S filter's pass
fractions, one row per variant and noise rate, and one seed's whole sweep (the module
docstring of ``neuroedge.models.bivision.bench`` describes the protocol)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.bivision.bench_settings import MODEL, SWEEP_VARIANTS, check_train_noise
from neuroedge.models.bivision.sweep_report import sweep_label
from neuroedge.types import Measurement, Report


def sweep_datasets(out: Path, cfg: Mapping[str, Any], progress: bool) -> dict[tuple, Path]:
    """``{(task, rate): folder}``: clean datasets generated once, noisy copies per rate."""
    from neuroedge.events.generate import add_noise_to_dataset
    from neuroedge.models.bivision.data import ensure_dataset

    folders = {}
    for task in ("classification", "detection"):
        clean = ensure_dataset(out / "data", task, {**cfg, "noise_rate_hz": 0.0}, progress)
        folders[(task, "clean")] = clean
        for rate in cfg["rates"]:
            folders[(task, float(rate))] = (
                clean
                if float(rate) == 0
                else (
                    add_noise_to_dataset(
                        clean,
                        out / "data" / f"{clean.name}_noise{rate:g}hz",
                        float(rate),
                        seed=int(cfg["seed"]) + 1,
                    )
                )
            )
    return folders


def filter_pass_fractions(clean: Path, rate: float, seed: int) -> dict[str, Measurement]:
    """How well E2S separates scene from background activity on the clean classification test
    recordings plus fresh noise at ``rate``: the fraction of scene events (``e2s_signal_pass``)
    and of noise events (``e2s_noise_pass``, only for rate > 0) that fall in a (step, polarity,
    pixel) cell where E2S spikes. Hot pixels of the clean recordings count as scene."""
    from neuroedge.events.datasets import ncars_files
    from neuroedge.events.io import read_events
    from neuroedge.events.simulator import DVSParams, noise_events
    from neuroedge.models.bivision.data import DEFAULT_E2S, dataset_sensor
    from neuroedge.models.bivision.e2s import e2s as e2s_spikes

    sensor, params = dataset_sensor(clean), DEFAULT_E2S
    passed, total = np.zeros(2), np.zeros(2)  # [scene, noise]
    for k, (path, _) in enumerate(ncars_files(clean, "test")):
        scene = read_events(path, sensor=sensor)
        noise = noise_events(
            sensor,
            0,
            int(params.steps * params.step_us),
            DVSParams(noise_rate_hz=rate),
            np.random.default_rng([seed, k]),
        )
        events = np.concatenate([scene, noise])
        is_noise = np.r_[np.zeros(len(scene), bool), np.ones(len(noise), bool)]
        order = np.argsort(events["t"], kind="stable")
        events, is_noise = events[order], is_noise[order]
        spikes = e2s_spikes(events, sensor.width, sensor.height, params)
        step = events["t"] // params.step_us
        inside = step < params.steps
        fired = np.zeros(len(events), bool)
        fired[inside] = (
            spikes[
                step[inside],
                events["p"][inside].astype(np.int64),
                events["y"][inside],
                events["x"][inside],
            ]
            > 0
        )
        for j, mask in enumerate((~is_noise & inside, is_noise & inside)):
            passed[j] += fired[mask].sum()
            total[j] += mask.sum()
    fractions = passed / np.maximum(total, 1)
    out = {"e2s_signal_pass": Measurement(float(fractions[0]), "fraction", "counted")}
    if rate > 0:
        out["e2s_noise_pass"] = Measurement(float(fractions[1]), "fraction", "counted")
    return out


def variant_row(
    variant: str,
    rate: float,
    folders: Mapping[tuple, Path],
    cfg: Mapping[str, Any],
    progress: bool,
    trained: dict[tuple[str, str], Any] | None = None,
) -> Report:
    """Test one variant at one noise rate on both tasks. ``train_noise`` "same": trained on
    that rate's training split; "clean": trained once on the clean training split (kept in
    ``trained``, keyed by (variant, task), and reused at every rate)."""
    from neuroedge.bench.sops import OpCounter
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import load_task

    rep = train.VARIANTS[variant][1]
    protocol = check_train_noise(cfg.get("train_noise", "same"))
    trained = {} if trained is None else trained
    metrics: dict[str, Measurement] = {}
    for task in ("classification", "detection"):
        test_set = load_task(folders[(task, rate)], task, "test", rep)
        net = _trained_net(variant, task, rate, folders, cfg, progress, trained, protocol)
        if task == "classification":
            with OpCounter(net) as counter:
                outputs = train.predict(net, test_set.x)
            ops = counter.totals(len(test_set.x))
        else:
            outputs = train.predict(net, test_set.x)
        for name, value in train.task_metrics(*outputs, test_set, task).items():
            metrics[name] = Measurement(value, "fraction")
    metrics.update(_cost_metrics(ops))
    if rep == "e2s":
        metrics.update(
            filter_pass_fractions(folders[("classification", "clean")], rate, int(cfg["seed"]) + 2)
        )
    trained_on = (
        f"trained on {rate:g} Hz/pixel noise"
        if protocol == "same"
        else "trained once on the clean training split"
    )
    return Report(
        MODEL,
        "host",
        sweep_label(variant, rate),
        metrics=metrics,
        notes=(f"{trained_on}, tested at {rate:g} Hz/pixel",),
    )


def _trained_net(
    variant: str,
    task: str,
    rate: float,
    folders: Mapping[tuple, Path],
    cfg: Mapping[str, Any],
    progress: bool,
    trained: dict[tuple[str, str], Any],
    protocol: str,
) -> Any:
    """The net of ``variant`` for ``task``, trained on ``rate``'s training split ("same") or
    once on the clean one and then taken from ``trained`` ("clean")."""
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import load_task

    rep = train.VARIANTS[variant][1]
    key = (variant, task)
    net = trained.get(key) if protocol == "clean" else None
    if net is None:
        train_root = folders[(task, rate if protocol == "same" else "clean")]
        net = train.make_net({**cfg, "variant": variant})
        train.fit(
            net,
            load_task(train_root, task, "train", rep),
            task,
            {**cfg, "variant": variant},
            progress,
        )
        if protocol == "clean":
            trained[key] = net
    return net


def _cost_metrics(ops: Any) -> dict[str, Measurement]:
    """SOPs, MACs, their sum, firing rate and energy per sample from the counted ``ops``.

    Two totals: ``synaptic_ops_per_sample`` = SOPs + MACs with every element of a non-binary
    input charged (a dense accelerator's cost), and ``effective_ops_per_sample`` = SOPs +
    MACs on nonzero inputs only (NeuroBench's Effective_ACs + Effective_MACs; the histogram
    baseline's first layer reads mostly zero bins, which this count does not charge)."""
    from neuroedge.bench.energy import HOROWITZ_45NM

    return {
        "sops_per_sample": Measurement(ops.sops_per_sample, "SOP", "counted"),
        "effective_ops_per_sample": Measurement(ops.effective_ops_per_sample, "op", "counted"),
        "macs_per_sample": Measurement(ops.macs_per_sample, "MAC", "counted"),
        "effective_macs_per_sample": Measurement(ops.effective_macs_per_sample, "MAC", "counted"),
        "sops_per_sample_no_first": Measurement(ops.sops_per_sample_no_first, "SOP", "counted"),
        "synaptic_ops_per_sample": Measurement(
            ops.sops_per_sample + ops.macs_per_sample, "op", "counted"
        ),
        "firing_rate": Measurement(ops.firing_rate, "spikes/neuron/step"),
        "energy_uj": HOROWITZ_45NM.measurement(ops.macs_per_sample, ops.sops_per_sample),
    }


def sweep_seed(job: tuple[str, Mapping[str, Any], bool]) -> dict[tuple[str, float], Report]:
    """One seed's sweep, ``{(variant, rate): row}``: its datasets under ``out/data``, both
    variants at every rate; the clean-trained classification nets saved under ``out/nets``
    (``deployment.save_nets``), replacing the seed's nets of any earlier run there.
    Module-level and picklable, so seeds can run in worker processes (``workers``); each trains
    on one torch thread, so a seed gives the same figures alone or beside another."""
    from neuroedge.models.bivision.deployment import remove_nets, save_nets
    from neuroedge.seeding import torch_threads

    out_dir, cfg, progress = job
    # an earlier run's nets in the same folder would pass for this run's (train_noise=same
    # saves none): the deployment rows must time only what this run trained
    remove_nets(Path(out_dir), int(cfg["seed"]))
    # the tests and filter counts on the training's `threads` (``train.fit``), as its nets,
    # not on the caller's count (which comes back after the seed)
    with torch_threads(int(cfg.get("threads", 1))):
        folders = sweep_datasets(Path(out_dir), cfg, progress)
        trained: dict[tuple[str, str], Any] = {}  # train_noise "clean": one per variant, task
        rows = {
            (variant, float(rate)): variant_row(
                variant, float(rate), folders, cfg, progress, trained
            )
            for rate in cfg["rates"]
            for variant in SWEEP_VARIANTS
        }
    classify = {key: net for key, net in trained.items() if key[1] == "classification"}
    save_nets(Path(out_dir), int(cfg["seed"]), classify, cfg)  # for the deployment rows
    return rows
