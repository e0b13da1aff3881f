"""Reasoning trees, sibling preference pairs and the Bradley-Terry PRM (research notes 3.2-3.3).

Tree (per task, every task of a batch level by level): at a node the warm-start policy proposes
``k`` distinct steps (ops or END, sampled at ``tree_temperature`` without replacement), and
``tree_random`` more are drawn uniformly from the rest (see experiment.py for why); each
child is valued by ``value_rollouts`` rollouts of the same policy from it (the fraction that
reproduce all examples; an END child is worth 1 if the node already does, else 0). Siblings
whose values differ by at least ``tau`` form a (better, worse) pair. The search goes on from
the best child, the feedback-guided part: the value is read off executed rollouts, and every
node carries each example's partial-execution feedback. It stops at END, at a child worth 0,
or at the op budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from neuroedge.divergence import check_loss
from neuroedge.errors import ConfigError
from neuroedge.models.prm_pbe import dsl
from neuroedge.models.prm_pbe.policy import (
    PRM,
    Nodes,
    Policy,
    concat,
    root_nodes,
    rollout,
    solved,
    step_nodes,
)
from neuroedge.seeding import seeded

CHECK_EVERY = 50  # PRM training steps between reads of the loss (the loop reads none otherwise)


class TooFewPairs(ConfigError):
    """The trees gave no preference pairs, or none on one side of the PRM's train / held-out
    split: a config (tree_tasks, tau, tree_k) too small for the warm start at hand, which only
    the trees can tell, so it is refused once they are built."""


@dataclass
class Pairs:
    """Preference pairs: the node (shared), the better and worse op, each child's feedback."""

    nodes: Nodes
    better: np.ndarray
    worse: np.ndarray
    fb_better: np.ndarray
    fb_worse: np.ndarray
    task: np.ndarray  # index of the task the pair came from
    gap: np.ndarray  # value difference


def take(nodes: Nodes, idx: np.ndarray) -> Nodes:
    return Nodes(
        [nodes.states[i] for i in idx],
        [nodes.targets[i] for i in idx],
        nodes.prev[idx],
        nodes.step[idx],
        nodes.fb[idx],
    )


@torch.no_grad()
def child_values(
    policy: Policy, nodes: Nodes, ops: np.ndarray, cfg: Mapping[str, Any], gen: torch.Generator
) -> tuple[np.ndarray, Nodes]:
    """Values [n] of the children (node i, op i) and the child nodes."""
    children = step_nodes(nodes, ops)
    values = np.where(ops == dsl.END, solved(nodes), 0.0).astype(float)
    go = np.flatnonzero(ops != dsl.END)
    if len(go):
        m = cfg["value_rollouts"]
        reps = np.repeat(go, m)
        res = rollout(policy, take(children, reps), gen, temperature=cfg["tree_temperature"])
        values[go] = res.success.reshape(len(go), m).mean(1)
    return values, children


@torch.no_grad()
def build_pairs(
    policy: Policy, tasks: Sequence[dsl.Task], cfg: Mapping[str, Any], gen: torch.Generator
) -> Pairs:
    """Every sibling pair with a value gap >= tau, over the trees of ``tasks``."""
    tau, extra = cfg["tau"], cfg.get("tree_random", 0)
    k = cfg["tree_k"] + extra
    nodes, task_of = root_nodes(tasks), np.arange(len(tasks))
    found: list[tuple[Nodes, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any, Any]] = []
    for _ in range(dsl.MAX_OPS):  # at the budget only END is left: no siblings
        if not len(task_of):
            break
        logits, _ = policy(nodes.tensors())
        probs = (logits / cfg["tree_temperature"]).softmax(-1)
        ops = torch.multinomial(probs, k - extra, replacement=False, generator=gen)
        if extra:  # siblings the policy would rarely propose, drawn uniformly
            others = torch.ones_like(probs).scatter(1, ops, 0.0)
            ops = torch.cat([ops, torch.multinomial(others, extra, generator=gen)], 1)
        ops = ops.numpy()
        rep = np.repeat(np.arange(len(task_of)), k)
        values, children = child_values(policy, take(nodes, rep), ops.reshape(-1), cfg, gen)
        values = values.reshape(-1, k)
        for a in range(k):
            for b in range(k):
                pick = np.flatnonzero(values[:, a] - values[:, b] >= tau)
                if len(pick):
                    fb = children.fb.reshape(-1, k, dsl.EXAMPLES, 2)
                    found.append(
                        (
                            take(nodes, pick),
                            ops[pick, a],
                            ops[pick, b],
                            fb[pick, a],
                            fb[pick, b],
                            task_of[pick],
                            values[pick, a] - values[pick, b],
                        )
                    )
        best = values.argmax(1)
        chosen = np.arange(len(task_of)) * k + best
        go = (ops[np.arange(len(task_of)), best] != dsl.END) & (values.max(1) > 0)
        nodes, task_of = take(children, chosen[go]), task_of[go]
    if not found:
        raise TooFewPairs(
            f"the trees of {len(tasks)} tasks (tree_tasks={cfg.get('tree_tasks')} per length, "
            f"tree_k={cfg['tree_k']} siblings a node) gave no preference pairs: no two siblings' "
            f"values differ by tau={tau} or more; raise tree_tasks or tree_k, or lower tau"
        )
    return Pairs(
        concat([f[0] for f in found]),
        *(np.concatenate([f[i] for f in found]) for i in range(1, 7)),
    )


def pair_scores(prm: PRM, pairs: Pairs, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    t = take(pairs.nodes, idx).tensors()
    better = prm(t, torch.as_tensor(pairs.better[idx]), torch.as_tensor(pairs.fb_better[idx]))
    worse = prm(t, torch.as_tensor(pairs.worse[idx]), torch.as_tensor(pairs.fb_worse[idx]))
    return better, worse


def train_prm(pairs: Pairs, train_idx: np.ndarray, cfg: Mapping[str, Any], seed: int) -> PRM:
    """Bradley-Terry: minimise -log sigmoid(r(better) - r(worse)) over the training pairs.
    TrainingDiverged when the loss, read every CHECK_EVERY steps and at the last, is NaN or
    infinite (naming prm_lr)."""
    with seeded(seed):
        prm = PRM(cfg["hidden"])
        opt = torch.optim.Adam(prm.parameters(), lr=cfg["prm_lr"])
        rng = np.random.default_rng(seed)
        # no training pairs (a smoke build's trees may give none): the seeded init, as the
        # steps on empty batches left it (their loss, a mean of nothing, is NaN)
        steps = cfg["prm_steps"] if len(train_idx) else 0
        for step in range(1, steps + 1):
            idx = rng.choice(train_idx, min(cfg["prm_batch"], len(train_idx)), replace=False)
            better, worse = pair_scores(prm, pairs, idx)
            loss = -torch.nn.functional.logsigmoid(better - worse).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % CHECK_EVERY == 0 or step == steps:
                check_loss(loss.detach(), f"pbe.prm_rl PRM training step {step}", ("prm_lr",))
        return prm


@torch.no_grad()
def pair_accuracy(prm: PRM, pairs: Pairs, idx: np.ndarray) -> float:
    """Fraction of pairs the PRM orders as the tree values do."""
    better, worse = pair_scores(prm, pairs, idx)
    return float((better > worse).float().mean())


@torch.no_grad()
def top1_solves(prm: PRM, tasks: Sequence[dsl.Task]) -> float:
    """Fraction of one-op tasks whose PRM-best step at the root, over all actions (not only
    the ones a policy proposes), solves the task: how the PRM ranks what PPO may explore."""
    actions = np.arange(dsl.N_ACTIONS)
    roots = root_nodes(tasks)
    rep = take(roots, np.repeat(np.arange(len(tasks)), len(actions)))
    ops = np.tile(actions, len(tasks))
    children = step_nodes(rep, ops)
    scores = prm(rep.tensors(), torch.as_tensor(ops), torch.as_tensor(children.fb))
    best = scores.view(len(tasks), -1).argmax(1).numpy()
    chosen = np.arange(len(tasks)) * len(actions) + best
    return float(solved(take(children, chosen)).mean())
