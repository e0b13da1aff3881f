"""The transfer.grad_transformer benchmark: large-model updates generated from small ones.

Per seed: a task family (functional.py), ``shadow_tasks`` shadow tasks fine-tuned at both sizes
(the provider's curation, ``iterates`` pairs each), the Grad-Transformer trained on the pairs,
then ``private_tasks`` new tasks whose data only the client sees. Arms, each by its test MSE
(1000 fresh samples per task) and PGR: ``small`` (the client's own model), ``large_finetuned``
(the large model fine-tuned on the private data: the ceiling), ``large_init`` (no update),
``grad_t`` (the update generated from the client's small update), ``grad_t_noised`` (the
small update with Gaussian noise of std 0.1 |delta| / 3 per coordinate, DP-like) and
``grad_t_3orgs`` (three clients with a third of the data each, small updates mean-pooled),
and ``linear_map`` (least squares from small to large updates over the same shadow pairs: on
this task family the large update after gradient descent from zero is linear in the data, so
a linear map is the reference a learned generator has to approach).

The claim over seeds is the notes' assertions (research/host_llm_papers.md section 5.3):
PGR(grad_t) >= 0.6; PGR(noised) >= 0.4 and <= PGR(grad_t) + 0.05; PGR(3 orgs) >= 0.6;
PGR(large_init) < 0; each in every seed. PGR divides by the gap small - large_finetuned (test
MSE): a seed whose gap is not above ``GAP_FLOOR`` x the small model's MSE (the large model's
fine-tuning diverged or did next to nothing) or whose arms' MSEs are not all finite has no PGR
(NaN in the rows, null in report.json): its parts are None (not measured), the reason under
``not_measured`` in the claim and in report.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import row_value
from neuroedge.types import Measurement, Report

NAME = "transfer.grad_transformer"
DEFAULTS: dict[str, Any] = {
    "seeds": [0, 1, 2],
    "seed": 0,
    "workers": 2,
    "shadow_tasks": 200,
    "private_tasks": 30,
    "samples": 256,
    "gd_steps": 100,
    "gd_lr": 0.1,
    "iterates": 5,
    "steps": 1500,
    "batch": 64,
    "lr": 1e-3,
    "d_model": 64,
}
GAP_FLOOR = 1e-3  # a gap at most this fraction of the small model's MSE measures no PGR
CHECK_EVERY = 100  # Grad-Transformer steps between reads of its loss (the loop reads none)
ARMS = (
    "small",
    "large_finetuned",
    "large_init",
    "grad_t",
    "grad_t_noised",
    "grad_t_3orgs",
    "linear_map",
)


class LinearMap:
    """The reference a learned generator must beat: least squares from [small update, 1] to
    the large update over the same shadow pairs."""

    def __init__(self, small: np.ndarray, large: np.ndarray) -> None:
        self.w = np.linalg.lstsq(np.hstack([small, np.ones((len(small), 1))]), large, rcond=None)[0]

    def generate(self, delta_small: np.ndarray) -> np.ndarray:
        return np.hstack([delta_small, np.ones((len(delta_small), 1))]) @ self.w


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value the bench reads, checked before any work (ConfigError)."""
    from neuroedge.config_values import integer, number

    out = dict(cfg)
    for key, least, most in (
        ("seed", 0, 2**31 - 1),
        ("shadow_tasks", 2, 10**5),
        ("private_tasks", 1, 10**4),
        ("samples", 6, 10**6),
        ("gd_steps", 1, 10**5),
        ("steps", 1, 10**6),
        ("batch", 1, 10**5),
        ("d_model", 4, 4096),
    ):
        out[key] = integer(cfg, key, least, most)
    out["iterates"] = integer(cfg, "iterates", 1, out["gd_steps"], " (at most gd_steps)")
    out["gd_lr"] = number(cfg, "gd_lr", 0, 1, open_low=True)
    out["lr"] = number(cfg, "lr", 0, 1, open_low=True)
    if out["d_model"] % 4:
        from neuroedge.errors import ConfigError

        raise ConfigError(f"d_model={out['d_model']}: expected a multiple of the 4 heads")
    return out


def shadow_pairs(fam: Any, cfg: Mapping[str, Any], rng: np.random.Generator) -> tuple:
    """The provider's (small, large) update pairs from the shadow tasks."""
    from neuroedge.models.grad_transformer import functional as F

    small, large = [], []
    for _ in range(cfg["shadow_tasks"]):
        x, y = fam.task(rng, cfg["samples"], rng.standard_normal(F.D_IN))
        args = (y, cfg["gd_steps"], cfg["gd_lr"], cfg["iterates"])
        small.append(F.gd_iterates(fam.small_features(x), *args))
        large.append(F.gd_iterates(fam.large_features(x), *args))
    return np.concatenate(small), np.concatenate(large)


def train_gt(small: np.ndarray, large: np.ndarray, cfg: Mapping[str, Any], seed: int) -> Any:
    """The Grad-Transformer on standardised tokens, teacher forcing, MSE. TrainingDiverged
    before training when the shadow updates are not finite in float32 (the shadow tasks'
    gradient descent diverged: gd_lr, gd_steps), and at a NaN or infinite loss, read every
    CHECK_EVERY steps and at the last (lr)."""
    import torch
    from neuroedge.divergence import check_loss
    from neuroedge.errors import TrainingDiverged
    from neuroedge.models.grad_transformer import functional as F
    from neuroedge.seeding import seeded

    with seeded(seed):
        model = F.GradTransformer(cfg["d_model"])
        src = torch.as_tensor(F.small_tokens(small), dtype=torch.float32)
        tgt = torch.as_tensor(F.large_tokens(large), dtype=torch.float32)
        if not (bool(torch.isfinite(src).all()) and bool(torch.isfinite(tgt).all())):
            raise TrainingDiverged(
                f"{NAME} seed {seed}: the shadow tasks' gradient descent diverged (updates "
                "beyond float32's range), so the Grad-Transformer has nothing to learn from; "
                "nothing was measured: lower gd_lr or gd_steps and run again"
            )
        for name, t in (("s", src), ("t", tgt)):
            std = t.flatten(0, 1).std(0)
            getattr(model, f"{name}_mean").copy_(t.flatten(0, 1).mean(0))
            getattr(model, f"{name}_std").copy_(torch.where(std > 0, std, torch.ones_like(std)))
        src, tgt = (src - model.s_mean) / model.s_std, (tgt - model.t_mean) / model.t_std
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
        gen = torch.Generator().manual_seed(seed)
        for step in range(1, cfg["steps"] + 1):
            idx = torch.randint(len(src), (cfg["batch"],), generator=gen)
            loss = torch.nn.functional.mse_loss(model(src[idx], tgt[idx, :-1]), tgt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % CHECK_EVERY == 0 or step == cfg["steps"]:
                check_loss(loss.detach(), f"{NAME} seed {seed} training step {step}", ("lr",))
        return model.eval()


def noised_update(d_small: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The DP-like client update (notes section 5.3): ``d_small`` plus Gaussian noise of SD
    0.1 ||d_small|| / 3 on each coordinate."""
    return d_small + rng.normal(0, 0.1 * np.linalg.norm(d_small) / 3, d_small.shape)


def pooled_update(fam: Any, x: np.ndarray, y: np.ndarray, gd: tuple) -> np.ndarray:
    """Three clients, each fine-tuning the small model (``gd``: steps, lr, 1) on its own third
    of (x, y) (contiguous, ``np.array_split``); the provider mean-pools their updates."""
    from neuroedge.models.grad_transformer import functional as F

    thirds = np.array_split(np.arange(len(x)), 3)
    return np.mean([F.gd_iterates(fam.small_features(x[i]), y[i], *gd)[-1] for i in thirds], 0)


def private_mse(
    fam: Any, model: Any, linear: LinearMap, cfg: Mapping[str, Any], rng: np.random.Generator
) -> dict:
    """Test MSE of every arm on each private task ``{arm: [tasks]}``."""
    from neuroedge.models.grad_transformer import functional as F

    out: dict[str, list[float]] = {arm: [] for arm in ARMS}
    gd = (cfg["gd_steps"], cfg["gd_lr"], 1)
    for _ in range(cfg["private_tasks"]):
        w = rng.standard_normal(F.D_IN)
        x, y = fam.task(rng, cfg["samples"], w)
        xt, yt = fam.task(rng, 1000, w)
        fs, fl = fam.small_features(xt), fam.large_features(xt)
        d_small = F.gd_iterates(fam.small_features(x), y, *gd)[-1]
        noised, pooled = noised_update(d_small, rng), pooled_update(fam, x, y, gd)
        generated = model.generate(np.stack([d_small, noised, pooled]))
        out["small"].append(F.mse(fs, d_small, yt))
        out["large_finetuned"].append(
            F.mse(fl, F.gd_iterates(fam.large_features(x), y, *gd)[-1], yt)
        )
        out["large_init"].append(F.mse(fl, np.zeros(F.LARGE), yt))
        for arm, theta in zip(("grad_t", "grad_t_noised", "grad_t_3orgs"), generated):
            out[arm].append(F.mse(fl, theta, yt))
        out["linear_map"].append(F.mse(fl, linear.generate(d_small[None])[0], yt))
    return out


def gap_problem(mse: Mapping[str, float]) -> str | None:
    """Why the arms' test MSEs ``mse`` (``{arm: mean over tasks}``) measure no PGR, or None:
    an MSE not finite, or the gap small - large_finetuned not above ``GAP_FLOOR`` x small's."""
    bad = [arm for arm in ARMS if not np.isfinite(mse[arm])]
    if bad:
        return f"test MSE not finite for {', '.join(bad)} (gradient descent diverged?)"
    gap = mse["small"] - mse["large_finetuned"]
    if gap > GAP_FLOOR * mse["small"]:
        return None
    return (
        f"gap small - large_finetuned = {mse['small']:.4g} - {mse['large_finetuned']:.4g} = "
        f"{gap:.3g} test MSE, not above {GAP_FLOOR:g} x small's: no gap to recover (the large "
        "model's fine-tuning diverged or barely moved it: gd_lr, gd_steps)"
    )


def run_seed(cfg: Mapping[str, Any]) -> list[Report]:
    """One seed's rows (module level: a worker's job)."""
    from neuroedge.models.grad_transformer import functional as F
    from neuroedge.seeding import one_thread

    seed = cfg["seed"]
    rng = np.random.default_rng(seed)
    fam = F.Family.make(seed)
    with one_thread():
        small, large = shadow_pairs(fam, cfg, rng)
        t0 = time.perf_counter()
        model = train_gt(small, large, cfg, seed)
        train_s = time.perf_counter() - t0
        res = private_mse(fam, model, LinearMap(small, large), cfg, rng)
    mean = {arm: float(np.mean(v)) for arm, v in res.items()}
    gap = mean["small"] - mean["large_finetuned"]  # P_T - P_S with P = -MSE
    unmeasured = gap_problem(mean) is not None
    rows = []
    for arm in ARMS:
        metrics = {"test_mse": Measurement(mean[arm], "y^2")}
        if arm not in ("small", "large_finetuned"):
            pgr = float("nan") if unmeasured else (mean["small"] - mean[arm]) / gap
            metrics["pgr"] = Measurement(pgr, "fraction")
        if arm == "grad_t":
            metrics["train_s"] = Measurement(train_s, "s")
            metrics["pairs"] = Measurement(len(small), "pairs", "counted")
        rows.append(Report(NAME, "host", arm, metrics=metrics))
    return rows


def claim_over_seeds(per_seed: Mapping[int, Sequence[Report]]) -> dict[str, Any]:
    """The notes' assertions (module docstring), each in every seed; PGR of every arm."""
    arms = ("grad_t", "grad_t_noised", "grad_t_3orgs", "large_init", "linear_map")
    pgr = {arm: [row_value(rows, arm, "pgr") for rows in per_seed.values()] for arm in arms}
    problems = {
        str(seed): gap_problem({arm: row_value(rows, arm, "test_mse") for arm in ARMS})
        for seed, rows in per_seed.items()
    }
    problems = {seed: why for seed, why in problems.items() if why is not None}
    return {"seeds": list(per_seed), **claim_from_pgr(pgr, problems)}


def claim_from_pgr(
    pgr: Mapping[str, Sequence[float]], not_measured: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The parts and verdict from the PGR lists of the arms (one entry per seed). A seed
    whose PGR is not finite (no gap to recover: ``not_measured`` says why, by seed) counts as
    None in each part: a part is False when a seed fails it, else None when a seed is not
    measured, else True; ``holds`` the same over the parts."""
    from neuroedge.bench.seeds import verdict

    def each(test: Any, *lists: Sequence[float]) -> bool | None:
        return verdict([bool(test(*v)) if np.all(np.isfinite(v)) else None for v in zip(*lists)])

    parts = {
        "grad_t_ge_0.6": each(lambda p: p >= 0.6, pgr["grad_t"]),
        "noised_ge_0.4_and_le_clean_plus_0.05": each(
            lambda n, c: 0.4 <= n <= c + 0.05, pgr["grad_t_noised"], pgr["grad_t"]
        ),
        "3orgs_ge_0.6": each(lambda p: p >= 0.6, pgr["grad_t_3orgs"]),
        "large_init_below_0": each(lambda p: p < 0, pgr["large_init"]),
    }
    out = {"pgr": dict(pgr), "parts": parts, "holds": verdict(list(parts.values()))}
    if not_measured:
        out["not_measured"] = dict(not_measured)
    return out


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    from neuroedge.bench.seeds import VERDICT_WORDS

    holds = claim["holds"]
    said = "holds" if holds else VERDICT_WORDS[None] if holds is None else "not met"
    lines = [f"## Claim over seeds {claim['seeds']}: {said}", ""]
    lines += [
        f"- {part}: {'None (not measured)' if ok is None else ok}"
        for part, ok in claim["parts"].items()
    ]
    lines += [
        f"- seed {s}: PGR not measured: {why}" for s, why in claim.get("not_measured", {}).items()
    ]
    arms = list(claim["pgr"])
    lines += ["", "| seed | " + " | ".join(f"PGR {a}" for a in arms) + " |"]
    lines.append("|---" * (len(arms) + 1) + "|")
    for i, seed in enumerate(claim["seeds"]):
        cells = [f"{claim['pgr'][a][i]:.3f}" for a in arms]
        lines.append(f"| {seed} | " + " | ".join(c.replace("nan", "n/a") for c in cells) + " |")
    return lines


def pgr_plot(doc: dict[str, Any], path: Path) -> Path:
    """PGR of every arm, one point per seed."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    pgr = doc["claim"]["pgr"]
    for i, values in enumerate(pgr.values()):
        ax.plot([i] * len(values), np.clip(values, -1.5, None), "o", alpha=0.7)
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.axhline(0.6, color="C3", lw=0.8, ls="--", label="claim: 0.6")
    ax.set_xticks(range(len(pgr)), list(pgr), rotation=20, fontsize=8)
    ax.set_ylabel("PGR (clipped at -1.5)")
    ax.legend(fontsize=8)
    ax.set_title(f"{NAME}: performance gap recovered, seeds {doc['claim']['seeds']}")
    return finish_figure(fig, path)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Every seed; report.json/report.md/pgr.png with the claim over the seeds."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.bench.seeds import run_over_seeds, seed_rows

    cfg, seeds, per_seed = run_over_seeds(NAME, config or {}, DEFAULTS, check_config, run_seed)
    rows = per_seed[seeds[0]] if len(seeds) == 1 else seed_rows(per_seed, ("pgr",))
    claim = claim_over_seeds(per_seed)
    columns = ["test_mse", "pgr", "pgr_sd", "train_s", "pairs"]
    doc = build_document(NAME, rows, config=cfg, columns=columns, claim=claim)
    write_report(
        doc, out_dir, columns=columns, sections=claim_section(claim), plots=[pgr_plot],
        history=history,
    )  # fmt: skip
    return doc
