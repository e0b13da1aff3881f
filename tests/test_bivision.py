"""event.bivision: E2S against its equations, the STATNF step, BiSNet state and export, SOP
accounting of the two front ends, and mAP through pycocotools."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from neuroedge.events import make_events
from neuroedge.models.bivision.detection import coco_map, decode, make_targets
from neuroedge.models.bivision.e2s import E2SParams, e2s, event_histogram
from neuroedge.models.bivision.functional import STATNFParams, STATNFState, statnf_step
from neuroedge.models.bivision.module import BiSNet


def support_needed(p: E2SParams, active: float) -> int:
    """k[t]: the least k >= k0 with P(Binomial(8, active) >= k) <= eps, at most 8."""
    if p.false_support == 0:
        return p.min_support
    for k in range(p.min_support, 9):
        tail = sum(math.comb(8, j) * active**j * (1 - active) ** (8 - j) for j in range(k, 9))
        if tail <= p.false_support:
            return k
    return 8


def events_needed(p: E2SParams, mean: float) -> int:
    """k[t] of count support: the least k >= k0 with P(Poisson(mean) >= k) <= eps."""
    if p.false_support == 0:
        return p.min_support
    for k in range(p.min_support, 64):
        tail = 1 - sum(math.exp(-mean) * mean**j / math.factorial(j) for j in range(k))
        if tail <= p.false_support:
            return k
    return 64


def e2s_reference(counts: np.ndarray, p: E2SParams) -> np.ndarray:
    """The E2S equations written densely, step by step (module docstring of e2s)."""
    steps, pols, height, width = counts.shape
    v, spikes = np.zeros((pols, height, width)), np.zeros(counts.shape, np.uint8)
    for t in range(steps):
        active = (counts[t] > 0).astype(float)
        prev = spikes[t - 1].astype(float) if t else np.zeros_like(active)
        if p.count_support:  # events of the 8 neighbours plus their spikes one step ago
            neighbour = counts[t] + prev
            support = counts[t] - 1.0
        else:  # neighbours active now or spiking one step ago, counted once
            neighbour = np.maximum(active, prev)
            support = np.zeros_like(active)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy or dx:
                    shifted = np.zeros_like(active)
                    src = neighbour[
                        :, max(dy, 0) : height + min(dy, 0), max(dx, 0) : width + min(dx, 0)
                    ]
                    shifted[
                        :, max(-dy, 0) : height + min(-dy, 0), max(-dx, 0) : width + min(-dx, 0)
                    ] = src
                    support += shifted
        density = active.mean(axis=(1, 2))
        need = np.array(
            [
                events_needed(p, 9 * float(m)) if p.count_support else support_needed(p, float(d))
                for d, m in zip(density, counts[t].mean(axis=(1, 2)))
            ]
        )[:, None, None]
        lone = ((p.false_support == 0) | (density <= p.false_support)).astype(float)
        gain = np.where(support >= need, 1 + p.support_weight, lone[:, None, None])
        v = p.leak * v * (1 - prev) + counts[t] * gain
        spikes[t] = v >= p.threshold
    return spikes


def random_events(n: int, width: int, height: int, span: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return make_events(
        np.sort(rng.integers(0, span, n)),
        rng.integers(0, width, n),
        rng.integers(0, height, n),
        rng.integers(0, 2, n),
    )


@pytest.mark.parametrize("by_count", [True, False])
@pytest.mark.parametrize(
    "seed,min_support,eps,span,density",
    [
        (0, 1, 0.0, 4000, 150),
        (1, 2, 0.0, 4000, 150),
        (2, 3, 0.0, 4000, 150),
        (3, 2, 0.05, 4000, 150),
        (4, 2, 0.05, 6500, 40),
        (5, 1, 0.02, 9000, 60),
        (6, 3, 0.05, 4000, 400),
    ],
)
def test_e2s_kernel_equals_its_equations(seed, min_support, eps, span, density, by_count):
    """Spans past the 4-step window check that the last step is kept when later events are
    cut off; densities from 40 to 150 events per step (of 320 pixel pairs) move the adaptive
    support requirement through several values."""
    params = E2SParams(
        steps=4, step_us=1000, min_support=min_support, false_support=eps, count_support=by_count
    )
    events = random_events(density * span // 1000, 20, 16, span, seed)
    counts = event_histogram(events, 20, 16, 4, 1000)
    np.testing.assert_array_equal(e2s(events, 20, 16, params), e2s_reference(counts, params))


def test_e2s_filters_isolated_events_and_passes_supported_ones():
    params = E2SParams(steps=2, step_us=100)  # two active neighbours (sparse: k stays k0)
    lone = make_events(np.array([10]), np.array([5]), np.array([5]), np.array([1]))
    pair = make_events(np.array([10, 11]), np.array([5, 6]), np.array([5, 5]), np.array([1, 1]))
    corner = make_events(
        np.array([10, 11, 12]), np.array([5, 6, 5]), np.array([5, 5, 6]), np.array([1, 1, 1])
    )
    repeat = make_events(np.array([10, 150]), np.array([5, 5]), np.array([5, 5]), np.array([1, 1]))
    assert e2s(lone, 10, 10, params).sum() == 0
    assert e2s(pair, 10, 10, params).sum() == 0
    assert e2s(pair, 10, 10, E2SParams(steps=2, step_us=100, min_support=1, false_support=0))[
        0, 1, 5, 5:7
    ].tolist() == [1, 1]
    assert e2s(corner, 10, 10, params)[0, 1].sum() == 3  # each has the other two as neighbours
    assert e2s(repeat, 10, 10, params)[:, 1, 5, 5].tolist() == [0, 1]
    with pytest.raises(ValueError, match="min_support"):
        E2SParams(min_support=0)
    with pytest.raises(ValueError, match="false_support"):
        E2SParams(false_support=1.0)


def test_e2s_support_requirement_rises_with_background_activity():
    """Dense background noise raises k, so noise alone stops counting as support."""
    from neuroedge.events.core import SensorSize
    from neuroedge.events.simulator import DVSParams, noise_events

    sensor = SensorSize(32, 32)
    noise = noise_events(
        sensor, 0, 100_000, DVSParams(noise_rate_hz=30.0), np.random.default_rng(0)
    )
    fixed = e2s(noise, 32, 32, E2SParams(false_support=0.0)).sum()
    adaptive = e2s(noise, 32, 32).sum()
    assert support_needed(E2SParams(), 0.01) == 2 and support_needed(E2SParams(), 0.26) == 5
    assert adaptive < 0.5 * fixed


def test_e2s_event_support_keeps_a_moving_edge_in_dense_noise():
    """At 30 Hz/pixel most pixels are active, so counting active neighbours loses edge pixels;
    counting events keeps them (an edge puts several events per pixel) at no more noise."""
    from neuroedge.events.core import SensorSize
    from neuroedge.events.simulator import DVSParams, noise_events

    rng = np.random.default_rng(0)
    t, x, y = [], [], []
    for step in range(5):  # a 3-pixel ON band moving right by 5 pixels per step
        for col in range(4 + 5 * step, 7 + 5 * step):
            for row in range(8, 24):
                n = int(rng.integers(1, 4))
                t += list(step * 20_000 + rng.integers(0, 20_000, n))
                x += [col] * n
                y += [row] * n
    order = np.argsort(t)
    edge = make_events(
        np.array(t)[order], np.array(x)[order], np.array(y)[order], np.ones(len(t), int)
    )
    noise = noise_events(SensorSize(32, 32), 0, 100_000, DVSParams(noise_rate_hz=30.0), rng)
    events = np.concatenate([edge, noise])
    events = events[np.argsort(events["t"], kind="stable")]
    cells = np.zeros((5, 2, 32, 32), bool)
    cells[edge["t"] // 20_000, 1, edge["y"], edge["x"]] = True
    kept, noisy = {}, {}
    for by_count in (True, False):
        spikes = e2s(events, 32, 32, E2SParams(count_support=by_count)).astype(bool)
        kept[by_count], noisy[by_count] = spikes[cells].mean(), spikes[~cells].sum()
    assert kept[True] > 0.9 and kept[True] > kept[False] + 0.1
    assert noisy[True] <= 1.2 * noisy[False]


def test_e2s_rejects_unsorted_and_off_sensor_events_by_index():
    events = make_events(np.array([5, 3]), np.array([1, 1]), np.array([1, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* earlier"):
        e2s(events, 4, 4)
    events = make_events(np.array([1, 3]), np.array([1, 9]), np.array([1, 1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* off the 4x4 sensor"):
        e2s(events, 4, 4)
    events = make_events(np.array([1, 3]), np.array([1, 2]), np.array([1, -1]), np.array([0, 0]))
    with pytest.raises(ValueError, match="event 1 .* off the 4x4 sensor"):
        event_histogram(events, 4, 4, 2, 10)


def test_histogram_equals_tonic_toframe():
    transforms = pytest.importorskip("tonic.transforms")
    events = random_events(5000, 30, 20, 50_000, 3)
    events["t"][0] = 0
    frames = transforms.ToFrame(sensor_size=(30, 20, 2), time_window=10_000)(events)
    ours = event_histogram(events, 30, 20, len(frames), 10_000)
    np.testing.assert_array_equal(ours, frames)


def test_statnf_neighbour_support_and_adaptive_threshold():
    lateral = torch.ones(1, 1, 3, 3) * 0.6
    p = STATNFParams(torch.zeros(1), torch.zeros(1), lateral)  # lam 0.5, a = ln 2
    zeros = torch.zeros(1, 1, 3, 3)
    prev = zeros.clone()
    prev[0, 0, 0, 0] = 1.0  # a neighbour of the centre fired
    support = torch.nn.functional.conv2d(
        prev, lateral * torch.tensor([[1.0, 1, 1], [1, 0, 1], [1, 1, 1]]), padding=1
    )
    drive = torch.full((1, 1, 3, 3), 0.5)
    s, state = statnf_step(drive, STATNFState(zeros, prev, zeros), p, support)
    assert s[0, 0, 1, 1] == 1 and s[0, 0, 2, 2] == 0  # only the supported neurons fire
    assert state.h[0, 0, 0, 0] == 1  # trace of the earlier spike
    # the neuron that fired has threshold 1 + ln2 * 1: the same drive no longer suffices
    s2, _ = statnf_step(
        torch.full((1, 1, 3, 3), 1.2),
        STATNFState(zeros, prev, prev * 1.0),
        p,
        torch.zeros(1, 1, 3, 3),
    )
    assert s2[0, 0, 0, 0] == 0 and s2[0, 0, 2, 2] == 1


@pytest.mark.parametrize("neuron", ["statnf", "lif"])
def test_bisnet_state_is_explicit_and_outputs_have_their_shapes(neuron):
    torch.manual_seed(0)
    net = BiSNet(neuron, 32).eval()
    state = net.init_state(2)
    assert len(state) == len(net.state_names())
    x = (torch.rand(2, 2, 32, 32) < 0.3).float() * 3
    with torch.no_grad():
        first = net(x, *state)
        again = net(x, *state)
        second = net(x, *first[2:])
    assert first[0].shape == (2, 2) and first[1].shape == (2, 5, 8, 8)
    for a, b in zip(first, again):
        assert torch.equal(a, b)  # no hidden state
    assert not torch.equal(first[1], second[1])  # the state carries the past


def test_e2s_front_end_costs_accumulates_and_histograms_cost_macs():
    from neuroedge.bench.sops import OpCounter

    torch.manual_seed(0)
    counts = event_histogram(random_events(3000, 32, 32, 100_000, 5), 32, 32, 5, 20_000)
    spikes = e2s(random_events(3000, 32, 32, 100_000, 5), 32, 32).astype(np.float32)
    totals = {}
    for name, x in (("hist", counts), ("e2s", spikes)):
        net = BiSNet("lif", 32).eval()
        with OpCounter(net) as counter, torch.no_grad():
            net.forward_sequence(torch.from_numpy(x[:, None]))
        totals[name] = counter.totals(1)
    assert totals["e2s"].macs_per_sample < totals["hist"].macs_per_sample / 10
    # dense first conv: 16x16 outputs x 8 channels x 2x3x3 taps x 5 steps, less the zero border
    assert totals["hist"].macs_per_sample >= 0.95 * 16 * 16 * 8 * 18 * 5


def test_map_is_one_for_exact_boxes_and_zero_for_misplaced_ones():
    truth = [np.array([[4.0, 4, 10, 8]]), np.array([[16.0, 2, 12, 10], [1, 20, 8, 8]])]
    exact = [np.hstack([t, np.full((len(t), 1), 0.9)]) for t in truth]
    assert coco_map(truth, exact) == {"map50": 1.0, "map": 1.0}
    moved = [np.hstack([t + [30, 0, 0, 0], np.full((len(t), 1), 0.9)]) for t in truth]
    assert coco_map(truth, moved)["map50"] == 0.0


def test_head_targets_decode_back_to_their_boxes():
    truth = [np.array([[4.0, 4, 10, 8]]), np.array([[16.0, 2, 12, 10]])]
    target = make_targets(truth, grid=8, stride=4)
    assert target[:, 5].sum() == 2 and torch.equal(
        target[:, 0][target[:, 5] > 0], torch.ones(2)
    )  # heatmap peaks at centres
    logits = torch.where(target[:, 5:] > 0, 8.0, -8.0)
    offsets = torch.logit(target[:, 1:3].clamp(1e-4, 1 - 1e-4))
    pred = torch.cat([logits, offsets, target[:, 3:5]], 1).numpy()
    found = decode(pred, stride=4)
    assert coco_map(truth, found)["map"] > 0.99


def test_lif_backbone_exports_to_nir_and_statnf_is_refused_with_its_reason():
    pytest.importorskip("nir")
    from neuroedge.models.bivision.neuromorphic import NOT_MAPPED, backbone_to_nir
    from neuroedge.models.bivision.spec import example

    torch.manual_seed(0)
    graph = backbone_to_nir(BiSNet("lif", 32).eval(), example(0))
    kinds = [
        type(graph.nodes[n]).__name__ for n in ("conv1", "lif1", "conv2", "lif2", "conv3", "lif3")
    ]
    assert kinds == ["Conv2d", "LIF"] * 3 and ("lif3", "spikes3") in graph.edges
    with pytest.raises(ValueError, match="no adaptive-threshold"):
        backbone_to_nir(BiSNet("statnf", 32), example(0))
    assert "E2S front end" in NOT_MAPPED


def test_full_detector_refuses_nir_and_lava_naming_the_parts_that_do_not_map():
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.errors import ExportRefused
    from neuroedge.export.nir import to_nir
    from neuroedge.models.bivision.spec import SPEC

    with pytest.raises(ExportRefused, match="STATNF adaptive threshold .*upsampling"):
        to_nir(SPEC.build({"smoke": True}), SPEC)
    support = LavaBackend().supports(SPEC)
    assert not support.ok and "backbone_to_nir" in support.reason


def test_training_augmentation_mirrors_inputs_and_boxes_together():
    from neuroedge.models.bivision.train import _augment, _mirrored

    x = np.zeros((2, 3, 2, 8, 8), np.float32)
    x[:, :, 0, 1, 2] = 1.0  # an ON event at row 1, column 2 in both samples
    out = _augment(x, np.array([True, False]), np.array([False, True]))
    assert out[0, :, 0, 1, 5].all() and out[0].sum() == 3  # mirrored: column 7 - 2
    assert out[1, :, 1, 1, 2].all() and out[1].sum() == 3  # polarity swapped
    assert x[:, :, 0, 1, 2].all()  # the training set itself is untouched
    box = np.array([[2.0, 3.0, 4.0, 5.0]])
    (mirrored,) = _mirrored([box], 32)
    assert mirrored.tolist() == [[26.0, 3.0, 4.0, 5.0]]


def test_centre_heatmap_loss_prefers_the_box_centre():
    from neuroedge.models.bivision.detection import detection_loss

    truth = [np.array([[12.0, 6, 12, 8]])]  # centre (18, 10): mid-cell (2, 4) of the stride-4 grid
    target = make_targets(truth, grid=8, stride=4)
    assert target[0, 5, 2, 4] == 1 and 0 < target[0, 0, 2, 5] < 1  # a Gaussian around it
    right, wrong = torch.full((1, 5, 8, 8), -6.0), torch.full((1, 5, 8, 8), -6.0)
    right[0, 0, 2, 4] = wrong[0, 0, 6, 1] = 6.0
    for pred in (right, wrong):
        pred[:, 1:3] = 0.0
        pred[:, 3:5] = target[:, 3:5]
    assert detection_loss(right, target) < 0.1 < detection_loss(wrong, target)


def test_augmentation_names_parse_and_reject_unknown_ones():
    from neuroedge.models.bivision.train import augmentations

    assert augmentations("flip+swap").tolist() == [True, True]
    assert augmentations("none").tolist() == [False, False]
    assert augmentations(True).tolist() == [True, False]
    with pytest.raises(ValueError, match="augment 'rotate'"):
        augmentations("rotate")


def _sweep_rows(margins: dict[float, list[float]], ops: float = 1.0):
    """Per-seed rows whose accuracy and map50 margins over the baseline are ``margins``."""
    from neuroedge.types import Measurement, Report

    def row(variant, acc, rate, sops):
        metrics = {
            "accuracy": Measurement(acc, "fraction"),
            "map50": Measurement(acc / 2, "fraction"),
            "synaptic_ops_per_sample": Measurement(sops, "op", "counted"),
        }
        return Report("event.bivision", "host", f"{variant}@noise={rate:g}", metrics=metrics)

    return {
        **{
            ("statnf_e2s", r): [row("statnf_e2s", 0.5 + m, r, ops) for m in ms]
            for r, ms in margins.items()
        },
        **{
            ("lif_histogram", r): [row("lif_histogram", 0.5, r, 1.0) for _ in ms]
            for r, ms in margins.items()
        },
    }


def test_sweep_claim_reads_margins_over_seeds_and_finds_where_they_fall():
    from neuroedge.models.bivision.bench import claim_check, claim_section, mean_rows

    growing = _sweep_rows({0.0: [0.02, 0.04], 5.0: [0.05, 0.09], 10.0: [0.10, 0.14]})
    claim = claim_check(growing, [0, 5, 10])
    assert claim["holds"] and claim["seeds"] == 2
    assert claim["accuracy"]["margin"] == pytest.approx([0.03, 0.07, 0.12])
    assert claim["accuracy"]["margin_sem"][1] == pytest.approx(0.02)
    assert claim["map50"]["margin"] == pytest.approx([0.015, 0.035, 0.06])
    # steps paired by seed: 0 -> 5 is +0.03 and +0.05, 5 -> 10 is +0.05 twice
    assert claim["accuracy"]["step"] == pytest.approx([0.04, 0.05])
    assert claim["accuracy"]["step_sem"] == pytest.approx([0.01, 0.0], abs=1e-12)
    assert "| 0 -> 5 | +0.040 +- 0.010 | +0.020 +- 0.005 |" in "\n".join(claim_section(claim))

    falling = _sweep_rows({0.0: [0.02, 0.04], 5.0: [0.10, 0.12], 10.0: [0.05, 0.07]})
    claim = claim_check(falling, [0, 5, 10])
    assert not claim["holds"] and claim["accuracy"]["beats_at_every_rate"]
    assert claim["accuracy"]["falls_at"] == [10.0]
    assert "falls at 10 Hz" in "\n".join(claim_section(claim))

    costly = claim_check(_sweep_rows({0.0: [0.02], 5.0: [0.05], 10.0: [0.1]}, ops=2.0), [0, 5, 10])
    assert not costly["ops_at_most_baseline"] and not costly["holds"]
    assert not claim_check(_sweep_rows({0.0: [0.02], 5.0: [0.05]}), [0, 5])["holds"]

    means = {r.variant: r.metrics for r in mean_rows(growing)}
    assert means["statnf_e2s@noise=5"]["accuracy"].value == pytest.approx(0.57)
    assert means["statnf_e2s@noise=5"]["accuracy_sd"].value == pytest.approx(0.02 * 2**0.5)
    assert "synaptic_ops_per_sample_sd" not in means["statnf_e2s@noise=5"]


def test_sweep_label_names_rate_and_seed():
    from neuroedge.models.bivision.bench import sweep_label

    assert sweep_label("lif_histogram", 2.0, 1) == "lif_histogram@noise=2@seed=1"


def test_sweep_over_seeds_in_two_workers_matches_one_seed_run_alone(tmp_path):
    """``workers=2`` runs each seed in its own process; a seed's rows equal the same seed's
    sweep run alone in this process (one torch thread each: deterministic)."""
    import json

    from neuroedge.models.bivision.bench import SWEEP_DEFAULTS, bench, sweep_seed

    small = {
        "rates": [0, 5],
        "train_samples": 8,
        "test_samples": 4,
        "epochs": 1,
        "throughput_tiles": 1,
        "throughput_repeats": 1,
    }
    doc = bench(
        str(tmp_path / "two"), config={**small, "seeds": [0, 1], "workers": 2}, progress=False
    )
    rows = {r["variant"]: r["metrics"] for r in json.loads(json.dumps(doc))["rows"]}
    alone = sweep_seed((str(tmp_path / "alone"), {**SWEEP_DEFAULTS, **small, "seed": 1}, False))
    assert len(alone) == 4
    for (variant, rate), row in alone.items():
        got = rows[f"{variant}@noise={rate:g}@seed=1"]
        for metric in ("accuracy", "map50", "sops_per_sample"):
            assert got[metric]["value"] == row.metrics[metric].value, (variant, rate, metric)
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        bench(
            str(tmp_path / "bad"), config={**small, "seeds": [0, 1], "workers": 0}, progress=False
        )


def test_sweep_train_noise_clean_trains_once_and_matches_same_at_zero(tmp_path, monkeypatch):
    """``train_noise="clean"`` trains each variant once per task on the clean split and tests
    that net at every rate; its 0 Hz rows equal the per-rate protocol's (same training); an
    unknown protocol is refused with the valid names."""
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.bench import SWEEP_DEFAULTS, bench, sweep_seed

    small = {
        **SWEEP_DEFAULTS,
        "rates": [0, 5, 10],
        "train_samples": 8,
        "test_samples": 4,
        "epochs": 1,
        "seed": 3,
    }
    fits: list[int] = []
    real_fit = train.fit
    monkeypatch.setattr(train, "fit", lambda *a, **k: fits.append(len(a[1].x)) or real_fit(*a, **k))
    same = sweep_seed((str(tmp_path / "same"), {**small, "train_noise": "same"}, False))
    assert len(fits) == 3 * 2 * 2  # rates x variants x tasks
    fits.clear()
    clean = sweep_seed((str(tmp_path / "clean"), {**small, "train_noise": "clean"}, False))
    assert len(fits) == 2 * 2  # variants x tasks, whatever the number of rates
    for variant in ("statnf_e2s", "lif_histogram"):
        for metric in ("accuracy", "map50", "sops_per_sample"):
            assert (
                clean[(variant, 0.0)].metrics[metric].value
                == same[(variant, 0.0)].metrics[metric].value
            ), (variant, metric)
        assert "trained once on the clean training split" in clean[(variant, 10.0)].notes[0]
    with pytest.raises(ValueError, match="train_noise must be one of same, clean"):
        bench(str(tmp_path / "bad"), config={**small, "train_noise": "noisy"}, progress=False)


def test_sweep_defaults_read_the_claim_over_seeds_and_seed_picks_one(monkeypatch, tmp_path):
    """The default sweep runs seeds 0-5 (the claim is read over seeds) with nets trained on
    clean data; ``--config seed=S`` alone runs that one seed, not the default list."""
    from neuroedge.models.bivision import bench as bb

    assert bb.SWEEP_DEFAULTS["train_noise"] == "clean"
    assert bb.seed_list({}, bb.DEFAULT_SEEDS) == [0, 1, 2, 3, 4, 5]
    seen: list[list[int]] = []

    def fake_map_seeds(fn, jobs, workers, desc, progress):
        seen.append(list(jobs))
        raise RuntimeError("stop")  # the seeds are all this test needs

    monkeypatch.setattr(bb, "map_seeds", fake_map_seeds)
    monkeypatch.setattr(bb, "throughput_rows", lambda cfg: ([], ""))
    for config, want in (
        ({"seed": 7}, [7]),
        ({}, [0, 1, 2, 3, 4, 5]),
        ({"seed": 7, "seeds": [1, 2]}, [1, 2]),
    ):
        with pytest.raises(RuntimeError, match="stop"):
            bb.bench(str(tmp_path), config=config, progress=False)
        assert seen[-1] == want, config
