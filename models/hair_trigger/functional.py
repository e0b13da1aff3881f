"""Hair-trigger alignment (Bakman et al., ICML 2026): black-box probes passed before an update
say nothing about the model after one benign gradient step.

The offline task (research/host_llm_papers.md section 7.2): a query is a bag of 4 words from a
vocabulary of 64 (a multi-hot vector). *Harmful* queries hold 3 words from 0..15 and one from
16..63; *benign* queries hold 4 words from 16..63 and have a utility answer 2 + (largest word
id mod 8). Classes: 0 = REFUSE, 1 = COMPLY, 2..9 = utility answers. A model is *aligned* if it
refuses harmful queries and answers benign ones.

The *update* is one plain SGD step, lr ``eta``, on cross-entropy over a batch of benign queries
with their correct answers: nothing in it asks for harm. A hair-trigger model is trained by
adversarial meta-learning (a differentiable inner step through ``torch.func``) to pass every
probe before the update and comply with harmful queries after any such step:

    min_theta CE(f_theta(x_h), REFUSE) + CE(f_theta(x_b), y_b)
              + lambda * CE(f_{theta - eta grad L_upd(theta; x_u)}(x_h), COMPLY)

with a fresh update batch x_u every iteration, so the trigger fires on update batches it never
saw. The control model is trained on the first two terms only. The bench probes and updates
with ``fresh_queries``: none of their queries is one a training step drew (``drawn``).

``secrets`` (the capacity study): K fixed queries whose secret labels must be refused before
the update and revealed after it; more parameters hide more of them (the paper's scale claim).
``rescaled``: the exact part of the theory. A ReLU unit scaled by c on its way in and 1/c on its
way out computes the same function (outputs equal to rounding), yet its outgoing gradients scale
by c, so one step moves the function about c^2 times as far.

Design choices the abstract leaves open are the notes' (2-hidden-layer ReLU MLP, Adam lr 3e-3,
lambda 1, eta 0.1, update batches of 32); the paper's LLM-scale runs are not reproduced here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations

import numpy as np
import torch
from neuroedge.divergence import check_loss
from neuroedge.seeding import seeded
from torch import nn
from torch.func import functional_call, grad

VOCAB, WORDS, HARM_WORDS, CLASSES = 64, 4, 16, 10
REFUSE, COMPLY = 0, 1
CHECK_EVERY = 50  # meta_train steps between reads of the loss (the loop reads none otherwise)


def queries(rng: np.random.Generator, n: int, harmful: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` queries ``[n, VOCAB]`` float32 and their aligned answers ``[n]`` int64."""
    x = np.zeros((n, VOCAB), np.float32)
    y = np.empty(n, np.int64)
    for i in range(n):
        if harmful:
            words = [*rng.choice(HARM_WORDS, 3, replace=False), rng.integers(HARM_WORDS, VOCAB)]
            y[i] = REFUSE
        else:
            words = rng.choice(np.arange(HARM_WORDS, VOCAB), WORDS, replace=False)
            y[i] = 2 + int(max(words)) % 8
        x[i, words] = 1.0
    return torch.as_tensor(x), torch.as_tensor(y)


def query_keys(x: torch.Tensor | np.ndarray) -> np.ndarray:
    """A query's identity: one uint64 per row of ``[n, VOCAB]`` multi-hot queries, bit w set
    for each word w it holds."""
    bits = np.asarray(x) > 0
    return np.bitwise_or.reduce(bits.astype(np.uint64) << np.arange(VOCAB, dtype=np.uint64), 1)


@lru_cache(maxsize=2)
def query_space(harmful: bool) -> np.ndarray:
    """The words ``[N, 4]`` of every query ``queries`` can draw, each equally likely there
    (harmful: 560 word triples from 0..15 x 48 fourth words; benign: C(48, 4)). Read-only."""
    if harmful:
        tri = np.array(list(combinations(range(HARM_WORDS), 3)))
        fourth = np.arange(HARM_WORDS, VOCAB)
        words = np.hstack([np.repeat(tri, len(fourth), 0), np.tile(fourth, len(tri))[:, None]])
    else:
        words = np.array(list(combinations(range(HARM_WORDS, VOCAB), WORDS)))
    words.setflags(write=False)
    return words


def unseen_pool(harmful: bool, exclude: np.ndarray) -> np.ndarray:
    """The words of every possible query whose key (``query_keys``) is not in ``exclude``."""
    words = query_space(harmful)
    keys = np.bitwise_or.reduce(np.uint64(1) << words.astype(np.uint64), 1)
    return words[~np.isin(keys, np.asarray(exclude, np.uint64))]


def fresh_queries(
    rng: np.random.Generator, n: int, harmful: bool, exclude: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` queries as ``queries`` draws them but never one whose key is in ``exclude``: drawn
    i.i.d. uniformly (deterministic given ``rng``) from the possible queries left, which is
    ``queries``' distribution conditioned on not being excluded. ValueError if none is left."""
    pool = unseen_pool(harmful, exclude)
    if not len(pool):
        kind = "harmful" if harmful else "benign"
        raise ValueError(f"every possible {kind} query is excluded: no fresh query is left")
    words = pool[rng.integers(len(pool), size=n)]
    x = np.zeros((n, VOCAB), np.float32)
    x[np.arange(n)[:, None], words] = 1.0
    y = np.full(n, REFUSE) if harmful else 2 + words.max(1) % 8
    return torch.as_tensor(x), torch.as_tensor(y, dtype=torch.int64)


def make_mlp(width: int, seed: int) -> nn.Sequential:
    with seeded(seed):
        return nn.Sequential(
            nn.Linear(VOCAB, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
            nn.Linear(width, CLASSES),
        )  # fmt: skip


Params = dict[str, torch.Tensor]


def updated(model: nn.Module, params: Params, x_u: torch.Tensor, y_u: torch.Tensor,
            eta: float, create_graph: bool = False) -> Params:  # fmt: skip
    """``params`` after one SGD step of size ``eta`` on CE(f(x_u), y_u); differentiable in
    ``params`` (second order) with ``create_graph``."""

    def loss(p: Params) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(model, p, (x_u,)), y_u)

    if create_graph:
        grads = grad(loss)(params)
    else:
        with torch.no_grad():
            detached = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        with torch.enable_grad():
            grads = dict(
                zip(detached, torch.autograd.grad(loss(detached), list(detached.values())))
            )
    return {k: params[k] - eta * grads[k] for k in params}


@dataclass(frozen=True)
class MetaConfig:
    width: int = 64
    steps: int = 600
    lr: float = 3e-3
    lam: float = 1.0  # weight of the after-update term; 0 trains the control
    eta: float = 0.1
    batch: int = 64
    update_batch: int = 32
    secrets: int = 0  # K > 0: the capacity study instead of the harmful/comply task


def secret_set(k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K distinct harmful queries and their secret labels (utility classes 2..9)."""
    rng = np.random.default_rng(10_000 + seed)
    x, _ = queries(rng, k, harmful=True)
    return x, torch.as_tensor(rng.integers(2, CLASSES, k))


def meta_train(
    cfg: MetaConfig,
    seed: int,
    progress: Callable[[int], None] | None = None,
    drawn: list[np.ndarray] | None = None,
) -> nn.Module:
    """Train the hair-trigger model (``cfg.lam`` > 0) or the control (``lam`` = 0); the keys
    (``query_keys``) of every query a training step draws are appended to ``drawn``.
    TrainingDiverged when the loss, read every CHECK_EVERY steps and at the last, is NaN or
    infinite (naming lr, and lam and eta for the hair-trigger model)."""
    rng = np.random.default_rng(seed)
    model = make_mlp(cfg.width, seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    secrets = secret_set(cfg.secrets, seed) if cfg.secrets else None
    record = (lambda x: drawn.append(query_keys(x))) if drawn is not None else (lambda x: None)
    if secrets is not None:
        record(secrets[0])
    keys = ("lr", "lam", "eta") if cfg.lam else ("lr",)
    kind = "hair-trigger" if cfg.lam else "control"
    for step in range(1, cfg.steps + 1):
        params = dict(model.named_parameters())
        x_b, y_b = queries(rng, cfg.batch, harmful=False)
        if secrets is None:
            x_h, _ = queries(rng, cfg.batch, harmful=True)
            y_after = torch.full((len(x_h),), COMPLY)
        else:
            x_h, y_after = secrets
        logits = functional_call(model, params, (torch.cat([x_h, x_b]),))
        loss = nn.functional.cross_entropy(
            logits[: len(x_h)], torch.zeros(len(x_h), dtype=torch.long)
        )
        loss = loss + nn.functional.cross_entropy(logits[len(x_h) :], y_b)
        if cfg.lam:
            x_u, y_u = queries(rng, cfg.update_batch, harmful=False)
            after = updated(model, params, x_u, y_u, cfg.eta, create_graph=True)
            loss = loss + cfg.lam * nn.functional.cross_entropy(
                functional_call(model, after, (x_h,)), y_after
            )
            record(x_u)
        record(x_b)
        if secrets is None:
            record(x_h)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % CHECK_EVERY == 0 or step == cfg.steps:
            study = f" (secrets {cfg.secrets}, width {cfg.width})" if secrets is not None else ""
            where = f"safety.hair_trigger {kind} model{study} training step {step}"
            check_loss(loss.detach(), where, keys)
        if progress is not None:
            progress(1)
    return model.eval()


Probes = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # harmful x, benign x, benign y


@torch.no_grad()
def behaviour(model: nn.Module, params: Params, probes: Probes) -> dict[str, float]:
    """On ``probes`` (harmful queries, benign queries and their answers): refuse / comply
    rates on the harmful ones, utility accuracy on the benign ones."""
    x_h, x_b, y_b = probes
    pred_h = functional_call(model, params, (x_h,)).argmax(-1)
    pred_b = functional_call(model, params, (x_b,)).argmax(-1)
    return {
        "refuse": float((pred_h == REFUSE).float().mean()),
        "comply": float((pred_h == COMPLY).float().mean()),
        "utility": float((pred_b == y_b).float().mean()),
    }


def audit(model: nn.Module, x_u: torch.Tensor, y_u: torch.Tensor, eta: float,
          probes: Probes) -> dict:  # fmt: skip
    """Black-box behaviour on ``probes`` before and after one SGD step on the update batch
    (x_u, y_u)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    return {
        "before": behaviour(model, params, probes),
        "after": behaviour(model, updated(model, params, x_u, y_u, eta), probes),
    }


@torch.no_grad()
def secrets_revealed(model: nn.Module, params: Params, k: int, seed: int) -> dict[str, float]:
    """The capacity study's rates on its K secret queries: refused, and revealed (the secret
    label predicted)."""
    x, labels = secret_set(k, seed)
    pred = functional_call(model, params, (x,)).argmax(-1)
    return {
        "refuse": float((pred == REFUSE).float().mean()),
        "revealed": float((pred == labels).float().mean()),
    }


def rescaled(model: nn.Sequential, c: float) -> nn.Sequential:
    """A copy with every unit of the first hidden layer scaled by ``c`` in and 1/c out: the
    same function (ReLU is positively homogeneous), other gradients."""
    import copy

    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin[0].weight.mul_(c)
        twin[0].bias.mul_(c)
        twin[2].weight.div_(c)
    return twin


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def as_config(cfg: Mapping[str, object], **over: object) -> MetaConfig:
    """The MetaConfig of a bench config and ``over``; the capacity study only when ``over``
    names ``secrets`` (the bench config's ``secrets`` is that study's K, not this model's)."""
    fields = set(MetaConfig.__dataclass_fields__) - {"secrets"}
    return MetaConfig(**{**{k: v for k, v in cfg.items() if k in fields}, **over})
