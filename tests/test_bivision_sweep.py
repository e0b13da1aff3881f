"""event.bivision noise sweep: the claim check over seeds, row labels, seeds in worker
processes, the training protocols and the default seeds."""

from __future__ import annotations

import pytest


def _sweep_rows(
    margins: dict[float, list[float]],
    ops: float = 1.0,
    map_margins: dict[float, list[float]] | None = None,
    effective_ops: dict[float, float] | None = None,
):
    """Per-seed rows whose accuracy margins over the baseline are ``margins`` and map50
    margins ``map_margins`` (default: half the accuracy margins); STATNF + E2S costs ``ops``
    (dense count) and ``effective_ops[rate]`` (effective count, default ``ops``) against the
    baseline's 1.0 on both counts."""
    from neuroedge.types import Measurement, Report

    map_margins = map_margins or {r: [m / 2 for m in ms] for r, ms in margins.items()}
    effective_ops = effective_ops or {}

    def row(variant, acc, map50, rate, sops, effective):
        metrics = {
            "accuracy": Measurement(acc, "fraction"),
            "map50": Measurement(map50, "fraction"),
            "synaptic_ops_per_sample": Measurement(sops, "op", "counted"),
            "effective_ops_per_sample": Measurement(effective, "op", "counted"),
        }
        return Report("event.bivision", "host", f"{variant}@noise={rate:g}", metrics=metrics)

    return {
        **{
            ("statnf_e2s", r): [
                row("statnf_e2s", 0.5 + m, 0.25 + mm, r, ops, effective_ops.get(r, ops))
                for m, mm in zip(ms, map_margins[r])
            ]
            for r, ms in margins.items()
        },
        **{
            ("lif_histogram", r): [row("lif_histogram", 0.5, 0.25, r, 1.0, 1.0) for _ in ms]
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

    section = "\n".join(claim_section(claim_check(growing, [0, 5, 10])))
    assert "| 5 | 1 / 1 | 1 / 1 |" in section  # both cost counts per rate
    assert "it needs both margins positive at every rate and growing" in section

    means = {r.variant: r.metrics for r in mean_rows(growing)}
    assert means["statnf_e2s@noise=5"]["accuracy"].value == pytest.approx(0.57)
    assert means["statnf_e2s@noise=5"]["accuracy_sd"].value == pytest.approx(0.02 * 2**0.5)
    assert "synaptic_ops_per_sample_sd" not in means["statnf_e2s@noise=5"]


def test_a_single_seed_fails_the_sweep_claim_however_its_margins_read():
    """README and bench.py: "single seeds fail the claim" (it is read over seeds); one seed
    whose margins beat, grow and cost less held until 2026-12-07."""
    from neuroedge.models.bivision.bench import claim_check, claim_section

    margins = {0.0: [0.02], 5.0: [0.05], 10.0: [0.10]}
    one = claim_check(_sweep_rows(margins, ops=0.5), [0, 5, 10])
    assert one["seeds"] == 1 and one["holds"] is False
    assert one["accuracy"]["beats_at_every_rate"] and one["accuracy"]["margin_grows"]
    assert one["map50"]["beats_at_every_rate"] and one["map50"]["margin_grows"]
    assert one["ops_at_most_baseline"] and one["effective_ops_at_most_baseline"]
    assert one["reason"] == "one seed: the claim is read over seeds, single seeds fail it"
    section = "\n".join(claim_section(one))
    assert "- claim holds: **False** (" in section and "single seeds fail it" in section
    twice = {r: m * 2 for r, m in margins.items()}  # the same seed twice: two seeds
    two = claim_check(_sweep_rows(twice, ops=0.5), [0, 5, 10])
    assert two["seeds"] == 2 and two["holds"] is True and "reason" not in two


def test_a_zero_margin_does_not_beat_and_a_flat_step_still_grows():
    """A margin of 0 does not beat the baseline (a tie); a flat step still grows (the margin
    never falls and ends above the clean one)."""
    from neuroedge.models.bivision.bench import claim_check

    flat = claim_check(
        _sweep_rows({0.0: [0.02, 0.04], 5.0: [0.02, 0.04], 10.0: [0.10, 0.14]}), [0, 5, 10]
    )
    assert flat["accuracy"]["margin"][0] == flat["accuracy"]["margin"][1]
    assert flat["accuracy"]["margin_grows"] and flat["map50"]["margin_grows"] and flat["holds"]
    zero = claim_check(
        _sweep_rows({0.0: [0.0, 0.0], 5.0: [0.05, 0.09], 10.0: [0.10, 0.14]}), [0, 5, 10]
    )
    assert zero["accuracy"]["margin"][0] == 0.0 and zero["accuracy"]["margin_grows"]
    assert not zero["accuracy"]["beats_at_every_rate"] and zero["holds"] is False


def test_sweep_claim_needs_map50_to_beat_and_grow_too():
    """Accuracy margins that grow do not carry the claim when the map50 margin falls, or when
    it grows but starts below zero (the baseline wins on clean data). Both passed when the
    verdict read accuracy alone or dropped "beats at every rate" (2026-12-07 audit)."""
    from neuroedge.models.bivision.bench import claim_check

    accuracy = {0.0: [0.02, 0.04], 5.0: [0.05, 0.09], 10.0: [0.10, 0.14]}
    falling = _sweep_rows(
        accuracy, map_margins={0.0: [0.1, 0.1], 5.0: [0.05, 0.07], 10.0: [0.01, 0.03]}
    )
    claim = claim_check(falling, [0, 5, 10])
    assert claim["accuracy"]["margin_grows"] and claim["accuracy"]["beats_at_every_rate"]
    assert not claim["map50"]["margin_grows"] and claim["map50"]["falls_at"] == [5.0, 10.0]
    assert not claim["holds"]

    below = _sweep_rows(
        accuracy, map_margins={0.0: [-0.06, -0.04], 5.0: [0.0, 0.02], 10.0: [0.08, 0.1]}
    )
    claim = claim_check(below, [0, 5, 10])
    assert claim["map50"]["margin_grows"] and not claim["map50"]["beats_at_every_rate"]
    assert not claim["holds"]
    negative = {r: [m - 0.2 for m in ms] for r, ms in accuracy.items()}  # accuracy too
    claim = claim_check(_sweep_rows(negative, map_margins=accuracy), [0, 5, 10])
    assert claim["accuracy"]["margin_grows"] and not claim["accuracy"]["beats_at_every_rate"]
    assert not claim["holds"]


def test_sweep_claim_needs_the_effective_count_at_most_the_baseline_too():
    """The claim's "same or lower SOPs" is read on the dense count (SOPs + MACs) and on
    NeuroBench's effective one (SOPs + MACs of nonzero inputs); exceeding the baseline's
    effective count at any one rate fails the claim although the dense count is lower."""
    from neuroedge.models.bivision.bench import claim_check, claim_section

    margins = {0.0: [0.02, 0.04], 5.0: [0.05, 0.09], 10.0: [0.10, 0.14]}
    claim = claim_check(_sweep_rows(margins, ops=0.5, effective_ops={5.0: 1.01}), [0, 5, 10])
    assert claim["ops_at_most_baseline"] and not claim["effective_ops_at_most_baseline"]
    assert claim["effective_ops_per_sample"]["statnf_e2s"] == [0.5, 1.01, 0.5]
    assert claim["synaptic_ops_per_sample"]["lif_histogram"] == [1.0, 1.0, 1.0]
    assert not claim["holds"]
    section = "\n".join(claim_section(claim))
    assert "| 5 | 0.5 / 1 | 1.01 / 1 |" in section
    assert "- SOPs + effective MACs at most the baseline's at every rate: False" in section
    equal = claim_check(_sweep_rows(margins, ops=0.5, effective_ops={5.0: 1.0}), [0, 5, 10])
    assert equal["effective_ops_at_most_baseline"] and equal["holds"]  # "same" is allowed


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
    from neuroedge.errors import ConfigError
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
        ({"seeds": [1, 2]}, [1, 2]),
    ):
        with pytest.raises(RuntimeError, match="stop"):
            bb.bench(str(tmp_path), config=config, progress=False)
        assert seen[-1] == want, config
    with pytest.raises(ConfigError, match="give one"):  # ran the seeds, recorded the seed
        bb.bench(str(tmp_path), config={"seed": 7, "seeds": [1, 2]}, progress=False)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("train_samples", 2.5, "train_samples=2.5: expected an integer in 1..10000000"),
        ("epochs", 0, "epochs=0"),
        ("batch", True, "batch=True"),
        ("size", 36, "size=36: expected a multiple of 8"),
        ("size", 32.0, "size=32.0"),
        ("lr", -1, "lr=-1"),
        ("rates", [0, -5], "rates=-5"),
        ("rates", [0, "5"], "rates='5'"),
        ("throughput_tiles", 0, "throughput_tiles=0"),
        ("seeds", [0, -1], "seed=-1"),
    ],
)
def test_bad_sweep_and_training_values_are_refused_before_any_work(
    tmp_path, monkeypatch, key, value, message
):
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision import bench as B
    from neuroedge.models.bivision import train

    def no_work(*args, **kwargs):
        pytest.fail("work started: the bad value was not refused first")

    monkeypatch.setattr(B, "throughput_rows", no_work)
    monkeypatch.setattr(B, "map_seeds", no_work)
    with pytest.raises(ConfigError, match=message):
        B.bench(str(tmp_path / "b"), config={key: value}, progress=False)
    if key not in ("rates", "throughput_tiles", "seeds"):
        monkeypatch.setattr("neuroedge.models.bivision.data.ensure_dataset", no_work)
        with pytest.raises(ConfigError, match=message):
            train.train({key: value}, tmp_path / "t", progress=False)
    assert not list(tmp_path.iterdir())


def test_deployment_rows_time_the_sweeps_own_net_on_host_and_onnxrt(tmp_path):
    """The first seed's clean-trained STATNF + E2S net is saved by the sweep (the checkpoint
    scores what the sweep measured) and timed, checked and scored on host and onnxrt; with
    ``train_noise=same`` there is no such net and the summary says why."""
    import json

    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.bench import bench
    from neuroedge.models.bivision.data import load_task
    from neuroedge.models.bivision.deployment import LABEL, net_path
    from neuroedge.models.bivision.spec import SPEC

    small = {"rates": [0], "train_samples": 16, "test_samples": 8, "epochs": 1, "seed": 2}
    small |= {"throughput_tiles": 1, "throughput_repeats": 1}
    doc = json.loads(json.dumps(bench(str(tmp_path), ["host", "onnxrt"], small, progress=False)))
    rows = {(r["variant"], r["backend"]): r["metrics"] for r in doc["rows"]}
    host, ort = rows[(LABEL, "host")], rows[(LABEL, "onnxrt")]
    assert ort["accuracy"]["value"] == host["accuracy"]["value"]
    assert ort["max_abs_err"]["value"] < 1e-4 and ort["within_tolerance"]["value"] == 1
    assert host["latency_p50_ms"]["value"] > 0 and ort["latency_p50_ms"]["value"] > 0
    assert any(
        line.startswith("deployment (seed 2's STATNF + E2S net): onnxrt ")
        for line in doc["summary"]
    )
    net = SPEC.build({"checkpoint": str(net_path(tmp_path, 2, "statnf_e2s"))}).module
    test = load_task(
        next((tmp_path / "data").glob("classification_*")), "classification", "test", "e2s"
    )
    accuracy = train.task_metrics(*train.predict(net, test.x), test, "classification")["accuracy"]
    assert accuracy == rows[("statnf_e2s@noise=0", "host")]["accuracy"]["value"]

    same = bench(
        str(tmp_path / "same"), ["host", "onnxrt"], {**small, "train_noise": "same"}, progress=False
    )
    assert not [r for r in same["rows"] if r["variant"] == LABEL]
    assert any("no clean-trained net of seed 2" in line for line in same["summary"])
