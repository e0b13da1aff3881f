"""``neuroedge bench event.bivision``: the noise sweep and the E2S throughput, in one report.

Noise sweep: one clean N-CARS-like and one Gen1-like dataset are generated, then copied with
background activity added at each rate R (same scenes, only the noise differs).
``statnf_e2s`` (STATNF neurons on E2S spikes) and ``lif_histogram`` (LIF on event histograms)
are trained once per task on the clean training split and each trained net is tested on every
rate's test split (``train_noise`` "clean", the default; "same" trains each rate's nets on
that rate's training split, see "Training protocol" below): rows ``<variant>@noise=R`` with
accuracy, map50, map (COCO), and SOPs / MACs / energy / firing rate counted on the
classification test set by forward hooks (both heads run at every step, so the counts cover
the whole network). Both variants get the same data, epochs, batch, learning rate and seed, and
the same OpCounter accounting (binary inputs cost SOPs, non-binary ones MACs; compare
``synaptic_ops_per_sample`` = SOPs + MACs across front ends). ``statnf_e2s`` rows also carry
``e2s_signal_pass`` / ``e2s_noise_pass``: the fraction of scene / background-activity events that
land in a spiking E2S cell (``filter_pass_fractions``), the filter's own selectivity.

Noise rates (decision; the issue fixes only "at least three, including 0"): 0, 2, 5, 10 and
30 Hz per pixel. Background activity grows as light falls, and real sensors reach tens of
Hz/pixel in low light; at 30 Hz/pixel a pixel and polarity gets a noise event in 26 % of the
20 ms steps. 2 and 5 Hz follow the transition where the histogram baseline falls (accuracy,
mean of seeds 0-5 at the default sizes: 0.911 clean, 0.899 at 2 Hz, 0.822 at 5 Hz, 0.640 at
10 Hz, 0.520 at 30 Hz).

Dataset size (decision, measured): 768 training recordings per task; 1536 test recordings
per task by default since the clean protocol (below), 384 before (~28 min per seed on one core
with the "same" protocol at 384; ~8 min per seed with "clean" at 1536). Default seeds 0-5,
``workers`` 2 (~25 min on two cores): the claim is read over seeds, single seeds fail it.
With 192 / 96 both nets underfit (training loss 0.52, clean accuracy
0.75, map50 0.15) and one seed's accuracy moved by up to 0.17 between neighbouring rates, so
the margins were training noise; at 768 / 384, seeds 0-5, STATNF + E2S reaches accuracy
0.92-0.96 and map50 0.47-0.51 at every rate and the accuracy margin grows monotonically. Still
compare means over seeds: one run's map50 moves by up to 0.08 between neighbouring rates
(training scatter; E2S passes 96-98 % of scene events at every rate), while the baseline's
map50 falls by only 0.012 from 2 to 5 Hz (mean of seeds 0-5), a step six seeds do not resolve
(map50 margin +0.235 +- 0.025 at 2 Hz, +0.217 +- 0.028 at 5 Hz).

The lowest step, measured alone (2026-12-04, ``'rates=[0,2]'``, seeds 12-23, declared before
the run, ``workers=2``, 72 min): map50 margin +0.227 +- 0.017 at 0 Hz and +0.231 +- 0.018 at
2 Hz, step +0.005 +- 0.024 paired by seed; accuracy +0.049 / +0.053, step +0.004 +- 0.008. The
0 -> 2 Hz step is not resolved by twelve seeds (it fell by 0.025 in seeds 0-11 of the same
day), so the strict "grows at every step" reading of a sweep that includes 2 Hz is decided by
scatter at that step.

Declared 2026-12-04 before its run: a grid without the 2 Hz rate, ``'rates=[0,5,10,30]'``, on
fresh seeds 24-29 (``workers=2``). 2 Hz leaves both nets where they are at 0 Hz (the step
above), so it tests nothing about growth; 5, 10 and 30 Hz are where the baseline's accuracy
falls measurably (0.82 / 0.64 / 0.52 against 0.91 clean). Reading rule, fixed before the run:
the strict ``claim_check`` verdict on these six seeds decides; if it holds, the default grid
becomes [0, 5, 10, 30]; if not, the defaults stay and the claim stays not met.
Result (``workers=2``, 52 min): it does not hold. Accuracy margin +0.043 / +0.099 / +0.354 /
+0.440 (steps +0.056 +- 0.009, +0.255 +- 0.030, +0.086 +- 0.024: grows, every step resolved);
map50 margin +0.230 / +0.226 / +0.227 / +0.308 (steps -0.003 +- 0.049, +0.000 +- 0.009,
+0.081 +- 0.032): flat from 0 to 10 Hz, up only at 30 Hz. The detection margin is flat because
STATNF + E2S loses map50 with noise at the baseline's pace up to 10 Hz (0.570 / 0.521 / 0.504 /
0.472 against 0.341 / 0.295 / 0.277 / 0.164; E2S lets 12 % of background events through at
every rate), so the grid was not the reason: what the claim needs is a detector whose map50
holds under noise as its classifier's accuracy does (0.953 / 0.960 / 0.951 / 0.945). The
defaults stay.

Training protocol (config ``train_noise``). "same" (the default so far): each rate's nets are
trained on that rate's training split and tested on its test split. Its map50 steps are
dominated by training scatter, not by the inputs: per seed (24-29), STATNF + E2S map50 moves by
up to 0.16 between 0 and 5 Hz (seed 24: 0.666 -> 0.504), while its E2S input at 5 Hz differs
from the clean one in 4.6 % of the spikes (3.5 % added, 1.1 % lost; 10 Hz 7.9 %, 30 Hz 18 %,
detection test split of seed 24). "clean": each variant is trained once per task on the clean
training split and that net is tested at every rate, so each step of the margin compares one
trained net with itself on the same scenes with more background activity: the robustness to
noise the front end was not trained on, which is what a noise filter is for (and ~4x less
training per seed). Declared 2026-12-04 before its run: ``train_noise=clean`` on the default
grid 0/2/5/10/30 Hz, fresh seeds 30-35, ``workers=2``; reading rule fixed before the run: the
strict ``claim_check`` verdict decides; if it holds, "clean" becomes the default protocol (the
"same" results stay reported); if not, the claim stays not met.
Result (16 min): it does not hold, and the defaults stay. Accuracy margin +0.056 / +0.073 /
+0.105 / +0.149 / +0.411, every step resolved (+0.017 +- 0.005, +0.033 +- 0.008, +0.043 +-
0.013, +0.262 +- 0.029); map50 margin +0.251 / +0.263 / +0.252 / +0.298 / +0.383, steps
+0.012 +- 0.012, -0.011 +- 0.019, +0.046 +- 0.015, +0.085 +- 0.026: it falls (unresolved) from
2 to 5 Hz. Even within one trained net the map50 of either variant moves by 0.02-0.08 between
neighbouring rates (the baseline of seed 31: 0.223 at 2 Hz, 0.237 at 5 Hz), and STATNF + E2S
loses map50 as the baseline does at the low rates (0.555 / 0.549 / 0.527 against 0.305 / 0.286
/ 0.276), so at 2 -> 5 Hz both fall by about as much. Stricter E2S support does not change its
input there (detection test split of seed 30, spikes added / lost against clean at 5 Hz:
eps 0.05 +3.4 % / -1.2 %, eps 0.01 +2.7 % / -1.8 %, k0 = 3 with eps 0.02 +3.0 % / -1.5 %), so
tuning the filter is not the lever: the detection head's sensitivity is.

Test-set size (exploratory, after that result, same seeds 30-35 and protocol, 1536 test
recordings per task instead of 384, 25 min): the within-net scatter shrinks and the margins
grow at every step (map50 +0.231 / +0.244 / +0.253 / +0.302 / +0.374, steps +0.013 +- 0.008,
+0.009 +- 0.002, +0.050 +- 0.011, +0.071 +- 0.022; accuracy +0.057 / +0.065 / +0.102 / +0.152
/ +0.407), so the claim check holds there; single seeds still fail it (3 of 6 in accuracy, 2 of
6 in map50), so it is read over seeds. Being chosen after seeing those seeds, this is not the
test. Declared 2026-12-04 before its run, the confirmation: ``train_noise=clean``,
``test_samples=1536``, the default grid, fresh seeds 36-41, ``workers=2``; reading rule: the
strict ``claim_check`` verdict decides; if it holds, the defaults become ``train_noise``
"clean", ``test_samples`` 1536, seeds 0-5 with ``workers`` 2 (the claim is read over seeds),
and the default command is run once more as the README's figure whatever it shows; if it does
not hold, the defaults stay and the claim stays not met.
Result (25 min): it holds. Accuracy margin +0.036 / +0.039 / +0.074 / +0.158 / +0.422 (steps
+0.003 +- 0.001, +0.035 +- 0.005, +0.084 +- 0.018, +0.264 +- 0.016), map50 margin +0.253 /
+0.258 / +0.278 / +0.311 / +0.363 (steps +0.005 +- 0.009, +0.020 +- 0.008, +0.034 +- 0.008,
+0.051 +- 0.008); SOPs + MACs 2.6e5-2.9e5 against 3.6e5-7.1e5. The lowest map50 step is
within its SE (as in every run here: at 2 Hz neither net changes much); the others are
resolved. The defaults are now the confirmed ones (``train_noise`` "clean", ``test_samples``
1536, seeds 0-5, ``workers`` 2); the "same" protocol stays available (``train_noise=same``)
and its results above stay as measured (not met).

The default run covers seeds 0-5; ``--config seed=S`` alone runs that one seed, and
``--config 'seeds=[0,1,2]'`` runs the whole sweep once per seed (each seed generates its own
scenes and noise and initialises the nets from it): rows ``<variant>@noise=R`` are then the
means over the seeds (with ``accuracy_sd`` / ``map50_sd``), rows ``<variant>@noise=R@seed=S``
the single runs, and ``claim`` in report.json (a table in report.md) gives the margins with
their standard error over seeds and the claim check (``claim_check``). Runs are deterministic:
the same seed and rate give the same figures whatever other rates or seeds are in the sweep.
``workers=N`` runs N seeds at a time in their own processes (each on one torch thread): on
this 2-core machine ``workers=2`` halves the wall time of a multi-seed sweep.

Throughput: E2S against tonic's ``ToFrame`` on the same events (the real EVT 2.0 recording
of the shared test data, tiled in time; simulated events if it is absent), timed side by side,
interleaved (``measure_side_by_side``), single thread each: rows ``e2s`` and ``tonic_toframe``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import (
    check_workers,
    map_seeds,
    mean_report,
    paired_difference,
    seed_list,
)
from neuroedge.types import Measurement, Report

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


def shared_recording() -> Path:
    """The real EVT 2.0 recording of the shared test data (``<repo>/../shared``)."""
    import neuroedge

    return (
        Path(neuroedge.__file__).resolve().parents[2]
        / "shared"
        / "data"
        / "events"
        / "evt2_sample.raw"
    )


def throughput_rows(cfg: Mapping[str, Any]) -> tuple[list[Report], str]:
    """Rows ``e2s`` and ``tonic_toframe``: events per second on the same events."""
    import tonic.transforms
    from neuroedge.bench.latency import measure_side_by_side
    from neuroedge.events.io import read_events
    from neuroedge.models.bivision.e2s import E2SParams, e2s

    path = Path(cfg.get("events_file") or shared_recording())
    base = read_events(path)
    base["t"] -= base["t"][0]
    span = int(base["t"][-1]) + 1
    tiles = int(cfg["throughput_tiles"])
    events = np.concatenate([base] * tiles)
    events["t"] += np.repeat(np.arange(tiles) * span, len(base))
    width, height = int(base["x"].max()) + 1, int(base["y"].max()) + 1
    step_us = 20_000  # SFOD's T = 5 steps per 100 ms
    params = E2SParams(steps=-(-span * tiles // step_us), step_us=step_us)
    to_frame = tonic.transforms.ToFrame(sensor_size=(width, height, 2), time_window=step_us)
    e2s(events[:10], width, height, params)  # compile outside the timing
    timings = measure_side_by_side(
        {
            "e2s": lambda: e2s(events, width, height, params),
            "tonic_toframe": lambda: to_frame(events),
        },
        repeats=int(cfg["throughput_repeats"]),
        warmup=1,
        block=1,
    )
    cpu = {
        "e2s": lambda: e2s(events, width, height, params),
        "tonic_toframe": lambda: to_frame(events),
    }
    rows = []
    for name, lat in timings.items():
        rate = len(events) / (float(np.mean(lat.times_ms)) / 1000.0)
        rows.append(
            Report(
                MODEL,
                "host",
                name,
                metrics={
                    "throughput_per_s": Measurement(rate, "events/s"),
                    "throughput_per_cpu_s": Measurement(
                        len(events) / _thread_seconds(cpu[name]), "events/CPU-s"
                    ),
                    "latency_p50_ms": Measurement(lat.percentile(50), "ms"),
                },
                notes=(
                    (
                        f"{len(events)} events ({path.name} x{tiles}), {width}x{height}, "
                        f"{params.steps} steps of {step_us} us, one thread"
                    ),
                ),
            )
        )
    ratio = rows[0].metrics["throughput_per_s"].value / rows[1].metrics["throughput_per_s"].value
    return rows, f"E2S vs tonic ToFrame, same events, same run: {ratio:.2f}x"


def _thread_seconds(fn: Any, repeats: int = 3) -> float:
    """Best CPU time of this thread over ``repeats`` calls: the one-core cost of ``fn`` when
    other processes share the cores (wall time then includes their turns)."""
    import time

    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return max(best, 1e-9)


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


def check_train_noise(value: Any) -> str:
    """``train_noise`` of a config: one of TRAIN_NOISE, else ValueError naming the value."""
    if value not in TRAIN_NOISE:
        raise ValueError(f"train_noise must be one of {', '.join(TRAIN_NOISE)}, got {value!r}")
    return str(value)


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
    from neuroedge.bench.energy import HOROWITZ_45NM
    from neuroedge.bench.sops import OpCounter
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import load_task

    rep = train.VARIANTS[variant][1]
    protocol = check_train_noise(cfg.get("train_noise", "same"))
    trained = {} if trained is None else trained
    metrics: dict[str, Measurement] = {}
    for task in ("classification", "detection"):
        test_set = load_task(folders[(task, rate)], task, "test", rep)
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
        if task == "classification":
            with OpCounter(net) as counter:
                outputs = train.predict(net, test_set.x)
            ops = counter.totals(len(test_set.x))
        else:
            outputs = train.predict(net, test_set.x)
        for name, value in train.task_metrics(*outputs, test_set, task).items():
            metrics[name] = Measurement(value, "fraction")
    metrics.update(
        {
            "sops_per_sample": Measurement(ops.sops_per_sample, "SOP", "counted"),
            "macs_per_sample": Measurement(ops.macs_per_sample, "MAC", "counted"),
            "sops_per_sample_no_first": Measurement(ops.sops_per_sample_no_first, "SOP", "counted"),
            "synaptic_ops_per_sample": Measurement(
                ops.sops_per_sample + ops.macs_per_sample, "op", "counted"
            ),
            "firing_rate": Measurement(ops.firing_rate, "spikes/neuron/step"),
            "energy_uj": HOROWITZ_45NM.measurement(ops.macs_per_sample, ops.sops_per_sample),
        }
    )
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


def noise_sweep_plot(doc: dict[str, Any], path: Path) -> Path | None:
    """Accuracy, mAP50 and SOPs + MACs against the noise rate, one line per variant (the mean
    over seeds, with the standard deviation over seeds as error bars when there are several),
    and the claim's margins with their standard error."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    series: dict[str, list[tuple[float, dict]]] = {}
    for row in doc["rows"]:
        if "@noise=" in row["variant"] and "@seed=" not in row["variant"]:
            name, rate = row["variant"].split("@noise=")
            series.setdefault(name, []).append((float(rate), row["metrics"]))
    if not series:
        return None
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    titles = {"synaptic_ops_per_sample": "SOPs + MACs per sample"}
    for ax, metric in zip(axes, ("accuracy", "map50", "synaptic_ops_per_sample")):
        for name, points in sorted(series.items()):
            points.sort(key=lambda p: p[0])
            spread = [p[1].get(f"{metric}_sd", {}).get("value", 0.0) for p in points]
            ax.errorbar(
                [p[0] for p in points],
                [p[1][metric]["value"] for p in points],
                yerr=spread if any(spread) else None,
                fmt="o-",
                capsize=3,
                label=name,
            )
        ax.set_xlabel("background activity (Hz per pixel)")
        ax.set_title(titles.get(metric, metric))
    axes[0].legend()
    claim, ax = doc.get("claim"), axes[3]
    if claim:
        for metric in ("accuracy", "map50"):
            sem = np.nan_to_num(np.asarray(claim[metric]["margin_sem"], float))
            ax.errorbar(
                claim["rates"],
                claim[metric]["margin"],
                yerr=sem if sem.any() else None,
                fmt="o-",
                capsize=3,
                label=metric,
            )
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.legend()
    ax.set_xlabel("background activity (Hz per pixel)")
    ax.set_title("margin statnf_e2s - lif_histogram (+- SE)")
    protocol = doc.get("config", {}).get("train_noise", "same")
    fig.suptitle(
        "event.bivision on simulated events: noise sweep "
        f"({'trained at each rate' if protocol == 'same' else 'trained on clean data'})"
    )
    fig.tight_layout()
    return finish_figure(fig, path)


def sweep_label(variant: str, rate: float, seed: int | str | None = None) -> str:
    """``<variant>@noise=R`` (the mean over seeds, or the only seed), ``...@seed=S`` per seed."""
    label = f"{variant}@noise={rate:g}"
    return label if seed is None else f"{label}@seed={seed}"


def mean_rows(per_seed: Mapping[tuple[str, float], list[Report]]) -> list[Report]:
    """One ``<variant>@noise=R`` row per (variant, rate): each metric's mean over the seeds,
    plus ``<metric>_sd`` (sample standard deviation) for accuracy and map50."""
    return [
        mean_report(
            reps,
            sweep_label(variant, rate),
            SPREAD_METRICS,
            f"per seed in rows {sweep_label(variant, rate, 'S')}",
        )
        for (variant, rate), reps in per_seed.items()
    ]


def claim_check(
    per_seed: Mapping[tuple[str, float], list[Report]], rates: Sequence[float]
) -> dict[str, Any]:
    """The issue's claim from the measured rows: STATNF + E2S beats LIF + histogram on accuracy
    and map50 at the same or lower SOPs (``synaptic_ops_per_sample``, SOPs + MACs) at every
    rate, and the margin grows with the noise rate.

    Decisions: "beats" compares the means over seeds; "grows" is read strictly, as margins
    (mean over seeds) that never fall from one rate to the next and end above the clean
    margin, for accuracy and for map50 each. The per-rate standard error of the margin (over
    seeds, paired by seed) is reported with it, and so is each step: the change of the margin
    from one rate to the next, per seed, as mean +- standard error over seeds (``step``,
    ``step_sem``), so that a fall smaller than the scatter is visible as such (``|step| <= 2
    SE``: not resolved by these seeds). The verdict stays the strict reading of the means.
    """
    rates = sorted(float(r) for r in rates)
    model, baseline = SWEEP_VARIANTS
    out: dict[str, Any] = {"rates": rates, "seeds": len(per_seed[(model, rates[0])])}
    holds = len(rates) >= 3 and rates[0] == 0.0
    for metric in ("accuracy", "map50"):
        per_rate = [
            np.array([a.metrics[metric].value for a in per_seed[(model, r)]])
            - np.array([b.metrics[metric].value for b in per_seed[(baseline, r)]])
            for r in rates
        ]  # the margin of every seed at every rate
        margin, sem = np.array([paired_difference(m, np.zeros_like(m)) for m in per_rate]).T
        step, step_sem = (
            np.array([paired_difference(hi, lo) for lo, hi in zip(per_rate, per_rate[1:])])
            .reshape(-1, 2)
            .T
        )
        beats = bool(np.all(margin > 0))
        grows = bool(np.all(np.diff(margin) >= 0) and margin[-1] > margin[0])
        out[metric] = {
            "margin": margin.round(4).tolist(),
            "margin_sem": sem.round(4).tolist(),
            "step": step.round(4).tolist(),
            "step_sem": step_sem.round(4).tolist(),
            "beats_at_every_rate": beats,
            "margin_grows": grows,
            "falls_at": [rates[i + 1] for i in np.flatnonzero(np.diff(margin) < 0)],
        }
        holds = holds and beats and grows
    ops = {
        v: [
            float(
                np.mean([r.metrics["synaptic_ops_per_sample"].value for r in per_seed[(v, rate)]])
            )
            for rate in rates
        ]
        for v in SWEEP_VARIANTS
    }
    out["ops_at_most_baseline"] = bool(all(a <= b for a, b in zip(*ops.values())))
    out["holds"] = bool(holds and out["ops_at_most_baseline"])
    return out


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines for the claim check."""
    lines = [
        "## Claim: STATNF + E2S vs LIF + histogram",
        "",
        f"Margins (statnf_e2s - lif_histogram), mean over {claim['seeds']} seed(s), "
        "+- standard error over seeds:",
        "",
        "| rate (Hz/pixel) | accuracy margin | map50 margin |",
        "|---|---|---|",
    ]
    for i, rate in enumerate(claim["rates"]):
        cells = [
            f"{claim[m]['margin'][i]:+.3f} +- {claim[m]['margin_sem'][i]:.3f}"
            for m in ("accuracy", "map50")
        ]
        lines.append(f"| {rate:g} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "Steps: change of the margin from one rate to the next, paired by seed, "
        "+- standard error (a step within 2 SE of 0 is not resolved by these seeds):",
        "",
        "| step (Hz/pixel) | accuracy | map50 |",
        "|---|---|---|",
    ]
    for i, (lo, hi) in enumerate(zip(claim["rates"], claim["rates"][1:])):
        cells = [
            f"{claim[m]['step'][i]:+.3f} +- {claim[m]['step_sem'][i]:.3f}"
            for m in ("accuracy", "map50")
        ]
        lines.append(f"| {lo:g} -> {hi:g} | {cells[0]} | {cells[1]} |")
    lines.append("")
    for metric in ("accuracy", "map50"):
        c = claim[metric]
        lines.append(
            f"- {metric}: beats at every rate: {c['beats_at_every_rate']}; margin "
            f"grows: {c['margin_grows']}"
            + (
                f" (falls at {', '.join(f'{r:g}' for r in c['falls_at'])} Hz)"
                if c["falls_at"]
                else ""
            )
        )
    lines += [
        f"- SOPs + MACs at most the baseline's at every rate: {claim['ops_at_most_baseline']}",
        f"- claim holds: **{claim['holds']}**",
        "",
    ]
    return lines


def sweep_seed(job: tuple[str, Mapping[str, Any], bool]) -> dict[tuple[str, float], Report]:
    """One seed's sweep, ``{(variant, rate): row}``: its datasets under ``out/data``, both
    variants at every rate. Module-level and picklable, so seeds can run in worker processes
    (``workers``); each trains on one torch thread, so a seed gives the same figures alone or
    beside another."""
    out_dir, cfg, progress = job
    folders = sweep_datasets(Path(out_dir), cfg, progress)
    trained: dict[tuple[str, str], Any] = {}  # train_noise "clean": one net per variant, task
    return {
        (variant, float(rate)): variant_row(variant, float(rate), folders, cfg, progress, trained)
        for rate in cfg["rates"]
        for variant in SWEEP_VARIANTS
    }


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the sweep (every seed of ``seeds``) and the throughput comparison; write
    report.json/md and the PNG."""
    from neuroedge.bench.report import build_document, write_report

    cfg = {**SWEEP_DEFAULTS, **(config or {})}
    if len(cfg["rates"]) < 1 or any(float(r) < 0 for r in cfg["rates"]):
        raise ValueError(f"rates must be non-negative noise rates in Hz/pixel, got {cfg['rates']}")
    seeds = seed_list(config or {}, DEFAULT_SEEDS)
    workers = check_workers(cfg.get("workers", 1))
    check_train_noise(cfg.get("train_noise", "same"))
    out = Path(out_dir)
    rows, ratio_line = throughput_rows(cfg)
    jobs = {seed: (str(out), {**cfg, "seed": seed}, progress and workers == 1) for seed in seeds}
    per_seed: dict[tuple[str, float], list[Report]] = {}
    for seed_rows in map_seeds(
        sweep_seed, jobs, workers, "event.bivision seeds", progress
    ).values():
        for key, row in seed_rows.items():
            per_seed.setdefault(key, []).append(row)
    if len(seeds) == 1:
        rows += [reps[0] for reps in per_seed.values()]
    else:
        rows += mean_rows(per_seed)
        rows += [
            replace(r, variant=sweep_label(variant, rate, seed))
            for (variant, rate), reps in per_seed.items()
            for seed, r in zip(seeds, reps)
        ]
    claim = claim_check(per_seed, cfg["rates"])
    doc = build_document(
        MODEL,
        rows,
        config=json.loads(json.dumps(cfg)),
        columns=list(COLUMNS),
        backends=list(backends),
        summary=[ratio_line],
        claim=claim,
    )
    write_report(
        doc,
        out,
        columns=COLUMNS,
        sections=["## Summary", "", f"- {ratio_line}", "", *claim_section(claim)],
        plots=[noise_sweep_plot],
        history=history,
    )
    print(ratio_line)
    print(f"claim (margins grow with noise, {len(seeds)} seed(s)): {claim['holds']}")
    return doc
