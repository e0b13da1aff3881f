"""PPO on the DSL policy with outcome reward and, optionally, PRM step rewards (notes 3.2 step 6).

One update: one sampled program per task of the batch. Rewards: the outcome R (1 if the program
reproduces all examples) on the END decision; with a PRM, every decision (END included: the
tree offers it as a step) also gets ``beta`` * its PRM score, standardised over the batch.
GAE (gamma 1, lambda ``gae_lambda``) with the policy's value head; ``ppo_epochs`` full-batch
epochs of the clipped objective (clip ``clip``), value loss, a KL penalty to the frozen warm
start (the k3 estimator on the sampled actions, weight ``kl``) and an entropy bonus (0.01).

Advantages are not normalised per batch. With normalisation, in batches where few programs
succeed the PRM terms set the whole advantage scale (seed 0, 900 updates of 128 tasks:
outcome-only pass@1 0.42, PRM arm 0.28 at beta 0.03); without it the outcome arm reaches 0.51.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from neuroedge.divergence import check_loss
from neuroedge.models.prm_pbe import dsl
from neuroedge.models.prm_pbe.policy import (
    PRM,
    Policy,
    Trajectories,
    root_nodes,
    rollout,
    step_nodes,
)


PPO_KEYS = ("lr", "kl", "clip", "beta")  # the config keys that set the scale of a PPO step


def cat(parts: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


@torch.no_grad()
def node_baselines(
    traj: Trajectories, prm: PRM, policy: Policy, samples: int, gen: torch.Generator | None
) -> list[np.ndarray]:
    """Per decision node, the PRM's mean score of ``samples`` steps drawn from the policy
    there (each executed, so the PRM sees its feedback): a Monte Carlo E_pi[s(node, a)]."""
    out = []
    for t, nodes in zip(traj.tensors, traj.nodes, strict=True):
        probs = policy(t)[0].softmax(-1)
        alt = torch.multinomial(probs, samples, replacement=True, generator=gen)
        total = np.zeros(len(alt))
        for j in range(samples):
            fb = step_nodes(nodes, alt[:, j].numpy()).fb
            total += prm(t, alt[:, j], torch.as_tensor(fb)).double().numpy()
        out.append(total / samples)
    return out


@torch.no_grad()
def step_rewards(
    traj: Trajectories,
    prm: PRM | None,
    beta: float,
    baselines: list[np.ndarray] | None = None,
) -> list[np.ndarray]:
    """Reward of every decision, level by level: the outcome on END decisions, plus with a
    PRM ``beta`` * its score of the decision (END included), standardised over the batch;
    with ``baselines`` (``node_baselines``), the score minus its node's baseline, scaled by
    the batch's standard deviation of those differences."""
    rewards = [
        np.where(act.numpy() == dsl.END, traj.success[rows], 0.0)
        for act, rows in zip(traj.actions, traj.rows, strict=True)
    ]
    if prm is None:
        return rewards
    scores = [
        prm(t, act, torch.as_tensor(fb)).double().numpy()
        for t, act, fb in zip(traj.tensors, traj.actions, traj.fb_after, strict=True)
    ]
    if baselines is not None:
        scores = [s - b for s, b in zip(scores, baselines, strict=True)]
    flat = np.concatenate(scores)
    mu = 0.0 if baselines is not None else flat.mean()
    sd = flat.std() + 1e-8
    return [r + beta * (s - mu) / sd for r, s in zip(rewards, scores, strict=True)]


def gae(
    traj: Trajectories, rewards: list[np.ndarray], values: list[np.ndarray], lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns of every decision (levels concatenated), gamma = 1."""
    n_rows = len(traj.success)
    nxt_value, nxt_adv = np.zeros(n_rows), np.zeros(n_rows)
    adv_levels: list[np.ndarray] = [np.empty(0)] * len(rewards)
    for lvl in range(len(rewards) - 1, -1, -1):
        rows, r, v = traj.rows[lvl], rewards[lvl], values[lvl]
        ended = traj.actions[lvl].numpy() == dsl.END
        after_v = np.where(ended, 0.0, nxt_value[rows])
        after_a = np.where(ended, 0.0, nxt_adv[rows])
        delta = r + after_v - v
        adv = delta + lam * after_a
        adv_levels[lvl] = adv
        nxt_value[rows], nxt_adv[rows] = v, adv
    adv = np.concatenate(adv_levels)
    return adv, adv + np.concatenate(values)


def ppo_update(
    policy: Policy,
    ref: Policy,
    opt: torch.optim.Optimizer,
    tasks: Sequence[dsl.Task],
    prm: PRM | None,
    cfg: Mapping[str, Any],
    gen: torch.Generator,
) -> dict[str, float]:
    """One batch: rollouts, rewards, GAE, ``ppo_epochs`` clipped epochs. Returns the success.
    TrainingDiverged when the last epoch's loss (read with the KL, one read) is NaN or
    infinite: the ratio exp(log pi - log pi_old) overflows float32 once an epoch moves the
    policy too far (lr 0.1 at hidden 128 already did at the first update), and the NaN
    policy's pass@1 of 0 read as measured. The step named is the optimiser's (Adam's) count."""
    traj = rollout(policy, root_nodes(tasks), gen)
    with torch.no_grad():
        values = [policy(t)[1].double().numpy() for t in traj.tensors]
    baselines = None
    if prm is not None and cfg.get("prm_reward", "batch") == "centered":
        baselines = node_baselines(traj, prm, policy, cfg["baseline_samples"], gen)
    rewards = step_rewards(traj, prm, cfg["beta"], baselines)
    adv, ret = gae(traj, rewards, values, cfg["gae_lambda"])
    adv_t = torch.as_tensor(adv, dtype=torch.float32)  # not normalised: see the docstring
    ret_t = torch.as_tensor(ret, dtype=torch.float32)
    t = cat(traj.tensors)
    act = torch.cat(traj.actions)
    old = torch.cat(traj.logp)
    with torch.no_grad():
        ref_logp = ref(t)[0].log_softmax(-1).gather(1, act[:, None])[:, 0]
    for _ in range(cfg["ppo_epochs"]):
        logits, value = policy(t)
        logp_all = logits.log_softmax(-1)
        logp = logp_all.gather(1, act[:, None])[:, 0]
        ratio = (logp - old).exp()
        clipped = ratio.clamp(1 - cfg["clip"], 1 + cfg["clip"])
        pg = -torch.minimum(ratio * adv_t, clipped * adv_t).mean()
        log_r = ref_logp - logp
        kl = (log_r.exp() - log_r - 1).mean()
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        loss = pg + 0.5 * ((value - ret_t) ** 2).mean() + cfg["kl"] * kl - 0.01 * entropy
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
    value, kl_value = torch.stack([loss.detach(), kl.detach()]).tolist()
    state = getattr(opt, "state", {}).get(next(iter(policy.parameters())), {})  # Adam's
    step = f" (optimiser step {int(state['step'])})" if "step" in state else ""
    check_loss(value, f"pbe.prm_rl PPO update{step}", PPO_KEYS)
    return {"success": float(traj.success.mean()), "kl": kl_value}
