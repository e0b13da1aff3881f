"""physics.meshft: a dt whose CFL sub-steps multiply the work past the bounds is refused with a
ConfigError naming dt and the sub-steps, before any rollout or training."""

from __future__ import annotations

import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft import spec
from neuroedge.models.meshft import train as T
from neuroedge.models.meshft.mesh import periodic_grid


def _boom(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the sub-step bound was checked")


def test_run_refuses_a_dt_of_billions_of_substeps_at_build() -> None:
    with pytest.raises(ConfigError, match=r"dt=1000000000\.0: .* about 4\.72e\+10 KDK sub-steps"):
        spec.build({"dt": 1e9, "steps": 1})
    with pytest.raises(ConfigError, match=r"dt=1e\+300: .*above the bound of 1,000,000"):
        spec.build({"dt": 1e300, "steps": 1})
    with pytest.raises(ConfigError, match=r"steps=1000000 x 48 in all, .* dt <= 0\.0212"):
        spec.build({"dt": 1.0, "steps": 10**6})
    assert spec.build({"dt": 1.0, "steps": 10}).meta["nodes"] == 256  # 48 sub-steps a step


def test_rollout_bounds_steps_times_substeps(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = periodic_grid(8, 8)
    m, w = torch.as_tensor(mesh.star0), torch.as_tensor(mesh.star1)
    edges, q = torch.as_tensor(mesh.edges), torch.zeros(mesh.n_nodes, dtype=torch.float64)
    monkeypatch.setattr(F, "kdk_step", _boom)
    with pytest.raises(ConfigError, match=r"dt=1000000\.0: .*KDK sub-steps, steps=3 x"):
        F.rollout(q, q, m, w, edges, 1e6, 3)


def test_train_refuses_substeps_past_the_time_and_memory_bounds(monkeypatch) -> None:
    monkeypatch.setattr(T, "plane_wave_pairs", _boom)
    monkeypatch.setattr(T, "fit", _boom)
    with pytest.raises(ConfigError, match=r"dt=100\.0: .*4,721 KDK sub-steps; .*6\.9 GiB"):
        spec.train({"dt": 100.0})
    with pytest.raises(ConfigError, match=r"train_iters=100000 x 24 in all"):
        spec.train({"dt": 0.5, "train_iters": 100_000})


def test_bench_rollouts_are_bounded_before_training() -> None:
    from neuroedge.models.meshft.bench import bench_config

    with pytest.raises(ConfigError, match=r"rollout=2000000: expected an integer in 1\.\.1000000"):
        bench_config({"rollout": 2 * 10**6})
    assert bench_config({"steps_1e4": 10**6})["steps_1e4"] == 10**6


def test_run_tracks_conservation_without_keeping_the_trajectory():
    """The run stacked every step's state ([steps + 1, batch, N], GBs at 1e6 steps) to take
    two maxima; the streamed errors equal those of the stacked rollout exactly."""
    import numpy as np
    import torch
    from neuroedge.models.meshft import functional as F
    from neuroedge.models.meshft import spec as S
    from neuroedge.registry import get_model

    cfg = {**S.DEFAULTS, "smoke": True, "steps": 40}
    example = get_model("physics.meshft").example_for(0, cfg)
    out = S.build(cfg).fn(example["q"], example["p"])
    model, _ = S.load_model(cfg)
    q, p = torch.as_tensor(example["q"]), torch.as_tensor(example["p"])
    qs, ps = model.rollout(q, p, cfg["dt"], cfg["steps"])
    with torch.no_grad():
        m, w = model.hodge()
        h = cfg["dt"] / F.substeps(F.omega_max(m, w, model.tensors.edges), cfg["dt"])
        mod = F.modified_energy(qs, ps, m, w, model.tensors.edges, h).numpy()
    mom = ps.sum(-1).numpy()
    assert np.array_equal(out["q_final"], qs[-1].numpy())
    assert np.array_equal(out["modified_energy_error"], np.abs(mod / mod[0] - 1).max(0))
    assert np.array_equal(out["momentum_error"], np.abs(mom - mom[0]).max(0))


def test_training_pairs_and_fit_iterations_are_bounded():
    import pytest
    from neuroedge.errors import ConfigError
    from neuroedge.models.meshft import spec as S
    from neuroedge.models.meshft.bench import bench_config

    with pytest.raises(
        ConfigError, match=r"train_pairs=1000000000: expected an integer in 1..100000"
    ):
        S.train_values({**S.DEFAULTS, "train_pairs": 10**9})
    for key in ("iters", "mgn_iters"):
        with pytest.raises(ConfigError, match=f"{key}=100000000"):
            bench_config({key: 10**8})


def test_training_stops_before_a_learned_metric_needs_too_many_substeps(monkeypatch) -> None:
    """lr=10 passed the check at the initial metric (1 sub-step); one AdamW step later the CFL
    guard split the step into ~26,000 sub-steps, all kept for autograd (> 8 GB RSS in 7 s).
    The cap now holds in every step's forward: here 100 sub-steps of a 4 x 4 grid (monkeypatched
    cap), with a spy that fails if a forward pass goes past it."""
    from neuroedge.models.meshft.module import MeshFT

    mesh = periodic_grid(4, 4)
    per_sub = spec.TRAIN_BATCH * (mesh.n_nodes + mesh.n_edges) * spec.AUTOGRAD_BYTES
    monkeypatch.setattr(spec, "MAX_AUTOGRAD_BYTES", 100 * per_sub)
    substeps = F.substeps

    def capped(omega: float, dt: float, cfl: float = 1.0) -> int:
        n = substeps(omega, dt, cfl)
        assert n <= 100, f"a training step of {n:,} sub-steps ran past the cap"
        return n

    monkeypatch.setattr(F, "substeps", capped)
    data = T.plane_wave_pairs(mesh, 16, 0.002, seed=0)
    model = MeshFT(mesh, "learn_geom").float()
    assert spec.check_train_substeps(model, 0.002, 30) == 1  # the initial metric passes
    with pytest.raises(ConfigError, match=r"^lr=10\.0: after \d+ AdamW steps? .* into [\d,]+ KDK"):
        T.fit(model, data, 30, 10.0)
    assert len(T.fit(MeshFT(mesh, "learn_geom").float(), data, 30, 3e-3)) == 30  # default lr


def test_a_rest_state_has_zero_energy_error_not_nan():
    """H_h(0) = 0 for p = 0 and q constant (a legal state at rest, energy exactly conserved):
    the relative error was 0/0 = NaN; it reads 0 (absolute where H_h(0) = 0)."""
    import numpy as np
    from neuroedge.models.meshft import functional as F
    from neuroedge.models.meshft import spec as S

    run = S.build({**S.DEFAULTS, "smoke": True, "steps": 5})
    n = run.meta["nodes"]
    moving = np.random.default_rng(0).normal(size=(2, n))
    q = np.stack([np.zeros(n), np.full(n, 0.7), moving[0]])
    p = np.stack([np.zeros(n), np.zeros(n), moving[1]])
    out = run.fn(q, p)
    err = out["modified_energy_error"]
    assert np.isfinite(err).all()
    assert err[0] == 0 and err[1] == 0 and err[2] < 1e-12
    assert np.array_equal(out["q_final"][:2], q[:2]) and not out["p_final"][:2].any()
    assert F.relative_drift([0.0, 0.0, 0.0]) == 0.0
    assert F.relative_drift([0.0, 1e-3, -2e-3]) == 2e-3  # absolute where E_0 = 0
    assert F.relative_drift([2.0, 1.0]) == 0.5
