"""The registered ModelSpec of causal.cadre and its bench hook.

``run``: the Jacobian-based observed graph J_g = I - D_m J_m^-1 of a CaDRe model (trained with
``neuroedge train causal.cadre``, or untrained) at a batch of windows, plus the latent means.
``bench``: the exact identity J_g = B on linear-additive SEMs, then CaDRe against a plain
beta-VAE at the same budget on the synthetic generator (MCC of both; SHD, F1, TPR of CaDRe's
observed graph), once per seed of ``seeds`` (default 0..4, ``workers`` at a time; ``seed=S``
runs one), with the claim read over the seeds (bench.py states the rule) and a graph plot.
Config ``series=PATH`` (CSV or NetCDF) with optional ``period`` (e.g. 12 for monthly data) and
``time_column`` (a CSV's time column, e.g. dates) trains on a user's climate series instead,
once at ``seed``, and reports the estimated graph (no ground truth there, so no scores).

A checkpoint saved by ``train`` holds the architecture (``config``: the hidden width) beside
the weights, and ``build`` takes the width from it; an older weights-only checkpoint is built at
the build config's ``hidden`` (default 64). A ``hidden`` that contradicts a checkpoint's is
refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.seeding import seeded
from neuroedge.types import Efficiency, HostProgram, IOSpec, ModelSpec, Paper

DX, DZ, DOMAINS, LENGTH = 8, 2, 4, 5
HIDDEN, MAX_HIDDEN = 64, 4096  # train.DEFAULTS["hidden"], train.MAX_HIDDEN (train imports torch)


def _checkpoint(config: Mapping[str, Any]) -> Path:
    from neuroedge.paths import checkpoint_path

    return Path(config.get("checkpoint") or checkpoint_path(SPEC.name))


def _saved_config(path: Path, saved: Any) -> dict[str, int]:
    """The architecture a checkpoint saved (``hidden``; ``dx``, ``dz``, ``domains`` must be
    this model's), checked; ArtifactError names the file and the bad value."""
    from neuroedge.errors import ArtifactError

    if not isinstance(saved, Mapping) or "hidden" not in saved:
        raise ArtifactError(f"{path}: checkpoint config {saved!r} lacks 'hidden'")
    hidden = saved["hidden"]
    if isinstance(hidden, bool) or not isinstance(hidden, int) or not 1 <= hidden <= MAX_HIDDEN:
        raise ArtifactError(
            f"{path}: checkpoint config hidden={hidden!r}: expected an integer in 1..{MAX_HIDDEN}"
        )
    for key, want in (("dx", DX), ("dz", DZ), ("domains", DOMAINS)):
        if key in saved and saved[key] != want:
            raise ArtifactError(
                f"{path}: checkpoint config {key}={saved[key]!r}, but causal.cadre is built "
                f"with {key}={want}: not a checkpoint of this model"
            )
    return {"hidden": hidden}


def _architecture(config: Mapping[str, Any]) -> tuple[Path, dict[str, Any] | None, int]:
    """(path, loaded checkpoint or None, hidden width) of a build with the user's ``config``.

    The width is the checkpoint's saved ``config["hidden"]``; a checkpoint saved before the
    config was stored has none and is built at the config's ``hidden`` (else ``HIDDEN``). A
    config ``hidden`` that contradicts the checkpoint's is refused (ConfigError)."""
    from neuroedge.checkpoints import load_checkpoint, resolve_checkpoint
    from neuroedge.config_values import fresh_build, integer
    from neuroedge.errors import ConfigError

    hidden = integer({"hidden": HIDDEN, **config}, "hidden", 1, MAX_HIDDEN)
    smoke = fresh_build(config)  # smoke=true with a checkpoint: refused, it would not be read
    path = resolve_checkpoint(config, SPEC.name, check=not smoke)
    if smoke or not path.is_file():
        return path, None, hidden
    ckpt = load_checkpoint(path, required=("state_dict",))
    if "config" not in ckpt:  # an older checkpoint: weights only
        return path, ckpt, hidden
    saved = _saved_config(path, ckpt["config"])["hidden"]
    if "hidden" in config and hidden != saved:
        raise ConfigError(
            f"hidden={config['hidden']!r} contradicts the checkpoint {path} (trained with "
            f"hidden={saved}): drop hidden or name another checkpoint"
        )
    return path, ckpt, saved


def build(config: Mapping[str, Any]) -> HostProgram:
    """``fn(x, domain)`` -> per-window mean J_g [batch, dx, dx] and the posterior-mean latent
    z_1 [batch, dz] (the first step with a full 3-step context). ``domain`` is checked
    (0..DOMAINS-1) but the outputs do not depend on it: the domain embedding scales the
    learned prior's innovations, which only training reads; the posterior and the decoder
    see x alone. The hidden width is the checkpoint's (else ``hidden``, else 64)."""
    import torch
    from neuroedge.checkpoints import load_weights
    from neuroedge.models.cadre import functional as F
    from neuroedge.models.cadre.module import CaDRe

    path, ckpt, hidden = _architecture(config)
    with seeded(0):
        model = CaDRe(DX, DZ, DOMAINS, hidden)
    trained = ckpt is not None
    if ckpt is not None:
        load_weights(model, ckpt["state_dict"], path)
    model.eval()

    def fn(x: np.ndarray, domain: np.ndarray) -> dict[str, np.ndarray]:
        xt = torch.as_tensor(x)
        if xt.ndim != 3 or xt.shape[1] < 3 or xt.shape[2] != DX:
            raise ValueError(f"x: expected [batch, T >= 3, {DX}], got {list(xt.shape)}")
        if not torch.isfinite(xt).all():
            w, t, i = (int(v) for v in torch.nonzero(~torch.isfinite(xt))[0])
            raise ValueError(f"x: window {w} step {t} feature {i} is {float(xt[w, t, i])}")
        d = np.asarray(domain).reshape(-1)
        if d.size != len(xt) or not ((d >= 0) & (d < DOMAINS)).all():
            raise ValueError(
                f"domain: expected {len(xt)} indices in 0..{DOMAINS - 1}, got {d.tolist()[:8]}"
            )
        z, s = model.posterior_means(xt)
        with torch.no_grad():
            j_g = F.jacobian_graph(model.decoder_jacobian(z.detach(), s.detach()))
        inner = xt.shape[1] - 2
        return {
            "graph": j_g.reshape(len(xt), inner, DX, DX).mean(1).numpy(),
            "latents": z.detach().reshape(len(xt), inner, DZ)[:, 0].numpy(),
        }

    return HostProgram(fn, meta={"trained": trained, "hidden": hidden})


def example(seed: int = 0) -> dict[str, np.ndarray]:
    """Four windows of the synthetic generator."""
    from neuroedge.models.cadre.data import generate

    data = generate(n=4, length=LENGTH, dx=DX, dz=DZ, domains=DOMAINS, seed=seed)
    return {"x": data.x, "domain": data.domain.astype(np.int64)}


def train(config: Mapping[str, Any] | None = None, out: str | None = None) -> dict[str, Any]:
    """Train CaDRe on the synthetic generator and save a weights-only checkpoint."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.cadre import train as TR
    from neuroedge.models.cadre.data import generate

    cfg = TR.check_config({**TR.DEFAULTS, "n": 4000, **(config or {})})  # before any work
    data = generate(n=cfg["n"], length=LENGTH, dx=DX, dz=DZ, domains=DOMAINS)
    result = TR.fit(TR.new_cadre(DX, DZ, DOMAINS, cfg), data, cfg)
    path = _checkpoint({"checkpoint": out or cfg.get("checkpoint")})
    arch = {"hidden": int(cfg["hidden"]), "dx": DX, "dz": DZ, "domains": DOMAINS}
    save_checkpoint(path, {"state_dict": result.model.state_dict(), "config": arch})
    return {
        "checkpoint": str(path),
        "mcc": TR.latent_mcc(result.model, data),
        "loss_first": result.losses[0],
        "loss_last": result.losses[-1],
    }


def identity_check(trials: int = 20, seed: int = 0) -> float:
    """max |J_g - B| over random linear-additive SEMs, J_m = dx/ds by jacrev (float64)."""
    import torch
    from neuroedge.models.cadre import functional as F
    from neuroedge.models.cadre.data import random_dag
    from torch.func import jacrev

    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(trials):
        b = torch.as_tensor(random_dag(DX, 0.4, rng))
        mixing = torch.as_tensor(rng.standard_normal((DX, DZ)))
        z, s = torch.as_tensor(rng.standard_normal(DZ)), torch.as_tensor(rng.standard_normal(DX))
        j_m = jacrev(F.linear_sem)(s, z, b, mixing)
        errors.append(float((F.jacobian_graph(j_m) - b).abs().max()))
    return float(np.max(errors))  # a NaN stays NaN (max(0.0, nan) is 0.0): not exact


SPEC = ModelSpec(
    name="causal.cadre",
    family="algorithm",
    summary="CaDRe: observed causal graph + latent dynamic drivers (Jacobian graph, flow priors)",
    inputs=(IOSpec("x", ("batch", "T", DX)), IOSpec("domain", ("batch",), "int64")),
    outputs=(IOSpec("graph", ("batch", DX, DX)), IOSpec("latents", ("batch", DZ))),
    build=build,
    example=example,
    paper=Paper(
        "CaDRe: Learning General Causal Structures with Hidden Dynamic Process for "
        "Climate Analysis",
        "ICML 2026",
        2026,
        "https://arxiv.org/abs/2501.12500",
    ),
    efficiency=Efficiency("FLOP"),
    train=train,
    seed_sweep=True,
    bench="neuroedge.models.cadre.bench:bench",
    # train: train.fit's keys (train.DEFAULTS less "threshold", which training never reads;
    # train.py imports torch) plus n and checkpoint; bench: all of train.DEFAULTS, n, the
    # synthetic comparison's seeds and workers, and the user-series keys
    config_keys={
        "build": ("checkpoint", "smoke", "hidden"),
        "train": (
            "steps",
            "batch",
            "lr",
            "hidden",
            "lambda_z",
            "lambda_s",
            "alpha",
            "beta",
            "jac_batch",
            "seed",
            "n",
            "checkpoint",
        ),
        "bench": (
            "steps",
            "batch",
            "lr",
            "hidden",
            "lambda_z",
            "lambda_s",
            "alpha",
            "beta",
            "jac_batch",
            "threshold",
            "seed",
            "seeds",
            "workers",
            "n",
            "series",
            "period",
            "time_column",
        ),
    },
)
