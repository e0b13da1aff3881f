"""transfer.grad_transformer: fine-tuning, tokens, causal decoding, the linear reference, the
bench on one seed, and refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.errors import ConfigError
from neuroedge.models.grad_transformer import experiment as X
from neuroedge.models.grad_transformer import functional as F


def test_gradient_descent_converges_to_least_squares() -> None:
    fam = F.Family.make(0)
    rng = np.random.default_rng(1)
    x, y = fam.task(rng, 400, rng.standard_normal(F.D_IN))
    feats = fam.small_features(x)
    last = F.gd_iterates(feats, y, 3000, 0.1, 2)
    np.testing.assert_allclose(last[-1], np.linalg.lstsq(feats, y, rcond=None)[0], atol=1e-6)
    assert last.shape == (2, F.SMALL)


def test_large_tokens_round_trip_with_zero_padding() -> None:
    delta = np.random.default_rng(0).standard_normal((3, F.LARGE))
    tokens = F.large_tokens(delta)
    assert tokens.shape == (3, 4, F.TOKEN) and (tokens[:, 1:, 16] == 0).all()
    np.testing.assert_array_equal(F.from_large_tokens(tokens), delta)
    assert F.small_tokens(delta[:, : F.SMALL])[:, 0, F.SMALL :].sum() == 0


def test_generation_feeds_back_what_teacher_forcing_would_see() -> None:
    torch.manual_seed(0)
    model = F.GradTransformer(16).eval()
    small = np.random.default_rng(2).standard_normal((5, F.SMALL))
    large = model.generate(small)
    src = torch.as_tensor(F.small_tokens(small), dtype=torch.float32)
    tgt = torch.as_tensor(F.large_tokens(large), dtype=torch.float32)
    with torch.no_grad():
        forced = model(src, tgt[:, :-1])  # standardisation is the identity here
    np.testing.assert_allclose(F.from_large_tokens(forced.double().numpy()), large, atol=1e-5)


def test_the_linear_reference_is_exact_on_linear_pairs() -> None:
    rng = np.random.default_rng(3)
    small = rng.standard_normal((50, F.SMALL))
    m, b = rng.standard_normal((F.SMALL, F.LARGE)), rng.standard_normal(F.LARGE)
    lin = X.LinearMap(small, small @ m + b)
    probe = rng.standard_normal((4, F.SMALL))
    np.testing.assert_allclose(lin.generate(probe), probe @ m + b, atol=1e-9)


def test_bench_one_seed_recovers_part_of_the_gap(tmp_path: Path) -> None:
    doc = X.bench(str(tmp_path), config={"seed": 0})
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    pgr = {arm: m["pgr"]["value"] for arm, m in rows.items() if "pgr" in m}
    assert pgr["large_init"] < 0 and pgr["linear_map"] > 0.9, pgr
    assert 0.3 < pgr["grad_t"] < 1.0 and 0.3 < pgr["grad_t_3orgs"] < 1.0, pgr
    assert rows["large_finetuned"]["test_mse"]["value"] < rows["small"]["test_mse"]["value"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["claim"]["pgr"]["grad_t"] == [pytest.approx(pgr["grad_t"])]
    assert (tmp_path / "pgr.png").stat().st_size > 5_000
    assert "## Claim over seeds [0]:" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("iterates", 200, r"iterates=200: expected an integer in 1\.\.100 \(at most gd_steps\)"),
        ("d_model", 66, r"d_model=66: expected a multiple of the 4 heads"),
        ("gd_lr", 0, r"gd_lr=0: expected a finite number in \(0, 1\]"),
        ("shadow_tasks", 1.5, r"shadow_tasks=1\.5: expected an integer"),
        ("seed", -1, r"seed=-1: expected an integer in 0\.\."),
    ],
)
def test_bad_config_values_are_refused_before_any_work(key, value, message, tmp_path) -> None:
    with pytest.raises(ConfigError, match=message):
        X.bench(str(tmp_path / "out"), config={key: value})
    assert not (tmp_path / "out").exists()


def test_the_registered_generator_checks_its_input() -> None:
    import neuroedge as ne

    program = ne.model("transfer.grad_transformer").build({"smoke": True})
    out = program.fn(np.zeros((2, F.SMALL)))
    assert out["delta_large"].shape == (2, F.LARGE)
    with pytest.raises(ValueError, match=r"delta_small: expected \[batch >= 1, 9\]"):
        program.fn(np.zeros((2, 8)))
    bad = np.zeros((3, F.SMALL))
    bad[1, 4] = np.nan
    with pytest.raises(ValueError, match=r"delta_small: row 1 column 4 .* is not finite"):
        program.fn(bad)
