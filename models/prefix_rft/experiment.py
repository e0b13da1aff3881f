"""The rl.prefix_rft benchmark: SFT, RFT and Prefix-RFT from one weak base, over seeds.

Per seed (functional.py has the task and the arms): the base is trained on clean
demonstrations (``base_steps``); ``sft``, ``rft`` and ``prefix_rft`` each run ``steps`` steps
from it, with the same stream of training prompts; with ``zero_base`` (default) RFT and
Prefix-RFT also run from the untrained policy (rows ``rft_zero``, ``prefix_rft_zero``), whose
sampled success is ~(1/7)^7. Every row reports greedy exact match on the seed's 4000 held-out
prompts (never drawn for training), on the half the demonstrator gets wrong and on the other
half; the RL rows add the mean on-policy (and hybrid-row) reward over the first
``early_steps`` steps and over the last ``early_steps``.

The claim over seeds is the notes' assertions (research/host_llm_papers.md section 6.4):
(a) mean Prefix-RFT accuracy >= mean RFT - 0.01; (b) mean Prefix-RFT > mean SFT; (c) in every
seed the hybrid rows' reward exceeds the on-policy reward over the first ``early_steps``;
(d) from the zero-success base, RFT stays at <= 0.02 in every seed while the hybrid rows
still earn reward (their mean over the run > 0). Without ``zero_base`` part (d) is None (not
measured, with the reason in ``unmeasured``); the claim then holds None, not True: it is met
only when every part is measured and passes (False as soon as a measured part fails).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import claim_lines, paired_difference, row_value, verdict
from neuroedge.errors import ConfigError
from neuroedge.types import Measurement, Report

NAME = "rl.prefix_rft"
DEFAULTS: dict[str, Any] = {
    "seeds": [0, 1, 2],
    "seed": 0,
    "workers": 2,
    "hidden": 128,
    "base_steps": 110,
    "base_lr": 3e-3,
    "batch": 32,
    "steps": 200,
    "lr": 1e-3,
    "prompts": 16,
    "rollouts": 8,
    "high": 0.95,
    "low_init": 0.95,
    "low_target": 0.0,
    "mask_ratio": 0.8,
    "entropy_coeff": 0.001,
    "grad_clip": 1.0,
    "eval_every": 25,
    "early_steps": 20,
    "zero_base": True,
}
ARMS = ("sft", "rft", "prefix_rft")
ACCURACY = ("accuracy", "accuracy_biased", "accuracy_clean")


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value the bench reads, checked before any training (ConfigError)."""
    from neuroedge.config_values import flag, integer, number

    out = dict(cfg)
    for key, least, most in (
        ("seed", 0, 2**31 - 1),
        ("hidden", 1, 4096),
        ("base_steps", 0, 10**6),
        ("batch", 1, 10**5),
        ("steps", 1, 10**6),
        ("prompts", 1, 10**5),
        ("rollouts", 2, 1024),
        ("eval_every", 1, 10**6),
        ("early_steps", 1, 10**6),
    ):
        out[key] = integer(cfg, key, least, most)
    for key in ("base_lr", "lr", "grad_clip"):
        out[key] = number(cfg, key, 0, 10, open_low=True)
    for key in ("high", "low_init", "low_target", "mask_ratio"):
        out[key] = number(cfg, key, 0, 1)
    out["entropy_coeff"] = number(cfg, "entropy_coeff", 0, 10)
    if out["low_init"] > out["high"] or out["low_target"] > out["high"]:
        raise ConfigError(
            f"low_init ({out['low_init']}) and low_target ({out['low_target']}) must not exceed "
            f"high ({out['high']}): the prefix fraction is drawn from U(low, high)"
        )
    if out["early_steps"] > out["steps"]:
        raise ConfigError(f"early_steps ({out['early_steps']}) exceeds steps ({out['steps']})")
    out["zero_base"] = flag(cfg, "zero_base", True)
    return out


def prompt_stream(train: np.ndarray, seed: int) -> Any:
    """``draw(n)``: n training prompts, the same sequence for every arm of a seed."""
    import torch
    from neuroedge.models.prefix_rft import functional as F

    rng = np.random.default_rng([seed, 1])

    def draw(n: int) -> torch.Tensor:
        return torch.as_tensor(F.index_prompts(rng.choice(train, n)))

    return draw


def train_base(cfg: Mapping[str, Any], train: np.ndarray) -> Any:
    """The weak base: ``base_steps`` SFT steps on clean demonstrations (0: untrained)."""
    import torch
    from neuroedge.models.prefix_rft import functional as F
    from neuroedge.seeding import seeded

    with seeded(cfg["seed"]):
        policy = F.Policy(cfg["hidden"])
        opt = torch.optim.Adam(policy.parameters(), lr=cfg["base_lr"])
        draw = prompt_stream(train, cfg["seed"] + 10_000)
        for _ in range(cfg["base_steps"]):
            prompts = draw(cfg["batch"])
            F.sft_step(policy, opt, prompts, F.answers(prompts))
        return policy


def run_arm(
    base: Any, arm: str, cfg: Mapping[str, Any], train: np.ndarray, test: Any, bar: Any = None
) -> tuple[Any, dict[str, Any]]:
    """One arm from (a copy of) ``base``: the trained policy and its log (per-step rewards,
    the accuracy curve, the training time)."""
    import torch
    from neuroedge.models.prefix_rft import functional as F

    policy = copy.deepcopy(base)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg["lr"])
    draw = prompt_stream(train, cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    steps: list[dict[str, float]] = []
    curve = [(0, F.evaluate(policy, test)["accuracy"])]
    train_s = 0.0
    for step in range(cfg["steps"]):
        t0 = time.perf_counter()
        if arm == "sft":
            prompts = draw(cfg["batch"])
            F.sft_step(policy, opt, prompts, F.biased(prompts))
        else:
            prompts = draw(cfg["prompts"])
            steps.append(F.rl_step(policy, opt, prompts, cfg, step, gen, arm == "prefix_rft"))
        train_s += time.perf_counter() - t0
        if (step + 1) % cfg["eval_every"] == 0 or step + 1 == cfg["steps"]:
            curve.append((step + 1, F.evaluate(policy, test)["accuracy"]))
        if bar is not None:
            bar.update(1)
    return policy, {"steps": steps, "curve": curve, "train_s": train_s}


def arm_row(variant: str, policy: Any, log: Mapping[str, Any], test: Any, cfg: Mapping) -> Report:
    from neuroedge.models.prefix_rft import functional as F

    metrics = {k: Measurement(v, "fraction") for k, v in F.evaluate(policy, test).items()}
    k = cfg["early_steps"]
    for name in ("reward", "hybrid_reward"):
        if log["steps"] and name in log["steps"][0]:
            series = [s[name] for s in log["steps"]]
            metrics[f"{name}_early"] = Measurement(float(np.mean(series[:k])), "fraction")
            metrics[f"{name}_late"] = Measurement(float(np.mean(series[-k:])), "fraction")
            metrics[f"{name}_mean"] = Measurement(float(np.mean(series)), "fraction")
    steps = cfg["base_steps"] if variant == "base" else cfg["steps"]
    metrics["train_s"] = Measurement(log["train_s"], "s")
    metrics["step_ms"] = Measurement(1e3 * log["train_s"] / max(steps, 1), "ms")
    return Report(NAME, "host", variant, metrics=metrics)


def run_seed(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every row and accuracy curve of one seed (module level: a worker's job)."""
    import torch
    from neuroedge.models.prefix_rft import functional as F
    from neuroedge.seeding import one_thread
    from tqdm import tqdm

    train, held_out = F.split(cfg["seed"])
    test = torch.as_tensor(F.index_prompts(held_out))
    plan = [(arm, "base") for arm in ARMS]
    if cfg["zero_base"]:
        plan += [("rft", "zero"), ("prefix_rft", "zero")]
    rows, curves = [], {}
    bar = tqdm(
        total=cfg["steps"] * len(plan) + cfg["base_steps"],
        desc=f"{NAME} seed {cfg['seed']}",
        disable=not cfg.get("progress", True),
    )
    with bar, one_thread():  # the bar closed however it ends (else redrawn after a stop line)
        t0 = time.perf_counter()
        bases = {"base": train_base(cfg, train)}
        bar.update(cfg["base_steps"])
        base_log = {"steps": [], "curve": [], "train_s": time.perf_counter() - t0}
        rows.append(arm_row("base", bases["base"], base_log, test, cfg))
        if cfg["zero_base"]:
            bases["zero"] = train_base({**cfg, "base_steps": 0}, train)
        for arm, start in plan:
            variant = arm if start == "base" else f"{arm}_zero"
            policy, log = run_arm(bases[start], arm, cfg, train, test, bar)
            rows.append(arm_row(variant, policy, log, test, cfg))
            curves[variant] = log["curve"]
    return {"rows": rows, "curves": curves}


def claim_over_seeds(per_seed: Mapping[int, Sequence[Report]], cfg: Mapping[str, Any]) -> dict:
    """Parts (a)-(d) of the module docstring."""
    seeds = list(per_seed)

    def each(variant: str, name: str) -> list[float]:
        return [row_value(per_seed[s], variant, name) for s in seeds]

    acc = {arm: each(arm, "accuracy") for arm in ("base", *ARMS)}
    out: dict[str, Any] = {"seeds": seeds, **{f"{k}_accuracy": v for k, v in acc.items()}}
    out["hybrid_reward_early"] = each("prefix_rft", "hybrid_reward_early")
    out["on_policy_reward_early"] = each("prefix_rft", "reward_early")
    for other in ("rft", "sft"):
        diff, se = paired_difference(acc["prefix_rft"], acc[other])
        out[f"prefix_rft_minus_{other}"] = {"mean": diff, "se": se}
    parts = {
        "a_prefix_rft_at_least_rft": bool(np.mean(acc["prefix_rft"]) >= np.mean(acc["rft"]) - 0.01),
        "b_prefix_rft_above_sft": bool(np.mean(acc["prefix_rft"]) > np.mean(acc["sft"])),
        "c_hybrid_rows_earn_more_early": all(
            h > o
            for h, o in zip(out["hybrid_reward_early"], out["on_policy_reward_early"], strict=True)
        ),
    }
    unmeasured = {}
    if cfg["zero_base"]:
        out["rft_zero_accuracy"] = each("rft_zero", "accuracy")
        out["prefix_rft_zero_accuracy"] = each("prefix_rft_zero", "accuracy")
        out["zero_hybrid_reward"] = each("prefix_rft_zero", "hybrid_reward_mean")
        parts["d_zero_base_rft_stuck_hybrid_rewarded"] = all(
            a <= 0.02 for a in out["rft_zero_accuracy"]
        ) and all(r > 0 for r in out["zero_hybrid_reward"])
    else:
        parts["d_zero_base_rft_stuck_hybrid_rewarded"] = None
        unmeasured["d_zero_base_rft_stuck_hybrid_rewarded"] = (
            "zero_base=false: the arms from the untrained policy were not run"
        )
    holds = verdict(list(parts.values()))
    return {**out, "parts": parts, "unmeasured": unmeasured, "holds": holds}


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """The verdict, its parts, the paired differences and the per-seed figures."""
    notes = []
    for other in ("rft", "sft"):
        d = claim[f"prefix_rft_minus_{other}"]
        notes.append(
            f"- Prefix-RFT - {other.upper()} accuracy, paired by seed: "
            f"{d['mean']:+.4f} +- {d['se']:.4f} (SE)"
        )
    for part, reason in claim.get("unmeasured", {}).items():
        notes.append(f"- {part} not measured ({reason}): the claim is not met without it")
    return claim_lines(claim, notes)


def curves_plot(doc: dict[str, Any], path: Path) -> Path:
    """Held-out accuracy vs step for every arm (mean over seeds, thin lines per seed)."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    variants = list(next(iter(doc["curves"].values())))
    for i, variant in enumerate(variants):
        ax = axes[1] if variant.endswith("_zero") else axes[0]
        runs = [np.asarray(c[variant], float) for c in doc["curves"].values()]
        color = f"C{i}"
        for run in runs:
            ax.plot(run[:, 0], run[:, 1], color=color, alpha=0.25, lw=0.8)
        ax.plot(runs[0][:, 0], np.mean([r[:, 1] for r in runs], 0), color=color, label=variant)
    for ax, title in zip(axes, ("from the weak base", "from the untrained policy"), strict=True):
        ax.set_xlabel("training step")
        ax.set_ylabel("held-out exact match (greedy)")
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle(f"{NAME}: seeds {doc['claim']['seeds']}")
    return finish_figure(fig, path)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Every seed; report.json/report.md/curves.png with the claim over the seeds."""
    from neuroedge.bench.seeds import run_over_seeds, write_seed_report

    cfg, _, results = run_over_seeds(NAME, config or {}, DEFAULTS, check_config, run_seed)
    per_seed = {s: r["rows"] for s, r in results.items()}
    claim = claim_over_seeds(per_seed, cfg)
    columns = [
        *ACCURACY,
        "reward_early",
        "hybrid_reward_early",
        "reward_late",
        "hybrid_reward_late",
        "train_s",
        "step_ms",
    ]
    curves = {str(s): r["curves"] for s, r in results.items()}
    return write_seed_report(
        out_dir,
        NAME,
        per_seed,
        cfg,
        claim,
        columns,
        claim_section(claim),
        [curves_plot],
        history,
        curves=curves,
    )
