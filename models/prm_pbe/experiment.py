"""The pbe.prm_rl benchmark: PPO with outcome reward, with PRM step rewards, and with PRM plus
a curriculum, from one SFT warm start, on the DSL's programming-by-example tasks, over seeds.

Per seed: ``train_tasks`` training and ``test_tasks`` held-out tasks per program length 1-4
(held out by their examples); the warm start imitates the length-1 programs only
(``sft_epochs``); reasoning trees on ``tree_tasks`` training tasks per length give the
preference pairs (prm.py), 80 % of the tasks' pairs train the PRM and the other 20 % score it;
then each arm runs ``updates`` PPO updates of ``tasks_per_update`` tasks (ppo.py) with the same
task stream:

* ``outcome`` (the notes' arm A): outcome reward, tasks of every length;
* ``prm`` (B): plus ``beta`` * the PRM's standardised step scores;
* ``prm_curriculum`` (C): B, with tasks of length <= 2, then <= 3, then <= 4 over thirds of
  the updates (difficulty = program length; fixed stages, not a plateau rule);
* ``outcome_curriculum``: A with C's curriculum, which tells the curriculum's share of C's
  result from the PRM's.

Where the defaults leave the notes' sketch (measured on seed 0 before the default run):
2000 training tasks per length and 5 SFT epochs (the notes' 300 tasks x 1 epoch left the warm
start at pass@1 0.07 on length 1; now 0.84); 900 updates of 64 tasks (150 x 64, with KL 0.05
and normalised advantages, moved nothing beyond length 1); KL weight 0 (0.05 halved the gain
on length-2 tasks in 300 updates); the policy and the PRM see each example's state and target
(the partial-execution feedback), so a step is a decision in an executed search, as in the
notes' feedback-guided trees.
``beta`` 0.1 was set before the default run (0.5 drove the policy to one op, drop(1)).
``tree_random`` (0 by default, the notes' tree) adds uniformly drawn siblings to each node, so
the PRM also sees steps the policy rarely proposes: on seed 0 the PRM's best step over all
actions was the task's own op on 0.15 of 150 held-out one-op tasks (a no-op, replace('#','a'),
on 0.72), 0.58 with 2 extra siblings and 0.67 with 8, but the PRM arm still stayed at the warm
start (pass@1 0.25 and 0.23, 900 updates of 64 tasks).

``prm_reward=centered`` (``ppo.node_baselines``) pays the PRM term as the step's score minus
the mean score of ``baseline_samples`` steps the policy would draw at that node, so a node
the PRM likes does not pay for every step taken there; tried 2026-12-06 on seeds 0-2 (B only,
default otherwise): pass@1 0.099 / 0.000 / 0.014 against 0.254 / 0.251 / 0.220 with the batch
standardisation (the same day's default run), so the default stays ``batch``.
Metric: pass@1, the greedy program reproducing all 4 examples of a held-out task, per length
and its mean over lengths. The claim over seeds is the notes' (research/host_llm_papers.md
section 3.3, thresholds "to calibrate"): (a) PRM pairwise accuracy on held-out pairs >= 0.75;
(b) mean pass@1 C >= B >= A and C - A >= 0.05; (c) every PPO arm above the warm start.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.bench.seeds import claim_lines, paired_difference, row_value
from neuroedge.types import Measurement, Report

NAME = "pbe.prm_rl"
DEFAULTS: dict[str, Any] = {
    "seeds": [0, 1, 2],
    "seed": 0,
    "workers": 2,
    "train_tasks": 2000,
    "test_tasks": 200,
    "hidden": 128,
    "sft_epochs": 5,
    "sft_lr": 3e-3,
    "batch": 32,
    "tree_tasks": 200,
    "tree_k": 4,
    "tree_random": 0,
    "value_rollouts": 8,
    "tree_temperature": 0.8,
    "tau": 0.3,
    "prm_steps": 200,
    "prm_lr": 1e-3,
    "prm_batch": 256,
    "updates": 900,
    "tasks_per_update": 64,
    "lr": 1e-3,
    "beta": 0.1,
    "kl": 0.0,
    "clip": 0.2,
    "gae_lambda": 0.95,
    "ppo_epochs": 4,
    "prm_reward": "batch",
    "baseline_samples": 4,
}
ARMS = ("outcome", "prm", "prm_curriculum", "outcome_curriculum")
PRM_REWARDS = ("batch", "centered")  # ppo.step_rewards: batch standardised, or node-centred
LENGTHS = (1, 2, 3, 4)
TREE_TASKS_LEAST = 5


def check_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Every value the bench reads, before any work (ConfigError naming key and value)."""
    from neuroedge.config_values import choice, integer, number

    out = dict(cfg)
    for key, least, most in (
        ("seed", 0, 2**31 - 1),
        ("train_tasks", 10, 10**5),
        ("test_tasks", 1, 10**5),
        ("hidden", 1, 4096),
        ("sft_epochs", 1, 1000),
        ("batch", 1, 10**5),
        ("tree_tasks", TREE_TASKS_LEAST, 10**5),
        ("tree_k", 2, 8),
        ("tree_random", 0, 16),
        ("value_rollouts", 1, 256),
        ("prm_steps", 1, 10**6),
        ("prm_batch", 1, 10**5),
        ("updates", 3, 10**6),
        ("tasks_per_update", 1, 10**5),
        ("ppo_epochs", 1, 100),
        ("baseline_samples", 1, 64),
    ):
        out[key] = integer(cfg, key, least, most)
    for key in ("sft_lr", "prm_lr", "lr", "tree_temperature", "clip"):
        out[key] = number(cfg, key, 0, 10, open_low=True)
    out["tau"] = number(cfg, "tau", 0, 1, open_low=True)
    out["gae_lambda"] = number(cfg, "gae_lambda", 0, 1)
    out["beta"] = number(cfg, "beta", 0, 100)
    out["kl"] = number(cfg, "kl", 0, 100)
    out["prm_reward"] = choice(cfg, "prm_reward", PRM_REWARDS)
    if out["tree_tasks"] > out["train_tasks"]:
        from neuroedge.errors import ConfigError

        raise ConfigError(
            f"tree_tasks ({out['tree_tasks']}) exceeds train_tasks ({out['train_tasks']})"
        )
    return out


def tasks_of(cfg: Mapping[str, Any]) -> tuple[dict[int, list], dict[int, list]]:
    """(training tasks, held-out tasks) per length of a seed."""
    from neuroedge.models.prm_pbe import dsl

    rng = np.random.default_rng([cfg["seed"], 2])
    train = {n: dsl.make_tasks(rng, n, cfg["train_tasks"]) for n in LENGTHS}
    seen = {(t.inputs, t.outputs) for tasks in train.values() for t in tasks}
    test = {n: dsl.make_tasks(rng, n, cfg["test_tasks"], seen) for n in LENGTHS}
    return train, test


def pass_row(variant: str, policy: Any, test: Mapping[int, list], train_s: float) -> Report:
    from neuroedge.models.prm_pbe.policy import pass_at_1

    rates = {n: float(pass_at_1(policy, test[n]).mean()) for n in LENGTHS}
    metrics = {f"pass1_len{n}": Measurement(r, "fraction") for n, r in rates.items()}
    metrics["pass1"] = Measurement(float(np.mean(list(rates.values()))), "fraction")
    metrics["train_s"] = Measurement(train_s, "s")
    return Report(NAME, "host", variant, metrics=metrics)


def split_pairs(pairs: Any, cfg: Mapping[str, Any], strict: bool = True) -> tuple:
    """Indices of the pairs that train the PRM and of those that score it (the pairs of every
    fifth tree task). ``strict``: prm.TooFewPairs when either side is empty, since a PRM fit on
    no pairs stays at its random init and a score over none is NaN, both silently."""
    from neuroedge.models.prm_pbe.prm import TooFewPairs

    held = pairs.task % 5 == 0
    fit, scored = np.flatnonzero(~held), np.flatnonzero(held)
    if strict and not (len(fit) and len(scored)):
        raise TooFewPairs(
            f"tree_tasks={cfg['tree_tasks']}: the trees gave {len(pairs.better)} preference "
            f"pairs, {len(fit)} to train the PRM and {len(scored)} to score it (those of every "
            "fifth tree task); both sides need some: raise tree_tasks"
        )
    return fit, scored


def tree_pairs(base: Any, train: Mapping[int, list], cfg: Mapping[str, Any]) -> Any:
    """The preference pairs of the warm start's trees on the first ``tree_tasks`` training
    tasks of each length (prm.TooFewPairs when they give none)."""
    import torch
    from neuroedge.models.prm_pbe import prm as R

    tasks = [t for n in LENGTHS for t in train[n][: cfg["tree_tasks"]]]
    return R.build_pairs(base, tasks, cfg, torch.Generator().manual_seed(cfg["seed"]))


def reward_model(
    base: Any, train: Mapping[int, list], cfg: Mapping[str, Any], test: Sequence = ()
) -> tuple:
    """The PRM from the warm start's trees, and its row (pairs, held-out pair accuracy, and
    with ``test`` one-op tasks how often its best step over all actions solves them);
    prm.TooFewPairs when there are no pairs, or none on one side of the split."""
    from neuroedge.models.prm_pbe import prm as R

    t0 = time.perf_counter()
    pairs = tree_pairs(base, train, cfg)
    fit, held = split_pairs(pairs, cfg)
    model = R.train_prm(pairs, fit, cfg, cfg["seed"])
    metrics = {
        "pairs": Measurement(len(pairs.better), "pairs", "counted"),
        "pair_accuracy": Measurement(
            R.pair_accuracy(model, pairs, held), "fraction (held-out tasks)"
        ),
        "pair_accuracy_train": Measurement(R.pair_accuracy(model, pairs, fit), "fraction"),
        "train_s": Measurement(time.perf_counter() - t0, "s"),
    }
    if len(test):
        metrics["prm_top1_solves_len1"] = Measurement(
            R.top1_solves(model, test), "fraction (held-out one-op tasks)"
        )
    return model, Report(NAME, "host", "reward_model", metrics=metrics)


def build_prm(
    base: Any, train: Mapping[int, list], cfg: Mapping[str, Any], smoke: bool
) -> tuple[Any, str]:
    """The PRM of a registered build and how it came about. A smoke build's 5 tree tasks per
    length often give no pairs, or none on one side of the split, and smoke builds must work
    for any seed (their policy is untrained in effect anyway): it trains on whatever pairs its
    trees give, and keeps the PRM at its seeded init where they give none. Any other build
    refuses as the bench does."""
    import torch
    from neuroedge.models.prm_pbe import prm as R
    from neuroedge.models.prm_pbe.policy import PRM
    from neuroedge.models.prm_pbe.prm import TooFewPairs

    if not smoke:
        try:
            return reward_model(base, train, cfg)[0], "trained"
        except TooFewPairs as err:
            raise TooFewPairs(
                f"{err} (a build sets tree_tasks = min({DEFAULTS['tree_tasks']}, train_tasks) "
                "and keeps the bench's tau and tree_k: raise train_tasks)"
            ) from None
    try:
        pairs = tree_pairs(base, train, cfg)
    except TooFewPairs as err:
        torch.manual_seed(cfg["seed"])  # as train_prm seeds it: the init it starts from
        return PRM(cfg["hidden"]), f"smoke, untrained: {err}"
    fit, _ = split_pairs(pairs, cfg, strict=False)
    untrained = "" if len(fit) else " (so at its seeded init)"
    return R.train_prm(pairs, fit, cfg, cfg["seed"]), f"smoke: {len(fit)} training pairs{untrained}"


def run_arm(
    arm: str, base: Any, prm: Any, train: Mapping[int, list], cfg: Mapping[str, Any], bar: Any
) -> Any:
    """PPO from the warm start; the task stream is the same for every arm of a seed."""
    import torch
    from neuroedge.models.prm_pbe.ppo import ppo_update

    policy, ref = copy.deepcopy(base), copy.deepcopy(base)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg["lr"])
    rng = np.random.default_rng([cfg["seed"], 3])
    gen = torch.Generator().manual_seed(cfg["seed"])
    curriculum = arm.endswith("_curriculum")
    for u in range(cfg["updates"]):
        top = 2 + min(3 * u // cfg["updates"], 2) if curriculum else max(LENGTHS)
        pool = [t for n in LENGTHS if n <= top for t in train[n]]
        batch = [pool[i] for i in rng.choice(len(pool), cfg["tasks_per_update"])]
        ppo_update(policy, ref, opt, batch, prm if arm.startswith("prm") else None, cfg, gen)
        if bar is not None:
            bar.update(1)
    return policy


def run_seed(cfg: Mapping[str, Any]) -> list[Report]:
    """Every row of one seed (module level: a worker's job)."""
    from neuroedge.models.prm_pbe.policy import Policy, sft
    from neuroedge.seeding import one_thread, seeded
    from tqdm import tqdm

    train, test = tasks_of(cfg)
    bar = tqdm(
        total=cfg["updates"] * len(ARMS),
        desc=f"{NAME} seed {cfg['seed']}",
        disable=not cfg.get("progress", True),
    )
    # the caller's torch generator is kept; the bar closed however it ends
    with bar, one_thread(), seeded(cfg["seed"]):
        t0 = time.perf_counter()
        base = Policy(cfg["hidden"])
        sft(base, train[1], cfg, cfg["seed"])
        rows = [pass_row("sft", base, test, time.perf_counter() - t0)]
        prm, prm_row = reward_model(base, train, cfg, test[1])
        rows.append(prm_row)
        for arm in ARMS:
            t0 = time.perf_counter()
            policy = run_arm(arm, base, prm, train, cfg, bar)
            rows.append(pass_row(arm, policy, test, time.perf_counter() - t0))
    return rows


def claim_over_seeds(per_seed: Mapping[int, Sequence[Report]]) -> dict[str, Any]:
    """Parts (a)-(c) of the module docstring, on means over the seeds."""
    seeds = list(per_seed)

    def each(variant: str, name: str) -> list[float]:
        return [row_value(per_seed[s], variant, name) for s in seeds]

    p = {v: each(v, "pass1") for v in ("sft", *ARMS)}
    m = {v: float(np.mean(x)) for v, x in p.items()}
    out: dict[str, Any] = {"seeds": seeds, **{f"{v}_pass1": x for v, x in p.items()}}
    out["pair_accuracy"] = each("reward_model", "pair_accuracy")
    for a in ("prm_curriculum", "prm", "outcome_curriculum"):
        diff, se = paired_difference(p[a], p["outcome"])
        out[f"{a}_minus_outcome"] = {"mean": diff, "se": se}
    parts = {
        "a_prm_pair_accuracy": bool(np.mean(out["pair_accuracy"]) >= 0.75),
        "b_c_ge_b_ge_a_and_c_minus_a": bool(
            m["prm_curriculum"] >= m["prm"] >= m["outcome"]
            and m["prm_curriculum"] - m["outcome"] >= 0.05
        ),
        "c_every_arm_above_warm_start": all(m[a] > m["sft"] for a in ARMS),
    }
    return {**out, "parts": parts, "holds": all(parts.values())}


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    notes = [
        f"- {k.replace('_minus_', ' - ')} pass@1, paired by seed: "
        f"{claim[k]['mean']:+.4f} +- {claim[k]['se']:.4f} (SE)"
        for k in claim
        if k.endswith("_minus_outcome")
    ]
    return claim_lines(claim, notes)


def pass_at_1_plot(doc: dict[str, Any], path: Path) -> Path:
    """pass@1 per program length for the warm start and every arm (mean over seeds)."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.15
    for i, variant in enumerate(("sft", *ARMS)):
        vals = [rows[variant][f"pass1_len{n}"]["value"] for n in LENGTHS]
        ax.bar(np.arange(len(LENGTHS)) + (i - 2) * width, vals, width, label=variant)
    ax.set_xticks(np.arange(len(LENGTHS)), [f"length {n}" for n in LENGTHS])
    ax.set_ylabel("held-out pass@1 (greedy)")
    ax.legend(fontsize=8)
    ax.set_title(f"{NAME}: seeds {doc['claim']['seeds']}")
    return finish_figure(fig, path)


def bench(
    out_dir: str,
    backends: Sequence[str] = ("host",),
    config: Mapping[str, Any] | None = None,
    history: str | None = None,
) -> dict[str, Any]:
    """Every seed; report.json/report.md/pass_at_1.png with the claim over the seeds."""
    from neuroedge.bench.seeds import run_over_seeds, write_seed_report

    cfg, _, per_seed = run_over_seeds(NAME, config or {}, DEFAULTS, check_config, run_seed)
    claim = claim_over_seeds(per_seed)
    columns = [
        "pass1",
        *(f"pass1_len{n}" for n in LENGTHS),
        "pairs",
        "pair_accuracy",
        "pair_accuracy_train",
        "prm_top1_solves_len1",
        "train_s",
    ]
    sections = claim_section(claim)
    return write_seed_report(
        out_dir, NAME, per_seed, cfg, claim, columns, sections, [pass_at_1_plot], history
    )
