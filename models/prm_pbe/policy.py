"""The PRM-PBE policy and process reward model, batched rollouts in the DSL, SFT and pass@1.

Both nets read a node of a program search the same way: each example's current state (the
partial program's output) and its target as embedded characters at fixed positions, plus the
partial-execution feedback of that example (normalised edit distance to the target, and
whether it is reached); a shared layer per example, mean over the examples, then the previous
op and the step. The policy adds a logits head over the ops and END and a value head (PPO's
critic); the PRM scores one step (the op taken at that node) from that encoding, the op, and
the mean feedback before and after the op.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from neuroedge.divergence import check_loss
from neuroedge.models.prm_pbe import dsl
from torch import nn

START = dsl.N_ACTIONS  # "previous op" at step 0


def feedback(states: Sequence[Sequence[str]], targets: Sequence[Sequence[str]]) -> np.ndarray:
    """[nodes, EXAMPLES, 2]: normalised edit distance to the target, and reached (0/1)."""
    out = np.zeros((len(states), dsl.EXAMPLES, 2), np.float32)
    for i, (ss, ts) in enumerate(zip(states, targets, strict=True)):
        for j, (s, t) in enumerate(zip(ss, ts, strict=True)):
            out[i, j] = (dsl.edit_distance(s, t) / max(len(s), len(t), 1), s == t)
    return out


@dataclass
class Nodes:
    """A batch of search nodes: states [n][EXAMPLES], targets, previous op, step."""

    states: list[list[str]]
    targets: list[tuple[str, ...]]
    prev: np.ndarray
    step: np.ndarray
    fb: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.fb is None:
            self.fb = feedback(self.states, self.targets)

    def tensors(self) -> dict[str, torch.Tensor]:
        flat_s = [s for ss in self.states for s in ss]
        flat_t = [t for ts in self.targets for t in ts]
        n = len(self.states)
        return {
            "state": torch.as_tensor(dsl.encode(flat_s)).view(n, dsl.EXAMPLES, dsl.MAX_LEN),
            "target": torch.as_tensor(dsl.encode(flat_t)).view(n, dsl.EXAMPLES, dsl.MAX_LEN),
            "fb": torch.as_tensor(self.fb),
            "prev": torch.as_tensor(self.prev, dtype=torch.int64),
            "step": torch.as_tensor(self.step, dtype=torch.int64),
        }


class Trunk(nn.Module):
    """Node encoding [n, hidden] from ``Nodes.tensors()``."""

    def __init__(self, hidden: int, char_dim: int = 8) -> None:
        super().__init__()
        self.chars = nn.Embedding(len(dsl.CHARS) + 1, char_dim, padding_idx=0)
        n_chars = len(dsl.CHARS) + 1
        self.example = nn.Sequential(
            nn.Linear(2 * dsl.MAX_LEN * char_dim + 2 * n_chars + 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
        )
        self.prev = nn.Embedding(dsl.N_ACTIONS + 1, hidden)
        self.step = nn.Embedding(dsl.MAX_OPS + 1, hidden)

    def forward(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        s, g = self.chars(t["state"]).flatten(2), self.chars(t["target"]).flatten(2)
        n_chars = self.chars.num_embeddings
        hist = [
            nn.functional.one_hot(t[k], n_chars).float().sum(2) / dsl.MAX_LEN
            for k in ("state", "target")
        ]  # character counts (index 0: padding, so 1 - length / MAX_LEN)
        per_example = self.example(torch.cat([s, g, *hist, t["fb"]], -1)).relu()
        return per_example.mean(1) + self.prev(t["prev"]) + self.step(t["step"])


class Policy(nn.Module):
    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.trunk = Trunk(hidden)
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.logits = nn.Linear(hidden, dsl.N_ACTIONS)
        self.value = nn.Linear(hidden, 1)

    def forward(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits [n, N_ACTIONS] with every op but END masked at the last step, value [n])."""
        h = self.body(self.trunk(t))
        logits = self.logits(h)
        last = (t["step"] >= dsl.MAX_OPS)[:, None]
        only_end = torch.arange(dsl.N_ACTIONS)[None, :] != dsl.END
        logits = logits.masked_fill(last & only_end, -1e9)
        return logits, self.value(h)[:, 0]


class PRM(nn.Module):
    """r(node, op): the score of taking ``op`` at a node."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.trunk = Trunk(hidden)
        self.op = nn.Embedding(dsl.N_ACTIONS, hidden)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden + 4, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, 1)

    def forward(
        self, t: dict[str, torch.Tensor], op: torch.Tensor, fb_after: torch.Tensor
    ) -> torch.Tensor:
        h = self.trunk(t) + self.op(op)
        fb = torch.cat([t["fb"].mean(1), fb_after.mean(1)], -1)
        return self.out(self.head(torch.cat([h, fb], -1)))[:, 0]


def step_nodes(nodes: Nodes, ops: np.ndarray) -> Nodes:
    """The child nodes after taking ``ops`` (END keeps the states)."""
    states = [[dsl.apply(int(op), s) for s in ss] for ss, op in zip(nodes.states, ops, strict=True)]
    return Nodes(states, nodes.targets, np.asarray(ops), nodes.step + 1)


def root_nodes(tasks: Sequence[dsl.Task]) -> Nodes:
    n = len(tasks)
    return Nodes(
        [list(t.inputs) for t in tasks],
        [t.outputs for t in tasks],
        np.full(n, START),
        np.zeros(n, np.int64),
    )


def solved(nodes: Nodes) -> np.ndarray:
    return nodes.fb[:, :, 1].all(1)


@dataclass
class Trajectories:
    """Decisions of a batch of rollouts, in order; ``row`` = which rollout each belongs to."""

    tensors: list[dict[str, torch.Tensor]]
    actions: list[torch.Tensor]
    logp: list[torch.Tensor]
    rows: list[np.ndarray]
    fb_after: list[np.ndarray]
    success: np.ndarray
    nodes: list[Nodes] = field(default_factory=list)  # the decision nodes, level by level


@torch.no_grad()
def rollout(
    policy: Policy,
    nodes: Nodes,
    gen: torch.Generator | None = None,
    greedy: bool = False,
    temperature: float = 1.0,
) -> Trajectories:
    """Run every node to END (or the op budget): sampled, or greedy."""
    live = np.arange(len(nodes.states))
    out = Trajectories([], [], [], [], [], np.zeros(len(live), bool))
    cur = nodes
    while len(live):
        t = cur.tensors()
        logits, _ = policy(t)
        if greedy:
            act = logits.argmax(-1)
        else:
            act = torch.multinomial((logits / temperature).softmax(-1), 1, generator=gen)[:, 0]
        nxt = step_nodes(cur, act.numpy())
        out.tensors.append(t)
        out.actions.append(act)
        out.logp.append(logits.log_softmax(-1).gather(1, act[:, None])[:, 0])
        out.rows.append(live)
        out.fb_after.append(nxt.fb)
        out.nodes.append(cur)
        ended = act.numpy() == dsl.END
        out.success[live[ended]] = solved(cur)[ended]
        keep = ~ended
        live = live[keep]
        cur = Nodes(
            [s for s, k in zip(nxt.states, keep, strict=True) if k],
            [g for g, k in zip(nxt.targets, keep, strict=True) if k],
            nxt.prev[keep],
            nxt.step[keep],
            nxt.fb[keep],
        )
    return out


def pass_at_1(policy: Policy, tasks: Sequence[dsl.Task]) -> np.ndarray:
    """Greedy success (all 4 examples reproduced) per task."""
    return rollout(policy, root_nodes(tasks), greedy=True).success


def sft(policy: Policy, tasks: Sequence[dsl.Task], cfg: dict[str, Any], seed: int) -> None:
    """Imitation of the tasks' own programs (then END), ``sft_epochs`` epochs; the epoch's last
    loss is read once per epoch, a NaN or infinite one TrainingDiverged naming sft_lr."""
    opt = torch.optim.Adam(policy.parameters(), lr=cfg["sft_lr"])
    nodes_all, acts_all = [], []
    for task in tasks:
        node = root_nodes([task])
        for op in (*task.program, dsl.END):
            nodes_all.append(node)
            acts_all.append(op)
            node = step_nodes(node, np.array([op]))
    rng = np.random.default_rng(seed)
    for epoch in range(1, cfg["sft_epochs"] + 1):
        order = rng.permutation(len(nodes_all))
        for start in range(0, len(order), cfg["batch"]):
            idx = order[start : start + cfg["batch"]]
            batch = concat([nodes_all[i] for i in idx])
            logits, _ = policy(batch.tensors())
            target = torch.as_tensor([acts_all[i] for i in idx])
            loss = nn.functional.cross_entropy(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        check_loss(loss.detach(), f"pbe.prm_rl warm-start SFT epoch {epoch}", ("sft_lr",))


def concat(parts: Sequence[Nodes]) -> Nodes:
    return Nodes(
        [s for p in parts for s in p.states],
        [t for p in parts for t in p.targets],
        np.concatenate([p.prev for p in parts]),
        np.concatenate([p.step for p in parts]),
        np.concatenate([p.fb for p in parts]),
    )
