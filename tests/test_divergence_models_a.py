"""Diverged or overflowing training in causal.cadre, safety.hair_trigger and physics.meshft:
refused before training where a config value has no sane use (a bound with its reason), stopped
at the first non-finite loss (TrainingDiverged, exit 2), and never reported as a measured figure
(a NaN net's MCC was 0.0, its empty graph's SHD counted, a NaN twin read as "same outputs")."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neuroedge.cli import main
from neuroedge.errors import ConfigError, TrainingDiverged
from neuroedge.types import Measurement, Report

NAN = float("nan")


# causal.cadre


@pytest.mark.parametrize("key", ["lambda_z", "lambda_s", "alpha", "beta"])
def test_cadre_loss_weights_above_the_bound_are_refused_before_training(
    key, tmp_path, capsys
) -> None:
    """alpha=1e300 trained on to NaN weights, saved them and exited 0 with MCC 0.0."""
    from neuroedge.models.cadre import train as TR

    out = tmp_path / "c.pt"
    assert main(["train", "causal.cadre", "--out", str(out), "--config", f"{key}=1e300"]) == 2
    err = capsys.readouterr().err
    assert f"{key}=1e+300: expected a finite number in [0, 1e+06]" in err
    assert "float32 loss overflows" in err and "Traceback" not in err and not out.exists()
    assert TR.check_config({**TR.DEFAULTS, key: 10**6})[key] == 1e6  # the bound itself passes


def _tiny_cadre(**over: float):
    from neuroedge.models.cadre import train as TR
    from neuroedge.models.cadre.data import generate
    from neuroedge.models.cadre.spec import DOMAINS, DX, DZ, LENGTH

    data = generate(n=40, length=LENGTH, dx=DX, dz=DZ, domains=DOMAINS, seed=0)
    cfg = {**TR.DEFAULTS, "steps": 3, "batch": 8, "jac_batch": 4, "hidden": 8, **over}
    return TR, data, cfg, DOMAINS


def test_cadre_fit_stops_at_the_first_non_finite_loss_naming_the_keys() -> None:
    """fit never read its loss: a weight past float32 (set past check_config) ran every step."""
    TR, data, cfg, domains = _tiny_cadre(alpha=1e39)
    model = TR.new_cadre(data.x.shape[-1], data.z.shape[-1], domains, cfg)
    with pytest.raises(TrainingDiverged) as err:  # a ConfigError: exit 2, one line
        TR.fit(model, data, cfg, "CaDRe")
    assert str(err.value).startswith("causal.cadre (CaDRe) training step 1: training diverged")
    assert "lower lr, lambda_z, lambda_s, alpha, beta and train again" in str(err.value)


def test_cadre_mcc_of_non_finite_latents_is_nan_not_zero() -> None:
    from neuroedge.models.cadre import functional as F

    rng = np.random.default_rng(0)
    truth = rng.standard_normal((50, 2))
    assert math.isnan(F.mcc(np.full((50, 2), NAN), truth))  # was 0.0 (np.nan_to_num)
    est = truth.copy()
    est[3, 1] = np.inf
    assert math.isnan(F.mcc(est, truth))
    constant = np.column_stack([truth[:, 0], np.ones(50)])  # a constant column: no signal, 0
    with np.errstate(invalid="ignore"):  # its correlations are 0/0
        assert F.mcc(constant, truth) == pytest.approx(0.5)


def test_cadre_a_non_finite_graph_is_not_scored(monkeypatch) -> None:
    """The NaN graph thresholded to an empty one, whose SHD was reported as counted."""
    from neuroedge.models.cadre import bench as B

    TR, data, cfg, domains = _tiny_cadre(steps=2)
    monkeypatch.setattr(TR, "estimated_graph", lambda *a, **k: np.full((8, 8), NAN))
    result = TR.compare(data, domains, cfg)
    assert result["scores"] is None
    cadre = B._model_rows(result)[0]
    assert all(math.isnan(cadre.metrics[k].value) for k in ("shd", "f1", "tpr", "skeleton_f1"))
    assert "not counted" in cadre.notes[0]


def _cadre_rows(mcc_cadre: float, mcc_vae: float) -> list[Report]:
    scores = {k: Measurement(NAN, "fraction") for k in ("shd", "f1")}
    cadre = {"mcc": Measurement(mcc_cadre, "correlation"), **scores}
    return [
        Report("causal.cadre", "host", "cadre", metrics=cadre),
        Report("causal.cadre", "host", "beta-vae", metrics={"mcc": Measurement(mcc_vae, "c")}),
    ]


def test_cadre_claim_reads_a_nan_mcc_as_not_met() -> None:
    from neuroedge.models.cadre import bench as B

    per_seed = {0: _cadre_rows(NAN, 0.4), 1: _cadre_rows(0.9, 0.4), 2: _cadre_rows(0.9, 0.4)}
    claim = B.claim_over_seeds(per_seed, 0.0)
    assert claim["parts"]["mean_difference_above_paired_se"] is False
    assert claim["wins"] == 2 and claim["holds"] is False
    assert any("nan" in line for line in B.claim_section(claim))
    per_seed[0] = _cadre_rows(NAN, NAN)
    claim = B.claim_over_seeds(per_seed, 0.0)
    assert claim["holds"] is False and (claim["wins"], claim["ties"], claim["losses"]) == (2, 0, 0)
    assert any("(1 seed with a NaN MCC: not compared)" in x for x in B.claim_section(claim))


# safety.hair_trigger


def test_hair_trigger_rescale_c_above_the_bound_is_refused() -> None:
    """c=1e300 overflowed the twin to NaN; max() dropped it and part (d) read "same outputs"."""
    from neuroedge.models.hair_trigger import experiment as X

    cfg = {**X.DEFAULTS, "steps": 10}
    with pytest.raises(
        ConfigError, match=r"^rescale_c=\[1, 8, 1e\+300\]: expected .*1e\+06\]: .*overflows float32"
    ):
        X.check_config({**cfg, "rescale_c": [1, 8, 1e300]})
    assert X.check_config({**cfg, "rescale_c": [1, 1e6]})["rescale_c"] == [1.0, 1e6]


def _ht_rows(output_diff: float) -> list[Report]:
    def row(variant: str, **values: float) -> Report:
        metrics = {k: Measurement(v, "fraction") for k, v in values.items()}
        return Report("safety.hair_trigger", "host", variant, metrics=metrics)

    behaviour = {"refuse_before": 1.0, "utility_before": 0.8, "min_comply_after": 1.0}
    return [
        row("hair_trigger", **behaviour),
        row("control", **behaviour, max_comply_after=0.0),
        row("secrets_w4", secrets_revealed_after=0.0),
        row("secrets_w64", secrets_revealed_after=0.3),
        *(
            row(
                f"rescaled_c{c:g}",
                output_diff_before=d,
                function_change_after=1.0,
                disagree_after=0.9,
            )
            for c, d in ((1, 0.0), (8, output_diff), (32, 0.0))
        ),
    ]


def test_hair_trigger_a_nan_twin_is_not_read_as_same_outputs() -> None:
    from neuroedge.models.hair_trigger import experiment as X

    cfg = {"rescale_c": [1, 8, 32], "secret_widths": [4, 64]}
    figures = X.seed_figures(_ht_rows(NAN), cfg)
    assert math.isnan(figures["twin_output_diff"])  # max(0.0, nan, 0.0) was 0.0
    claim = X.claim_over_seeds({0: _ht_rows(0.0), 1: _ht_rows(NAN)}, cfg)
    assert claim["parts"]["d_same_outputs_other_update"] is None and claim["holds"] is None
    assert "twin_output_diff (seed 1)" in claim["reasons"]["d_same_outputs_other_update"]
    assert any(
        "d_same_outputs_other_update is None: not finite" in x for x in X.claim_section(claim)
    )
    assert X.claim_over_seeds({0: _ht_rows(0.0)}, cfg)["holds"] is True
    # a seed that measured the part failing is not hidden by another seed's NaN
    failed = X.claim_over_seeds({0: _ht_rows(0.5), 1: _ht_rows(NAN)}, cfg)
    assert failed["parts"]["d_same_outputs_other_update"] is False and failed["holds"] is False
    assert "d_same_outputs_other_update" not in failed["reasons"]


def test_hair_trigger_an_overflowing_twin_reports_nan_rates_not_argmax_of_nan() -> None:
    from neuroedge.models.hair_trigger import experiment as X
    from neuroedge.models.hair_trigger import functional as F

    rng = np.random.default_rng(0)
    x_h, _ = F.queries(rng, 16, True)
    x_b, y_b = F.queries(rng, 16, False)
    draws = {"batches": [F.queries(rng, 8, False)], "twin_probes": x_h, "probes": (x_h, x_b, y_b)}
    rows = X.rescale_rows(F.make_mlp(8, 0), {"rescale_c": [1, 1e25], "eta": 0.1}, draws)
    assert math.isfinite(rows[0].metrics["disagree_after"].value)
    nan_row = rows[1].metrics
    assert all(math.isnan(nan_row[k].value) for k in ("disagree_after", "refuse_after"))


# physics.meshft


def test_meshft_train_is_reproducible(tmp_path) -> None:
    """spec.train built MeshFT outside seeded(): its initial weights (and loss_last) were the
    global generator's, different on each call."""
    from neuroedge.models.meshft import spec

    paths = [tmp_path / f"m{i}.pt" for i in range(2)]
    for path in paths:
        torch.manual_seed(len(str(path)) + paths.index(path))  # a different caller state each
        spec.train({"train_iters": 2, "train_pairs": 4}, out=str(path))
    a, b = (torch.load(p, weights_only=False)["state_dict"] for p in paths)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_meshft_a_nan_metric_is_reported_as_divergence_not_nan_substeps() -> None:
    """A NaN omega_max read "omega_max is nan ... into nan KDK sub-steps ... nan GiB"."""
    from neuroedge.models.meshft import spec
    from neuroedge.models.meshft.mesh import periodic_grid
    from neuroedge.models.meshft.module import MeshFT, SubstepCapError

    model = MeshFT(periodic_grid(4, 4), "learn_geom").float()
    err = spec.fit_substep_refusal(SubstepCapError(NAN, NAN), model, 0.002, 10**12, 3, 64)
    assert isinstance(err, TrainingDiverged) and "nan KDK" not in str(err)
    assert str(err).startswith(
        "physics.meshft training step 4: training diverged at lr=1000000000000"
    )
    assert "lower lr (default 0.003)" in str(err)
    big = spec.fit_substep_refusal(SubstepCapError(1e6, 1e6), model, 0.002, 10.0, 1, 64)
    assert not isinstance(big, TrainingDiverged) and "KDK sub-steps" in str(big)
