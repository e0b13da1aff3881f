"""Linearised-Laplace (GLM) predictive over the last layer or the full network.

Wilson, van der Heide, Hodgkinson, Roosta, "Is the Last Layer Sufficient for Uncertainty
Quantification?", ICML 2026 (arXiv 2605.30741); the GLM predictive of Immer et al. 2021.

Given a MAP network f(x; theta_hat) with C outputs and prior theta ~ N(0, lambda^-1 I):

1. linearise  f_lin(x; theta) = f(x; theta_hat) + J(x)(theta - theta_hat), J = df/dtheta [C, P];
   last layer: only the final affine map is random, J_LL(x) = I_C (x) [phi(x)^T, 1], with
   phi the penultimate activations after the tanh and the last layer's bias included (a test
   checks both against the autograd Jacobian);
2. GGN        H = sum_i J_i^T Lambda_i J_i + lambda I, Lambda = sigma^-2 I (regression) or
              diag(pi) - pi pi^T, pi = softmax(f) (classification);
3. evidence   log Z = log p(D | theta_hat) - lambda/2 |theta_hat|^2 + P/2 log lambda
                      - 1/2 sum_k log(e_k + lambda),  e = eig(sum J^T Lambda J),
              maximised over a (sigma^2, lambda) grid (lambda only for classification);
              or, the second mode, the grid point minimising the mean predictive NLL of
              held-out validation points (``fit_glm(..., validation=...)``, see glm_comparison.py);
4. predictive  f_* ~ N(f(x_*), J_* H^-1 J_*^T); regression y_* ~ N(f, J H^-1 J^T + sigma^2);
              classification p(y_* = c) = E[softmax(f_*)_c], by Monte Carlo over the centred
              logits N(f, P S_f P), P = I - 11^T / C (exact: softmax ignores the common shift).

Design decisions the paper leaves open, with reasons:

* Dense GGN and ``eigh`` (P <= a few thousand here): one decomposition serves every grid point.
* The grids are logspace(-3, 1, 41) for sigma^2 (targets are standardised) and
  logspace(-4, 3, 36) for lambda, as in the laplace-torch marglik pattern, fixed for both GLMs so
  neither gets a finer search.
* The "variance" ranked between the two GLMs is the predictive variance of the model's output:
  tr S_f(x) for regression, and for classification the variance of the predicted probabilities
  under the linearised posterior, tr(G S_f G^T) with G = diag(pi) - pi pi^T = d softmax / d f
  at the MAP (the delta method through the softmax; exact to first order for f_lin). The logit
  covariance itself is the wrong quantity to rank: logits are identified only up to a common
  shift, and a confidently classified point can carry large logit variance that changes no
  probability. Ranking tr S_f of (even centred) logits gave Spearman 0.21 / 0.08 / -0.51 between
  the two GLMs on breast cancer / wine / digits, the probability variance 0.99 / 0.99 / 0.97.
* The classification predictive is Monte Carlo (``MC_SAMPLES`` draws, the same standard-normal
  draws for every point and both GLMs: common random numbers for the comparison)
  rather than the probit softmax(f / sqrt(1 + pi/8 diag S_f)). The probit is not invariant to a
  common shift of the logits, which the softmax ignores: adding u to every row of the last
  weight matrix and bias is a null direction of the GGN (Lambda 1 = 0), so it keeps its prior
  variance (|phi|^2 + 1) / lambda, inflates every diag S_f and flattened the probit's
  probabilities by an amount that is no uncertainty about them. Sampling the centred logits
  removes that direction exactly. Measured on the bench's MAP networks (test NLL, probit -> MC):
  wine LL 0.231 -> 0.187, full 0.284 -> 0.248; breast cancer full 0.131 -> 0.109; digits LL
  0.119 -> 0.118, full 0.319 -> 0.347 (there the probit had been the more confident of two
  approximations of an under-confident predictive). Sampling error at 1000 draws, std over 5
  seeds on wine: test NLL 0.002, entropy OOD AUROC 0.005 or less.
* Validation-NLL tuning searches the same grid as the evidence. Regression scores each point
  with the predictive the GLM reports (the Gaussian, closed form). Classification scores it
  with the pairwise mean-field approximation of E[softmax] (``mean_field_softmax``: the binary
  probit of every logit difference, shift-free like the softmax; laplace-torch's grid search
  scores with an approximate link too, its probit), and the chosen GLM then reports the Monte
  Carlo predictive. Until 2026-12-05 the search scored the Monte Carlo predictive at all 36
  lambdas, work the same for both GLMs that was most of both fit times (seed 0, last layer /
  full: breast cancer 238 / 273 ms, wine 91 / 100 ms, digits 1.7 / 2.6 s): a full/LL time
  ratio of 1-3x. The mean-field search, vectorised over lambda, takes 0.6 / 22 ms, 0.4 / 6 ms
  and 53 / 688 ms. Measured over seeds 0, 2-11 (33 MAP networks x 2 GLMs on breast cancer,
  wine, digits): the same lambda as the Monte Carlo search in 48 of 66 fits, elsewhere one or
  two grid steps larger, at most 0.0021 nats above the Monte Carlo search's minimum
  validation NLL.
* float64 throughout, so the two Jacobians agree exactly where they should (the last-layer block
  of the full Jacobian equals J_LL; a test checks it).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from neuroedge.divergence import check_loss
from neuroedge.seeding import one_thread, seeded
from neuroedge.models.uq_last_layer.predictive import (
    expected_softmax,
    mean_field_softmax,
    softmax,
)

Task = Literal["regression", "classification"]
SUBSETS = ("last_layer", "full")
NOISE_GRID = np.logspace(-3, 1, 41)
PRIOR_GRID = np.logspace(-4, 3, 36)
TUNINGS = ("evidence", "val_nll")


def make_mlp(d_in: int, hidden: int, d_out: int, seed: int) -> Any:
    """d_in -> hidden -> hidden -> d_out with tanh, float64."""
    import torch

    with seeded(seed):
        return torch.nn.Sequential(
            torch.nn.Linear(d_in, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(hidden, d_out),
        ).double()


def train_map(
    net: Any,
    x: np.ndarray,
    y: np.ndarray,
    task: Task,
    steps: int = 1500,
    lr: float = 3e-3,
    weight_decay: float = 1e-3,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> Any:
    """Full-batch Adam on the NLL plus L2 (the MAP estimate), early-stopped on a held-out
    ``val_fraction`` of the rows (checked every 25 steps; the best state is kept).
    TrainingDiverged at a NaN or infinite loss read there or after the last step (a net of NaN
    weights was returned: a NaN validation loss never compared above the best one).

    Runs on one thread (``neuroedge.seeding.one_thread``: the matrices here are tiny, and idle
    intra-op threads spin: each op took ~30 ms with 2 threads on a loaded 2-core machine,
    ~0.1 ms with one).
    """
    import copy

    import torch
    from tqdm import tqdm

    n_val = int(len(y) * val_fraction)
    xt = torch.as_tensor(x, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.float64 if task == "regression" else torch.long)
    fit_x, fit_y, val_x, val_y = xt[n_val:], yt[n_val:], xt[:n_val], yt[:n_val]

    def loss_of(inputs: Any, targets: Any) -> Any:
        out = net(inputs)
        return (
            torch.nn.functional.mse_loss(out[:, 0], targets)
            if task == "regression"
            else torch.nn.functional.cross_entropy(out, targets)
        )

    def checked(step: int) -> float:
        """The validation loss (the fitting loss without validation rows), or
        TrainingDiverged naming lr and weight_decay where it is NaN or infinite."""
        with torch.no_grad():
            loss = loss_of(val_x, val_y) if n_val else loss_of(fit_x, fit_y)
        keys = (f"lr (now {lr:g})", f"weight_decay (now {weight_decay:g})")
        return check_loss(loss, f"uq.last_layer MAP training, after {step} steps", keys)

    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    best, best_state = math.inf, None
    with one_thread():
        for step in tqdm(range(steps), desc="train MAP", disable=not progress, leave=False):
            if step % 25 == 0:  # read every 25 steps (the early stopping's reads)
                val = checked(step)
                if n_val and val < best:
                    best, best_state = val, copy.deepcopy(net.state_dict())
            opt.zero_grad()
            loss_of(fit_x, fit_y).backward()
            opt.step()
    if checked(steps) > best and best_state is not None:
        net.load_state_dict(best_state)
    return net.eval()


def jacobians(net: Any, x: np.ndarray, subset: str) -> tuple[np.ndarray, np.ndarray]:
    """(f(x) [n, C], J(x) [n, C, P]) for the last layer (closed form) or every parameter."""
    if subset not in SUBSETS:
        raise ValueError(f"subset {subset!r} is not one of {', '.join(SUBSETS)}")
    with one_thread():
        return _jacobians(net, x, subset)


def _jacobians(net: Any, x: np.ndarray, subset: str) -> tuple[np.ndarray, np.ndarray]:
    import torch
    from torch.func import functional_call, jacrev, vmap

    xt = torch.as_tensor(x, dtype=torch.float64)
    with torch.no_grad():
        if subset == "last_layer":
            phi = net[:-1](xt).numpy()
            f = net(xt).numpy()
            n, c, h = phi.shape[0], f.shape[1], phi.shape[1]
            jac = np.zeros((n, c, c * (h + 1)))
            for k in range(c):  # weight row k (k*h .. k*h+h-1), then bias k (c*h + k)
                jac[:, k, k * h : (k + 1) * h] = phi
                jac[:, k, c * h + k] = 1.0
            return f, jac
    params = {k: v.detach() for k, v in net.named_parameters()}

    def single(p: dict[str, Any], xi: Any) -> Any:
        return functional_call(net, p, (xi[None],))[0]

    blocks = vmap(jacrev(single), in_dims=(None, 0))(params, xt)
    jac = torch.cat([blocks[k].reshape(xt.shape[0], -1, params[k].numel()) for k in params], -1)
    with torch.no_grad():
        return net(xt).numpy(), jac.numpy()


def theta_of(net: Any, subset: str) -> np.ndarray:
    """The MAP parameters the GLM treats as random, flattened in Jacobian order."""
    params = list(net[-1].parameters()) if subset == "last_layer" else list(net.parameters())
    return np.concatenate([p.detach().numpy().reshape(-1) for p in params])


@dataclass(frozen=True)
class GLMPosterior:
    """N(theta_hat, H^-1) with H = U diag(e / noise_var + prior_prec) U^T."""

    task: str
    eigvals: np.ndarray  # eigenvalues e of sum J^T Lambda J (Lambda without 1/sigma^2), [P]
    eigvecs: np.ndarray  # U, [P, P]
    prior_prec: float  # lambda
    noise_var: float  # sigma^2 (1.0 for classification)
    log_evidence: float  # Laplace log marginal likelihood at the chosen hyper-parameters
    tuned_by: str = "evidence"  # TUNINGS: what chose (sigma^2, lambda)

    def functional_cov(self, jac: np.ndarray) -> np.ndarray:
        """S_f = J H^-1 J^T per point, [n, C, C]."""
        scale = 1.0 / np.sqrt(self.eigvals / self.noise_var + self.prior_prec)
        a = (jac @ self.eigvecs) * scale
        return a @ np.swapaxes(a, -1, -2)


def noise_grid(task: str) -> np.ndarray:
    """The sigma^2 grid: NOISE_GRID for regression, the fixed 1.0 for classification."""
    return NOISE_GRID if task == "regression" else np.ones(1)


def evidence_grid(task: str, e: np.ndarray, fit: float, n: int, sq_norm: float) -> np.ndarray:
    """log Z over noise_grid(task) x PRIOR_GRID; ``fit`` is the RSS (regression) or the
    log-likelihood log p(D | theta_hat) (classification)."""
    s2, lam = noise_grid(task)[:, None], PRIOR_GRID[None, :]
    logdet = np.log(e[None, None, :] / s2[:, :, None] + lam[:, :, None]).sum(-1)
    loglik = -0.5 * n * np.log(2 * math.pi * s2) - fit / (2 * s2) if task == "regression" else fit
    return loglik - 0.5 * lam * sq_norm + 0.5 * e.size * np.log(lam) - 0.5 * logdet


def validation_nll_grid(
    task: str,
    e: np.ndarray,
    u: np.ndarray,
    f_val: np.ndarray,
    jac_val: np.ndarray,
    y_val: np.ndarray,
) -> np.ndarray:
    """Mean GLM predictive NLL on validation points over noise_grid(task) x PRIOR_GRID."""
    if jac_val.shape[-1] != u.shape[0] or not len(f_val) == len(jac_val) == len(y_val):
        raise ValueError(
            f"validation set: f {f_val.shape}, J {jac_val.shape}, y {y_val.shape}"
            f" do not match one another or the {u.shape[0]} GLM parameters"
        )
    a = jac_val @ u  # [n, C, P]
    if task == "regression":
        inv = 1.0 / (e / NOISE_GRID[:, None, None] + PRIOR_GRID[None, :, None])  # [S, L, P]
        var = (a[:, 0] ** 2 @ inv.reshape(-1, e.size).T).reshape(-1, *inv.shape[:2])
        var += NOISE_GRID[None, :, None]  # [n, S, L]
        resid2 = ((f_val[:, 0] - y_val) ** 2)[:, None, None]
        return np.mean(0.5 * np.log(2 * math.pi * var) + resid2 / (2 * var), axis=0)
    n, c, _ = a.shape
    inv = 1.0 / (e[None, :] + PRIOR_GRID[:, None])  # [L, P]
    cov = np.empty((PRIOR_GRID.size, n, c, c))
    block = max(1, 1_000_000 // (c * c * e.size))  # points per [block C C, P] product (8 MB)
    for start in range(0, n, block):  # S_f(lambda) for every lambda at once: one matmul
        part = a[start : start + block]
        outer = (part[:, :, None, :] * part[:, None, :, :]).reshape(-1, e.size)
        cov[:, start : start + block] = (outer @ inv.T).T.reshape(-1, len(part), c, c)
    probs = mean_field_softmax(f_val[None], cov)  # [L, n, C]
    picked = probs[:, np.arange(n), y_val.astype(int)]
    return -np.mean(np.log(picked + 1e-300), axis=1)[None, :]


def fit_glm(
    f: np.ndarray,
    jac: np.ndarray,
    y: np.ndarray,
    theta: np.ndarray,
    task: Task,
    validation: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> GLMPosterior:
    """The GGN posterior on (f, J, y), with (sigma^2, lambda) maximising the Laplace evidence,
    or, given ``validation`` = (f_val, J_val, y_val) of held-out points, minimising their mean
    predictive NLL over the same grid (no other data is seen by the choice)."""
    n = jac.shape[0]
    if task == "regression":
        flat = jac.reshape(-1, jac.shape[-1])
        fit = float(((f[:, 0] - y) ** 2).sum())
    else:
        pi = softmax(f)
        # Lambda = diag(pi) - pi pi^T, so J^T Lambda J = sum_c pi_c (J_c - Jbar)^T (J_c - Jbar)
        # with Jbar = sum_k pi_k J_k: stack sqrt(pi_c) (J_c - Jbar) and take one Gram matrix.
        jbar = np.einsum("nc,ncp->np", pi, jac)
        flat = (np.sqrt(pi)[:, :, None] * (jac - jbar[:, None, :])).reshape(-1, jac.shape[-1])
        fit = float(np.log(pi[np.arange(n), y.astype(int)] + 1e-300).sum())
    e, u = np.linalg.eigh(flat.T @ flat)
    e = np.clip(e, 0, None)
    logz = evidence_grid(task, e, fit, n, float(theta @ theta))
    if validation is None:
        i, j = np.unravel_index(int(np.argmax(logz)), logz.shape)
    else:
        nll_grid = validation_nll_grid(task, e, u, *validation)
        i, j = np.unravel_index(int(np.argmin(nll_grid)), nll_grid.shape)
    return GLMPosterior(
        task,
        e,
        u,
        float(PRIOR_GRID[j]),
        float(noise_grid(task)[i]),
        float(logz[i, j]),
        TUNINGS[validation is not None],
    )


@dataclass(frozen=True)
class Prediction:
    """GLM predictive at test points."""

    mean: np.ndarray  # regression: predictive mean [n]; classification: probs [n, C]
    variance: np.ndarray  # tr S_f (classification: tr G S_f G^T of the probabilities), [n]
    total_var: np.ndarray  # regression: tr S_f + sigma^2; classification: predictive entropy


def predict(post: GLMPosterior, f: np.ndarray, jac: np.ndarray) -> Prediction:
    """GLM predictive: Gaussian (regression) or Monte Carlo softmax (classification)."""
    cov = post.functional_cov(jac)
    var = np.trace(cov, axis1=1, axis2=2)
    if post.task == "regression":
        return Prediction(f[:, 0], var, var + post.noise_var)
    pi = softmax(f)
    grad = np.einsum("nc,cd->ncd", pi, np.eye(pi.shape[1])) - pi[:, :, None] * pi[:, None, :]
    var = np.einsum("nab,nbc,nac->n", grad, cov, grad)  # tr(G S_f G^T), G = d softmax / d f
    probs = expected_softmax(f, cov)
    return Prediction(probs, var, -(probs * np.log(probs + 1e-300)).sum(-1))


def nll(pred: Prediction, y: np.ndarray, task: str) -> float:
    """Mean negative log predictive density (Gaussian) or log-loss (categorical)."""
    if task == "regression":
        v = pred.total_var
        return float(np.mean(0.5 * np.log(2 * math.pi * v) + (y - pred.mean) ** 2 / (2 * v)))
    return float(-np.mean(np.log(pred.mean[np.arange(len(y)), y.astype(int)] + 1e-300)))


def ece(probs: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error of the top-class confidence, equal-width bins."""
    conf, correct = probs.max(-1), (probs.argmax(-1) == y).astype(float)
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.mean() * abs(conf[inside].mean() - correct[inside].mean())
    return float(total)


def auroc(scores_in: np.ndarray, scores_out: np.ndarray) -> float:
    """P(score_out > score_in) with ties counted half (Mann-Whitney U / (n_in n_out))."""
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([scores_in, scores_out]))
    n_in, n_out = len(scores_in), len(scores_out)
    u = ranks[n_in:].sum() - n_out * (n_out + 1) / 2
    return float(u / (n_in * n_out))
