"""Diverged or collapsed training never reads as a result: snn.unisparse bounds its rate-like
keys and stops a phase at a NaN loss or a non-finite weight (a NaN net fired nothing and "met"
its energy budget at 0 SOPs), snn.lif_convnet stops at a NaN loss, and uq.last_layer does not
count a dataset whose MAP net did not beat the constant predictor (weight_decay=10 collapsed
wine and the claim read "holds")."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError, TrainingDiverged
from neuroedge.models.unisparse import pipeline, train
from neuroedge.models.unisparse.loop import fit_phase
from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer import seed_claim
from neuroedge.types import Measurement, Report

from unisparse_nets import random_net

QUICK = {
    **train.DEFAULTS,
    "train_subset": 64,
    "dense_epochs": 1,
    "sparse_epochs": 1,
    "finetune_epochs": 1,
}


@pytest.fixture(scope="module")
def digits() -> pipeline.ImageSplit:
    return pipeline.load_data(QUICK)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [  # each of these trained to NaN weights, exit 0 (or a NaN checkpoint), before the bounds
        ("lr", 1e12, r"in \(0, 10\]"),
        ("mask_lr", 11.0, r"in \(0, 10\]"),
        ("bn_lr", 1e12, r"in \(0, 10\]"),
        ("penalty_rho", 1e300, r"in \[0, 1e\+06\]"),
        ("spike_scale", 1e300, r"in \[0, 100\]"),
        ("e_ac_pj", 1e300, r"in \(0, 1e\+06\]"),
        ("kd_temp", 1e30, r"in \(0, 100\]"),
        ("dual_lr", 1e300, r"in \[0, 10\]"),
        ("temp_start", 1e300, r"in \(0, 10000\]"),
        ("temp_end", 1e300, r"in \(0, 10000\]"),
        ("weight_decay", 1e6, r"expected lr x weight_decay <= 1 \(weight_decay <= 500\)"),
    ],
)
def test_unisparse_rate_keys_are_bounded_above(key, value, expected):
    with pytest.raises(ConfigError, match=expected) as err:
        pipeline.check_config({**QUICK, key: value})
    assert str(err.value).startswith(f"{key}={value!r}")


def test_unisparse_lr_times_weight_decay_is_bounded_at_exactly_1():
    assert pipeline.check_config({**QUICK, "lr": 0.5, "weight_decay": 2.0})["weight_decay"] == 2.0
    past = float(np.nextafter(2.0, 3.0))
    with pytest.raises(ConfigError, match=r"expected lr x weight_decay <= 1 \(weight_decay <= 2\)"):
        pipeline.check_config({**QUICK, "lr": 0.5, "weight_decay": past})
    # a platform's cost per synaptic event of some nJ (SpiNNaker) is a value a user gives
    assert pipeline.check_config({**QUICK, "e_ac_pj": 9000})["e_ac_pj"] == 9000.0


def test_unisparse_train_refuses_lr_1e12_before_training(tmp_path, capsys, monkeypatch):
    from neuroedge.cli import main

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started before the config was checked")

    monkeypatch.setattr(train, "train_dense", refuse)
    out = tmp_path / "u.pt"
    config = ["dense_epochs=1", "sparse_epochs=1", "finetune_epochs=1", "train_subset=64"]
    rc = main(["train", "snn.unisparse", "--out", str(out), "--config", *config, "lr=1e12"])
    assert rc == 2
    assert "lr=1000000000000.0: expected a finite number in (0, 10]" in capsys.readouterr().err
    assert not out.exists()


def test_unisparse_phase_stops_at_a_nan_loss_naming_phase_and_keys(digits):
    net = train.make_net(QUICK)
    with torch.no_grad():
        net.fc.linear.weight[0, 0] = math.nan  # every logit row reads it: the loss is NaN
    with pytest.raises(TrainingDiverged) as err:
        fit_phase(net, digits, QUICK, 1, 1e-3, None, "dense", progress=False)
    assert str(err.value).startswith("snn.unisparse dense phase epoch 1: training diverged (loss")
    assert str(err.value).endswith("lower lr, weight_decay and train again")


def test_unisparse_phase_stops_at_a_nan_statistic_under_a_finite_loss(digits):
    """NaN BN statistics (lr=1e12 left 7 running variances infinite at a finite loss) or NaN
    thresholds silence their layer: the loss stays finite, the phase end catches them."""
    net = train.make_net(QUICK)
    with torch.no_grad():
        net.stem.bn.running_var.fill_(math.inf)  # training reads batch statistics: loss finite
    with pytest.raises(TrainingDiverged) as err:
        fit_phase(net, digits, QUICK, 1, 1e-3, None, "dense", progress=False)
    assert str(err.value).startswith(
        "snn.unisparse dense phase: training diverged (1 tensor(s) hold NaN or inf, first "
        "'stem.bn.running_var')"
    )


def test_unisparse_never_measures_a_nan_net_as_meeting_its_budget(digits):
    """It measured 0 SOPs, budget_met 1.0, at chance (pipeline.py's check of the budget)."""
    net = random_net(0)
    with torch.no_grad():
        for bn in net.threshold_bns():
            bn.beta.fill_(math.nan)
    with pytest.raises(TrainingDiverged, match=r"^snn\.unisparse unisparse \(folded to measure"):
        pipeline.measure_variant("unisparse", net, [], digits, QUICK, 1e-3)


def test_unisparse_a_data_parallel_epoch_that_trained_nothing_is_no_divergence(digits, monkeypatch):
    """batch < ranks skipped every global batch: its NaN mean loss is not a diverged run."""
    import neuroedge.distributed

    fake = SimpleNamespace(world=SimpleNamespace(size=4), skips=lambda idx: True)
    monkeypatch.setattr(neuroedge.distributed, "current", lambda: fake)
    from neuroedge.models.unisparse.loop import run_epoch

    net = train.make_net(QUICK)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ConfigError, match=r"^batch=2 with 4 data-parallel ranks: no global"):
        run_epoch(net, digits, opt, {**QUICK, "batch": 2}, np.random.default_rng(0))


def test_lif_convnet_stops_at_a_nan_loss_and_saves_nothing(tmp_path, monkeypatch):
    from neuroedge.models.lif_convnet import train as lif

    def nan_net(cfg):
        net = lif.LIFConvNet(int(cfg["channels1"]), int(cfg["channels2"]))
        with torch.no_grad():
            for p in net.parameters():
                p.fill_(math.nan)
        return net

    monkeypatch.setattr(lif, "make_net", nan_net)
    out = tmp_path / "lif.pt"
    config = {"epochs": 1, "steps": 1, "batch": 100_000, "channels1": 2, "channels2": 2}
    with pytest.raises(TrainingDiverged, match=r"^snn\.lif_convnet training epoch 1: .*lower lr"):
        lif.train(config, out=out, progress=False)
    assert not out.exists()


def test_uq_weight_decay_is_bounded_by_the_collapse():
    from neuroedge.models.uq_last_layer.experiment import DEFAULTS, check_config

    with pytest.raises(ConfigError, match=r"^weight_decay=10: expected a finite number in \[0, 1]"):
        check_config({**DEFAULTS, "weight_decay": 10})
    assert check_config({**DEFAULTS, "weight_decay": 1})["weight_decay"] == 1.0


def _uq_rows(map_nll: float, const: float | None) -> list[Report]:
    """One seed of dataset "d", both tunings, every part of the claim passing."""
    rows = []
    for tuning in F.TUNINGS:
        for subset in F.SUBSETS:
            metrics = {
                "ood_auroc": Measurement(0.7, "fraction"),
                "map_nll": Measurement(map_nll, "nats/sample"),
            }
            if const is not None:
                metrics["const_nll"] = Measurement(const, "nats/sample")
            rows.append(Report("uq.last_layer", "host", f"d/{tuning}/{subset}", metrics=metrics))
        compare = {
            "auroc_diff": Measurement(0.0, "full-LL"),
            "spearman_var": Measurement(0.95, "rank corr"),
            "time_ratio": Measurement(100.0, "full/last-layer"),
            "test_rows": Measurement(54, "rows", "counted"),
        }
        rows.append(Report("uq.last_layer", "host", f"d/{tuning}/compare", metrics=compare))
    return rows


def test_uq_claim_does_not_count_a_map_net_that_did_not_learn():
    """The audit's wine at weight_decay=10: MAP NLL 1.083 against the label prior's ~1.08."""
    collapsed = seed_claim.claim_over_seeds({2: _uq_rows(0.18, 1.08), 3: _uq_rows(1.083, 1.08)})
    for tuning in F.TUNINGS:
        cell = collapsed["tunings"][tuning]["datasets"]["d"]
        assert cell["holds"] is None
        assert cell["reason"].startswith(
            "not measured: in seed(s) [3] the MAP net gained less than map_min_gain=0.05 nats"
        )
    assert collapsed["holds"] is None
    lines = "\n".join(seed_claim.claim_section(collapsed))
    assert "| not measured: in seed(s) [3] the MAP net gained less than map_min_gain" in lines
    assert seed_claim.claim_over_seeds({2: _uq_rows(math.nan, 1.08)})["holds"] is None
    learned = {2: _uq_rows(0.18, 1.08), 3: _uq_rows(0.25, 1.08)}
    assert seed_claim.claim_over_seeds(learned)["holds"] is True
    assert seed_claim.claim_over_seeds({2: _uq_rows(1.083, None)})["holds"] is True  # old rows


@pytest.mark.parametrize(
    ("map_nll", "min_gain", "holds"),
    [
        (1.07, 0.05, None),  # gained 0.01 nats: the size of the collapses measured
        (1.02, 0.05, True),  # gained 0.06
        (1.07, 0.0, True),  # weak-signal data: the user lowers map_min_gain to read the GLMs
        (1.08, 0.0, True),  # exactly at the constant predictor with a 0 bound: counted
    ],
)
def test_uq_map_min_gain_is_the_bound_and_a_config_key(map_nll, min_gain, holds):
    from neuroedge.models.uq_last_layer.experiment import DEFAULTS, check_config

    rows = {2: _uq_rows(map_nll, 1.08)}
    assert seed_claim.claim_over_seeds(rows, min_gain)["holds"] is holds
    assert check_config({**DEFAULTS, "map_min_gain": min_gain})["map_min_gain"] == min_gain
    with pytest.raises(ConfigError, match=r"^map_min_gain=-0.1: expected a finite number in"):
        check_config({**DEFAULTS, "map_min_gain": -0.1})


def test_uq_constant_predictor_nll():
    split = SimpleNamespace(
        task="classification", classes=3, y_train=np.array([0, 0, 1, 1]), y_test=np.array([0, 2])
    )  # add-one: p = (3, 3, 1) / 7
    assert seed_claim.const_nll(split) == pytest.approx(-(math.log(3 / 7) + math.log(1 / 7)) / 2)
    split = SimpleNamespace(
        task="regression", classes=1, y_train=np.array([-1.0, 1.0]), y_test=np.array([0.0, 2.0])
    )  # N(0, 1): 0.5 log(2 pi) + mean(y^2) / 2
    assert seed_claim.const_nll(split) == pytest.approx(0.5 * math.log(2 * math.pi) + 1.0)


def test_uq_rows_carry_the_constant_predictors_nll():
    """Each GLM row of a dataset carries the constant predictor's test NLL of the same split
    the MAP was scored on (computed once, where the split is loaded), compare rows none."""
    from neuroedge.models.uq_last_layer import experiment
    from neuroedge.models.uq_last_layer.data import parse_dataset

    cfg = {**experiment.DEFAULTS, "datasets": ["wine"], "steps": 20, "timing_repeats": 1}
    rows = experiment.compare_dataset("wine", cfg)
    split = parse_dataset("wine").load(0, cfg["n_synthetic"])
    # the add-one-smoothed training label frequencies, scored on the test labels, by hand
    counts = np.bincount(split.y_train.astype(int), minlength=split.classes) + 1.0
    want = -float(np.mean(np.log(counts[split.y_test.astype(int)] / counts.sum())))
    assert seed_claim.const_nll(split) == pytest.approx(want, rel=1e-12)
    glm = [r for r in rows if not r.variant.endswith("/compare")]
    assert len(glm) == 4
    assert all(r.metrics["const_nll"].value == pytest.approx(want, rel=1e-12) for r in glm)
    assert all("const_nll" not in r.metrics for r in rows if r.variant.endswith("/compare"))
