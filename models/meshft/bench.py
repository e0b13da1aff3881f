"""The physics.meshft benchmark: every claim of the issue measured in one run.

Rows (16 x 16 periodic grid unless named):

* ``meshft-<hodge>``: trained on one-step plane-wave pairs; one-step MSE, rollout energy drift
  (theory energy), dispersion error, and 1e4-step modified-energy / momentum errors with the
  learned metric (on the grid and on a 256-point periodic Delaunay mesh);
* ``theory``: the fixed theory metric (c = 1), the dispersion yardstick;
* ``mgn``: the MeshGraphNet-style baseline trained on the same pairs and loss;
* ``damped r=...``: per-node Rayleigh damping; steps where the modified energy rose.

Latency per step is measured side by side (MeshFT vs MGN, same batch, same run).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from neuroedge.bench.report import finish_figure, pyplot
from neuroedge.config_values import integer
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft import train as T
from neuroedge.models.meshft.mesh import Mesh, periodic_delaunay, periodic_grid
from neuroedge.models.meshft.module import MeshFT, MeshGraphNet
from neuroedge.seeding import one_thread, seeded
from neuroedge.types import Measurement, Report

NAME = "physics.meshft"
BENCH_DEFAULTS = {"iters": 150, "mgn_iters": 600, "rollout": 500, "steps_1e4": 10_000}
MAX_FIT_ITERS = 10**5
COLUMNS = (
    "one_step_mse",
    "energy_drift",
    "dispersion_error",
    "modified_energy_err_1e4",
    "momentum_err_1e4",
    "modified_energy_rises",
    "latency_p50_ms",
)


def conservation(model: MeshFT, steps: int, seed: int = 0) -> dict[str, float]:
    """Modified-energy and momentum errors over ``steps`` KDK steps at omega_max dt = 0.5 with
    the model's (learned) metric, from a random state."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        m, w = (t.double() for t in model.hodge())
    edges, n = model.tensors.edges, model.tensors.n_nodes
    dt = 0.5 / F.omega_max(m, w, edges)
    q = torch.as_tensor(rng.standard_normal(n))
    p = torch.as_tensor(rng.standard_normal(n)) * m
    qs, ps = F.rollout(q, p, m, w, edges, dt, steps)
    h = F.modified_energy(qs, ps, m, w, edges, dt).numpy()
    mom = ps.sum(-1).numpy()
    return {
        "modified": float(np.abs(h / h[0] - 1).max()),
        "momentum": float(np.abs(mom - mom[0]).max()),
        "energy": F.relative_drift(F.energy(qs, ps, m, w, edges).numpy()),
    }


def passivity(mesh: Mesh, rate: float, steps: int = 5000, seed: int = 0) -> int:
    """Steps where the damped modified energy rose (tolerance 1e-12 relative)."""
    rng = np.random.default_rng(seed)
    m = torch.as_tensor(mesh.star0 * rng.uniform(0.5, 2, mesh.n_nodes))
    w = torch.as_tensor(mesh.star1 * rng.uniform(0.5, 2, mesh.n_edges))
    r = torch.as_tensor(rate * rng.uniform(0.0, 2.0, mesh.n_nodes))
    edges = torch.as_tensor(mesh.edges)
    dt = 0.5 / F.omega_max(m, w, edges)
    q = torch.as_tensor(rng.standard_normal(mesh.n_nodes))
    p = torch.as_tensor(rng.standard_normal(mesh.n_nodes)) * m
    qs, ps = F.rollout(q, p, m, w, edges, dt, steps, r)
    h = F.modified_energy(qs, ps, m, w, edges, dt).numpy()
    return int((h[1:] > h[:-1] * (1 + 1e-12)).sum())


def _mgn(mesh: Mesh, data: T.WaveBatch, hidden: int, layers: int) -> MeshGraphNet:
    dt = data.dt
    scale = (float(data.q0.std()), float(data.p0.std()))
    rates = (float(((data.q1 - data.q0) / dt).std()), float(((data.p1 - data.p0) / dt).std()))
    return MeshGraphNet(mesh, hidden, layers, scale, rates).float()


def _train_models(
    mesh: Mesh, data: T.WaveBatch, cfg: Mapping[str, Any]
) -> dict[str, torch.nn.Module]:
    """MeshFT (learn_geom, scalar), the fixed theory model and the MGN on the same pairs,
    each initialised from seed 0 (``seeded``: the same weights in every run and process)."""
    models: dict[str, torch.nn.Module] = {}
    for hodge, lr in (("learn_geom", 3e-3), ("scalar", 5e-2)):
        with seeded(0):
            model = MeshFT(mesh, hodge).float()
        T.fit(model, data, cfg["iters"], lr, desc=f"meshft-{hodge}")
        models[f"meshft-{hodge}"] = model
    models["theory"] = MeshFT(mesh, "theory").float()
    with seeded(0):
        mgn = _mgn(mesh, data, 32, 2)
    T.fit(mgn, data, cfg["mgn_iters"], 1e-3, batch_size=16, desc="mgn")
    models["mgn"] = mgn
    return models


def bench(
    out_dir: str, backends: list[str], config: Mapping[str, Any], history: str | None = None
) -> dict[str, Any]:
    from neuroedge.bench.report import write_report

    cfg = bench_config(config)
    with one_thread():  # small graphs: extra threads only contend on a shared 2-core box
        dt, mesh = 0.002, periodic_grid(16, 16)
        data = T.plane_wave_pairs(mesh, 256, dt, seed=0)
        test = T.plane_wave_pairs(mesh, 64, dt, seed=1)
        ks = T.wavenumbers(4)
        q0, p0 = T.superposed_waves(mesh, 3, seed=2)
        models = _train_models(mesh, data, cfg)
        rows, traces, disp = [], {}, {}
        for name, model in models.items():
            metrics, traces[name], disp[name] = _model_metrics(
                name, model, mesh, test, (q0, p0), dt, ks, cfg
            )
            rows.append(Report(NAME, "host", name, metrics=metrics))
        lat = _step_latency(models, q0, p0, dt)
        for row_i, row in enumerate(rows):
            if row.variant in lat:
                rows[row_i] = row.with_metrics(**lat[row.variant].metrics())
        rows += _damped_rows()
        doc = _document(rows, cfg, traces, disp, ks, dt, lat)
        write_report(
            doc,
            out_dir,
            columns=COLUMNS,
            sections=_sections(doc),
            plots=[energy_drift_plot, dispersion_plot],
            history=history,
        )
        return doc


def bench_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The bench keys over BENCH_DEFAULTS, each an integer >= 1 (ConfigError otherwise), checked
    before any training so a bad value is refused at once, not after minutes of fitting. The
    rollouts (``rollout``, ``steps_1e4``) take one CFL sub-step a step at the bench's dt, so
    functional.MAX_KDK_STEPS, which F.rollout enforces, bounds them here too."""
    cfg = {**BENCH_DEFAULTS, **config}
    # the fits: one Adam step each (about 10 ms on the 16 x 16 grid), so 10^5 is hours
    most = {"rollout": F.MAX_KDK_STEPS, "steps_1e4": F.MAX_KDK_STEPS}
    most |= {"iters": MAX_FIT_ITERS, "mgn_iters": MAX_FIT_ITERS}
    return {**cfg, **{key: integer(cfg, key, 1, most.get(key)) for key in BENCH_DEFAULTS}}


def _model_metrics(
    name: str,
    model: torch.nn.Module,
    mesh: Mesh,
    test: T.WaveBatch,
    state: tuple[np.ndarray, np.ndarray],
    dt: float,
    ks: list[tuple[int, int]],
    cfg: Mapping[str, Any],
) -> tuple[dict[str, Measurement], list[float], list[float]]:
    """One model's metrics, its rollout energy trace E_t / E_0 and its dispersion errors."""
    with torch.no_grad():
        mse = T.one_step_loss(model.double(), test).item()
    qs, ps = T.model_rollout(model, *state, dt, cfg["rollout"])
    energy = T.theory_energy(mesh, qs, ps)
    errs = T.dispersion_errors(model, mesh, ks, dt, 100)
    metrics = {
        "one_step_mse": Measurement(mse, "normalised MSE"),
        "energy_drift": Measurement(F.relative_drift(energy), "relative"),
        "dispersion_error": Measurement(float(errs.mean()), "relative"),
    }
    if isinstance(model, MeshFT) and name != "theory":
        metrics.update(_conservation_metrics(model, cfg["steps_1e4"]))
    return metrics, (energy / energy[0]).tolist(), errs.tolist()


def _conservation_metrics(model: MeshFT, steps: int) -> dict[str, Measurement]:
    """Modified-energy and momentum errors on the grid and on the Delaunay twin."""
    metrics = {}
    for label, target in (("", model), ("_delaunay", _delaunay_twin(model))):
        cons = conservation(target, steps)
        metrics[f"modified_energy_err_1e4{label}"] = Measurement(cons["modified"], "rel")
        metrics[f"momentum_err_1e4{label}"] = Measurement(cons["momentum"], "abs")
    return metrics


def _step_latency(
    models: Mapping[str, torch.nn.Module], q0: np.ndarray, p0: np.ndarray, dt: float
) -> dict[str, Any]:
    """Step latency of MeshFT (learn_geom) and MGN, same batch of 8, side by side."""
    from neuroedge.bench.latency import measure_side_by_side

    batch = (torch.as_tensor(np.stack([q0] * 8)), torch.as_tensor(np.stack([p0] * 8)))
    return measure_side_by_side(
        {n: (lambda mdl=models[n]: _step(mdl, batch, dt)) for n in ("meshft-learn_geom", "mgn")},
        repeats=50,
        batch=8,
    )


def _damped_rows() -> list[Report]:
    """The ``damped r=...`` rows: steps where the damped modified energy rose."""
    return [
        Report(
            NAME,
            "host",
            f"damped r={rate:g}",
            metrics={
                "modified_energy_rises": Measurement(
                    passivity(periodic_delaunay(64, 3), rate), "steps of 5000", "counted"
                )
            },
        )
        for rate in (0.0, 0.01, 0.1)
    ]


def _document(
    rows: list[Report],
    cfg: Mapping[str, Any],
    traces: dict[str, list[float]],
    disp: dict[str, list[float]],
    ks: list[tuple[int, int]],
    dt: float,
    lat: Mapping[str, Any],
) -> dict[str, Any]:
    """The report.json document, with the MGN / MeshFT drift and latency ratios."""
    from neuroedge.bench.report import build_document

    drift = {
        r.variant: r.metrics["energy_drift"].value for r in rows if "energy_drift" in r.metrics
    }
    ratio = drift["mgn"] / drift["meshft-learn_geom"]
    doc = build_document(
        NAME,
        rows,
        config=cfg,
        energy_traces=traces,
        dt=dt,
        dispersion={"ks": [list(k) for k in ks], "errors": disp},
        drift_ratio_mgn_over_meshft=ratio,
        latency_ratio_mgn_over_meshft=lat["mgn"].percentile(50)
        / lat["meshft-learn_geom"].percentile(50),
    )
    doc["columns"] = COLUMNS
    return doc


def _sections(doc: Mapping[str, Any]) -> list[str]:
    """report.md lines: the drift and latency ratios and what the ``*_1e4`` columns hold."""
    return [
        f"Rollout energy drift, MGN / MeshFT (learn_geom): "
        f"{doc['drift_ratio_mgn_over_meshft']:.1f}x.",
        (
            f"Step latency MGN / MeshFT (batch 8, side by side): "
            f"{doc['latency_ratio_mgn_over_meshft']:.2f}x."
        ),
        (
            "`*_1e4` columns: 1e4 KDK steps at omega_max dt = 0.5 with the learned metric "
            "(`_delaunay` in report.json: the same networks on a periodic Delaunay mesh)."
        ),
    ]


def _step(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor], dt: float) -> Any:
    with torch.no_grad():
        return model(*batch, dt)


def _delaunay_twin(model: MeshFT) -> MeshFT:
    """The same learned metric (geometry MLPs or scalars) on a periodic Delaunay mesh."""
    mesh = periodic_delaunay(256, seed=0)
    twin = MeshFT(mesh, model.hodge.mode).double()
    state = {
        k: v for k, v in model.state_dict().items() if not k.startswith(("tensors.", "hodge.mesh."))
    }
    twin.load_state_dict(state, strict=False)
    return twin


def energy_drift_plot(doc: dict[str, Any], path: Path) -> Path:
    """Theory energy E_t / E_0 along the rollout for every model."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, trace in doc["energy_traces"].items():
        ax.plot(np.arange(len(trace)) * doc["dt"], np.abs(np.array(trace) - 1) + 1e-16, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("time")
    ax.set_ylabel("|E_t / E_0 - 1| (theory energy)")
    ax.set_title("rollout energy drift")
    ax.legend()
    return finish_figure(fig, path)


def dispersion_plot(doc: dict[str, Any], path: Path) -> Path:
    """Relative frequency error against |k| for each model."""
    plt = pyplot()
    kabs = 2 * np.pi * np.linalg.norm(np.array(doc["dispersion"]["ks"], dtype=float), axis=1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, errs in doc["dispersion"]["errors"].items():
        ax.semilogy(kabs, np.array(errs) + 1e-16, "o", ms=3, label=name)
    ax.set_xlabel("|k|")
    ax.set_ylabel("|omega_hat - c|k|| / c|k|")
    ax.set_title("dispersion error")
    ax.legend()
    return finish_figure(fig, path)
