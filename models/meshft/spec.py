"""The registered ModelSpec of physics.meshft.

``run``: roll a batch of node states (q, p) forward ``steps`` KDK steps of size ``dt`` on the
configured mesh with the trained metric (``neuroedge train physics.meshft``) or, untrained, the
theory metric; returns the final state and the modified-energy and momentum errors.
``bench``: see ``neuroedge.models.meshft.bench``.

Config: ``mesh`` = "grid" (16 x 16 periodic), "delaunay" (256-point periodic Delaunay) or a
path to a meshio file; ``steps``, ``dt``, ``checkpoint``, ``smoke`` (the theory metric, no
checkpoint read). ``hodge`` is a training key: a build takes the checkpoint's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.config_values import MAX_LR, integer, number
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

DEFAULTS: dict[str, Any] = {
    "mesh": "grid",
    "hodge": "learn_geom",
    "steps": 100,
    "dt": 0.002,
    "train_iters": 150,
    "train_pairs": 256,
    "lr": 3e-3,
}


BUILTIN_MESHES = ("grid", "delaunay")
MAX_TRAIN_PAIRS = 10**5  # (q, p) -> (q, p) pairs: 1e5 of the default 256-node grid are 0.8 GB
MAX_STEPS = 10**6  # KDK steps per run: 1e6 steps on the 16 x 16 grid is already minutes
# The CFL guard splits a step of dt into ceil(omega_max dt) KDK sub-steps, so dt multiplies
# the work: a run's steps x sub-steps and training's train_iters x sub-steps are bounded by
# MAX_STEPS too. Training also backpropagates through every sub-step of its one-step
# prediction: autograd keeps about AUTOGRAD_BYTES per node-or-edge value per pair per
# sub-step (measured: 1.5 MB per sub-step on the 16 x 16 grid, 256 nodes + 512 edges, at
# train.fit's TRAIN_BATCH = 64 pairs, float32), refused above MAX_AUTOGRAD_BYTES (4 GiB).
AUTOGRAD_BYTES, TRAIN_BATCH, MAX_AUTOGRAD_BYTES = 32, 64, 4 * 2**30


def rollout_values(cfg: Mapping[str, Any]) -> tuple[int, float]:
    """(steps, dt) of a run: ConfigError unless steps is an integer in 1..MAX_STEPS and dt
    finite and > 0."""
    return integer(cfg, "steps", 1, MAX_STEPS), number(cfg, "dt", 0.0, open_low=True)


# AdamW's step size, at most config_values.MAX_LR (as snn.lif_convnet's, event.bivision's and
# unisparse's lr): an Adam step moves each weight by up to lr, and from lr=1 (1 to 3 steps)
# the learned metric's omega_max already outgrows the training's sub-step cap
# (``fit_substep_cap``: refused); lr above float32's largest value (3.4e38) overflowed in
# AdamW's update, a RuntimeError traceback.


def train_values(cfg: Mapping[str, Any]) -> tuple[int, int, float, float]:
    """(train_iters, train_pairs, lr, dt) of ``train``: integers >= 1 (pairs at most
    MAX_TRAIN_PAIRS: each is a simulated (state, next state) of the mesh, generated and held
    in memory), finite numbers > 0 (lr at most MAX_LR); train_iters x sub-steps is bounded by
    ``check_train_substeps``."""
    return (
        integer(cfg, "train_iters", 1),
        integer(cfg, "train_pairs", 1, MAX_TRAIN_PAIRS),
        number(cfg, "lr", 0.0, MAX_LR, open_low=True),
        number(cfg, "dt", 0.0, open_low=True),
    )


def check_train_substeps(model: Any, dt: float, iters: int) -> int:
    """The CFL sub-steps of a training step at ``dt`` (at the initial metric), after refusing
    with ConfigError train_iters x sub-steps above MAX_STEPS, or sub-steps whose autograd
    activations would exceed MAX_AUTOGRAD_BYTES; the message names dt and the sub-steps.
    During training ``fit_substep_cap`` bounds the same memory as the metric moves."""
    from neuroedge.errors import ConfigError
    from neuroedge.models.meshft import functional as F

    omega, per_sub, size = _autograd_per_substep(model, TRAIN_BATCH)
    n_sub = F.check_substeps(omega, dt, iters, MAX_STEPS, "train_iters", model.cfl)
    if n_sub * per_sub > MAX_AUTOGRAD_BYTES:
        fits = MAX_AUTOGRAD_BYTES // per_sub
        raise ConfigError(
            f"dt={dt!r}: the CFL guard (omega_max {omega:.4g}) splits each training step into "
            f"{n_sub:,} KDK sub-steps; backpropagating through them keeps about "
            f"{n_sub * per_sub / 2**30:.1f} GiB of activations ({per_sub / 2**20:.1f} MiB a "
            f"sub-step for {TRAIN_BATCH} pairs of {size} nodes + edges), above the "
            f"{MAX_AUTOGRAD_BYTES / 2**30:.0f} GiB cap; use dt <= {fits * model.cfl / omega:.3g}"
        )
    return n_sub


def fit_substep_cap(model: Any, pairs: int) -> int:
    """The most CFL sub-steps a training step of ``pairs`` pairs may take: those whose autograd
    activations fit MAX_AUTOGRAD_BYTES. ``train.fit`` sets it as ``model.substep_cap``, which
    the forward checks at the metric it computes anyway: a large lr can raise omega_max by
    orders of magnitude in one step (lr=10: 1 -> 26,340 sub-steps, 39 GiB, on the 16 x 16
    grid), which the check at the initial metric cannot see."""
    return max(1, MAX_AUTOGRAD_BYTES // _autograd_per_substep(model, pairs)[1])


def fit_substep_refusal(err: Any, model: Any, dt: float, lr: float, done: int, pairs: int) -> Any:
    """The ConfigError for a training step past ``fit_substep_cap`` (``err``: the forward's
    SubstepCapError), after ``done`` AdamW steps at ``lr``; TrainingDiverged when the metric's
    omega_max is NaN or infinite (the weights diverged: no sub-step count to name)."""
    from neuroedge.errors import ConfigError, TrainingDiverged

    if not math.isfinite(err.omega):  # NaN / inf weights: no sub-step count or memory to name
        return TrainingDiverged(
            f"physics.meshft training step {done + 1}: training diverged at lr={lr!r} (the "
            f"learned metric's omega_max is {err.omega} after {done} AdamW "
            f"step{'s' * (done != 1)}); the metric is no longer finite, so nothing was saved: "
            f"lower lr (default {DEFAULTS['lr']:g}) and train again"
        )
    per_sub, ratio = _autograd_per_substep(model, pairs)[1], err.ratio
    implied = f"{math.ceil(ratio):,}" if math.isfinite(ratio) else f"{ratio}"
    return ConfigError(
        f"lr={lr!r}: after {done} AdamW step{'s' * (done != 1)} the learned metric's omega_max "
        f"is {err.omega:.4g}, so the CFL guard would split the next training step (dt={dt!r}) "
        f"into {implied} KDK sub-steps; backpropagating through them keeps about "
        f"{ratio * per_sub / 2**30:.1f} GiB of activations, above the "
        f"{MAX_AUTOGRAD_BYTES / 2**30:.0f} GiB cap: training stopped; use a smaller lr "
        f"(default {DEFAULTS['lr']:g})"
    )


def _autograd_per_substep(model: Any, pairs: int) -> tuple[float, int, int]:
    """(omega_max of the model's current metric, autograd bytes a sub-step keeps for
    ``pairs`` pairs, nodes + edges)."""
    import torch
    from neuroedge.models.meshft import functional as F

    with torch.no_grad():
        m, w = model.hodge()
    omega = F.omega_max(m, w, model.tensors.edges)
    size = model.tensors.n_nodes + len(model.tensors.edges)
    return omega, pairs * size * AUTOGRAD_BYTES, size


def make_mesh(name: str) -> Any:
    """The mesh a config names: "grid", "delaunay" or a meshio file path."""
    from neuroedge.models.meshft import mesh as M

    if name == "grid":
        return M.periodic_grid(16, 16)
    if name == "delaunay":
        return M.periodic_delaunay(256, seed=0)
    if not Path(name).suffix and not Path(name).exists():
        raise M.MeshError(
            f"mesh {name!r}: not a built-in mesh ({', '.join(BUILTIN_MESHES)}) and no such file"
        )
    return M.read_mesh(name)


def _checkpoint(config: Mapping[str, Any]) -> Path:
    from neuroedge.paths import checkpoint_path

    return Path(config.get("checkpoint") or checkpoint_path(SPEC.name))


def load_model(config: Mapping[str, Any]) -> tuple[Any, bool]:
    """MeshFT with trained metrics when a checkpoint for this mesh exists, else theory. A
    checkpoint the config names (``checkpoint``) that was trained on another mesh is refused
    (ConfigError): the user asked for those weights; the default one is then passed over."""
    from neuroedge.checkpoints import load_checkpoint, load_weights, resolve_checkpoint
    from neuroedge.config_values import fresh_build
    from neuroedge.errors import ConfigError
    from neuroedge.models.meshft.module import MeshFT

    cfg = {**DEFAULTS, **config}
    smoke = fresh_build(cfg)  # smoke=true with a checkpoint: refused, it would not be read
    mesh = make_mesh(str(cfg["mesh"]))
    path = resolve_checkpoint(cfg, SPEC.name, check=not smoke)
    named = bool(cfg.get("checkpoint"))
    if path.is_file() and not smoke:
        ckpt = load_checkpoint(path, required=("state_dict", "config"))
        saved = saved_config(ckpt["config"], path)
        if saved["mesh"] == cfg["mesh"]:
            model = MeshFT(mesh, saved["hodge"]).double()
            load_weights(model, ckpt["state_dict"], path)
            return model, True
        if named:  # the user asked for these weights: they do not fit this mesh
            raise ConfigError(
                f"mesh={cfg['mesh']!r}: checkpoint {path} was trained on mesh "
                f"{saved['mesh']!r}; train on this mesh or leave checkpoint unset"
            )
    return MeshFT(mesh, "theory").double(), False


def saved_config(saved: Any, path: Path) -> dict[str, str]:
    """A checkpoint's ``{"mesh", "hodge"}`` (as ``train`` saves them), checked: ArtifactError
    naming the file and the bad value."""
    from neuroedge.checkpoint_configs import checked_saved_config

    return checked_saved_config(saved, path, lambda s: _mesh_and_hodge(s, path), ("mesh", "hodge"))


def _mesh_and_hodge(saved: Mapping[str, Any], path: Path) -> dict[str, str]:
    from neuroedge.errors import ArtifactError
    from neuroedge.models.meshft.module import HODGE_MODES

    mesh, hodge = saved.get("mesh"), saved.get("hodge")
    if not isinstance(mesh, str) or not mesh:
        raise ArtifactError(
            f"{path}: checkpoint config mesh={mesh!r}: expected the name or file of a mesh"
        )
    if not isinstance(hodge, str) or hodge not in HODGE_MODES:
        raise ArtifactError(
            f"{path}: checkpoint config hodge={hodge!r}: expected one of {', '.join(HODGE_MODES)}"
        )
    return {"mesh": mesh, "hodge": hodge}


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(q, p)`` -> final state and the conservation errors of the rollout."""
    import torch
    from neuroedge.models.meshft import functional as F

    cfg = {**DEFAULTS, **config}
    steps, dt = rollout_values(cfg)
    model, trained = load_model(cfg)
    n = model.tensors.n_nodes
    with torch.no_grad():  # dt's CFL sub-steps x steps within MAX_STEPS, before any input
        m, w = model.hodge()
        omega = F.omega_max(m, w, model.tensors.edges)
        F.check_substeps(omega, dt, steps, MAX_STEPS, cfl=model.cfl)

    def fn(q: np.ndarray, p: np.ndarray) -> dict[str, np.ndarray]:
        for name, arr in (("q", q), ("p", p)):
            if np.ndim(arr) != 2 or np.shape(arr)[1] != n:
                raise ValueError(
                    f"{name}: expected shape [batch, {n}] for this mesh, got {list(np.shape(arr))}"
                )
            if not np.isfinite(arr).all():
                raise ValueError(
                    f"{name}: row {int(np.argwhere(~np.isfinite(arr))[0][0])} "
                    "has NaN or infinite values"
                )
        with torch.no_grad():  # errors tracked step by step: no trajectory kept
            m, w = model.hodge()
            qf, pf, e_err, mom_err = F.rollout_conservation(  # shadow energy at the sub-step
                torch.as_tensor(q), torch.as_tensor(p), m, w, model.tensors.edges, dt, steps,
                model.rate(), model.cfl,
            )  # fmt: skip
        return {
            "q_final": qf.numpy(),
            "p_final": pf.numpy(),
            "modified_energy_error": e_err.numpy(),
            "momentum_error": mom_err.numpy(),
        }

    return HostProgram(fn, meta={"trained": trained, "mesh": cfg["mesh"], "nodes": n})


def example(seed: int = 0, config: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Two superposed-plane-wave states on the configured mesh (default the 16 x 16 grid)."""
    from neuroedge.models.meshft.train import superposed_waves

    mesh = make_mesh(str({**DEFAULTS, **(config or {})}["mesh"]))
    states = [superposed_waves(mesh, 3, seed * 2 + k) for k in range(2)]
    return {"q": np.stack([s[0] for s in states]), "p": np.stack([s[1] for s in states])}


def train(config: Mapping[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    """Fit the metric on one-step plane-wave pairs and save a weights-only checkpoint."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.meshft import train as T
    from neuroedge.models.meshft.module import MeshFT
    from neuroedge.seeding import seeded

    cfg = {**DEFAULTS, **(config or {})}
    iters, pairs, lr, dt = train_values(cfg)
    mesh = make_mesh(str(cfg["mesh"]))
    with seeded(0):  # the initial weights, as bench._train_models: one config, one checkpoint
        model = MeshFT(mesh, str(cfg["hodge"])).float()
    check_train_substeps(model, dt, iters)
    data = T.plane_wave_pairs(mesh, pairs, dt, seed=0)
    losses = T.fit(model, data, iters, lr)
    path = _checkpoint({**cfg, "checkpoint": out or cfg.get("checkpoint")})
    save_checkpoint(
        path,
        {
            "state_dict": model.double().state_dict(),
            "config": {"mesh": cfg["mesh"], "hodge": cfg["hodge"]},
        },
    )
    return {"checkpoint": str(path), "loss_first": losses[0], "loss_last": losses[-1]}


SPEC = ModelSpec(
    name="physics.meshft",
    family="algorithm",
    summary="MeshFT-Net: port-Hamiltonian wave physics on meshes, metric learned, topology fixed",
    inputs=(IOSpec("q", ("batch", "nodes"), "float64"), IOSpec("p", ("batch", "nodes"), "float64")),
    outputs=(
        IOSpec("q_final", ("batch", "nodes"), "float64"),
        IOSpec("p_final", ("batch", "nodes"), "float64"),
        IOSpec("modified_energy_error", ("batch",), "float64"),
        IOSpec("momentum_error", ("batch",), "float64"),
    ),
    build=build,
    example=example,
    paper=Paper(
        "MeshFT / MeshFT-Net (Noguchi & Kawahara)",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2605.00394",
    ),
    efficiency=Efficiency("step"),
    default_config={k: DEFAULTS[k] for k in ("mesh", "steps", "dt")},
    train=train,
    bench="neuroedge.models.meshft.bench:bench",
    config_keys={
        "build": ("mesh", "steps", "dt", "checkpoint", "smoke"),
        "train": ("mesh", "hodge", "dt", "train_iters", "train_pairs", "lr", "checkpoint"),
        "bench": ("iters", "mgn_iters", "rollout", "steps_1e4"),
    },
)
