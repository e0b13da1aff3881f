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
the same OpCounter accounting (binary inputs cost SOPs, non-binary ones MACs; compare totals
across front ends). Two totals, and the claim's "same or lower SOPs" must hold on both:
``synaptic_ops_per_sample`` = SOPs + MACs with every element of an analog input charged (what
a dense accelerator computes), and ``effective_ops_per_sample`` = SOPs + MACs on nonzero
inputs only (NeuroBench's Effective_ACs + Effective_MACs). They differ only where a layer reads
analog input with zeros: the histogram baseline's first layer, whose log-histogram input is
~93 % zero bins on clean data (176,720 dense against 12,332 effective MACs per sample, 2026-12-07
audit), so the baseline is cheaper under NeuroBench's count than under the dense one; E2S
feeds spikes, so its two totals are equal. The verdicts recorded below (all before that audit)
compared the dense count only; the effective count and the rule that both must hold came
after, so they need the default command run again. ``statnf_e2s`` rows also carry
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

Training protocol (config ``train_noise``). "same" (formerly default): each rate's nets are
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

Throughput: rows ``e2s`` and ``tonic_toframe``, E2S against tonic's ``ToFrame`` on the same
events (``neuroedge.models.bivision.e2s_throughput``).

Deployment: rows ``statnf_e2s@deploy`` on host and onnxrt (the default backends; ``--backend
host`` alone leaves them out), the first seed's clean-trained STATNF + E2S net timed, checked
and scored on both (``neuroedge.models.bivision.deployment``).

Code: names and defaults in ``bench_settings``, the sweep in ``noise_sweep``, its report (claim
check, plot) in ``sweep_report``, the throughput rows in ``e2s_throughput`` (all in
``neuroedge.models.bivision``); this module runs them and writes the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from neuroedge.bench.seeds import check_workers, map_seeds, recorded_config, seed_list
from neuroedge.config_values import check_seed_keys
from neuroedge.distributed import world
from neuroedge.seeding import torch_threads
from neuroedge.models.bivision.bench_settings import (  # public names, kept importable from here
    COLUMNS,
    DEFAULT_SEEDS,
    MODEL,
    SPREAD_METRICS,  # noqa: F401
    SWEEP_DEFAULTS,
    SWEEP_VARIANTS,  # noqa: F401
    TRAIN_NOISE,  # noqa: F401
    check_train_noise,
    check_values,
)
from neuroedge.models.bivision.deployment import deployment_rows
from neuroedge.models.bivision.e2s_throughput import (  # public names, kept importable from here
    shared_recording,  # noqa: F401
    throughput_rows,
)
from neuroedge.models.bivision.noise_sweep import (  # public names, kept importable from here
    filter_pass_fractions,  # noqa: F401
    sweep_datasets,  # noqa: F401
    sweep_seed,
    variant_row,  # noqa: F401
)
from neuroedge.models.bivision.sweep_report import (  # public names, kept importable from here
    claim_check,
    claim_section,
    mean_rows,
    noise_sweep_plot,
    sweep_label,
)
from neuroedge.types import Report


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

    check_seed_keys(config or {})  # the user's own keys: seed and seeds together are ambiguous
    cfg = check_values({**SWEEP_DEFAULTS, **(config or {})}, bench=True)
    seeds = seed_list(config or {}, DEFAULT_SEEDS)
    for seed in seeds:
        check_values({**cfg, "seed": seed}, bench=True)
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
    # rank 0 (torchrun) ran the first seed and keeps its net; on the training's threads
    with torch_threads(int(cfg.get("threads", 1))):
        deploy, line = deployment_rows(out, seeds[0], backends) if world().lead else ([], None)
    rows, summary = rows + deploy, [ratio_line, *([line] if line else [])]
    doc = build_document(
        MODEL,
        rows,
        config=json.loads(json.dumps(recorded_config(cfg, config or {}, seeds))),
        columns=list(COLUMNS),
        backends=list(backends),
        summary=summary,
        claim=claim,
    )
    write_report(
        doc,
        out,
        columns=COLUMNS,
        sections=["## Summary", "", *(f"- {line}" for line in summary), "", *claim_section(claim)],
        plots=[noise_sweep_plot],
        history=history,
    )
    print("\n".join(summary))
    return doc
