"""The pure math of causal.cadre (CaDRe, Fu et al., ICML 2026): the Jacobian-based graph, its
penalties, and the evaluation metrics.

Observations x_t = m(z_t, s_t) (Lemma 3.3: the SEM among observed variables is a nonlinear ICA
in the endogenous noises s_t). With [J_m]_ij = dx_i/ds_j and D_m = diag(J_m), Thm 3.5 gives the
observed causal graph as the Jacobian::

    J_g(x_t) = I - D_m J_m^-1,     [J_g]_ij = dx_i/dx_j (direct effect of x_j on x_i).

For a linear-additive SEM x = B x + h(z) + s, J_m = (I - B)^-1 and D_m = I (a DAG has a zero
diagonal), so J_g = B exactly. Penalties on a Jacobian J (d x d):

* sparsity L_s = || M(J) ||_1 with M(J) = (I + J)^T (I + J) - I (applied as the paper does to the
  transition Jacobians) and || J_g ||_1;
* acyclicity (DAG-GNN) D_g(A) = tr[(I + A o A / d)^d] - d, zero iff A has no directed cycle.

Metrics: MCC = mean |Pearson corr| of the Hungarian-matched pairs of estimated and true latents;
SHD, F1 and TPR of the thresholded edge set (edge j -> i when |A_ij| > threshold; SHD counts
each unordered pair {i, j} whose pair of directed entries differs from the truth once: a
missing, extra or reversed edge, or a true edge also estimated backwards), and the skeleton F1
(orientation ignored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


def jacobian_graph(j_m: Any) -> Any:
    """J_g = I - D_m J_m^-1 for J_m [..., d, d] (torch)."""
    import torch

    eye = torch.eye(j_m.shape[-1], dtype=j_m.dtype, device=j_m.device)
    diag = torch.diagonal(j_m, dim1=-2, dim2=-1)
    return eye - diag.unsqueeze(-1) * torch.linalg.inv(j_m)


def sparsity_transform(j: Any) -> Any:
    """M(J) = (I + J)^T (I + J) - I."""
    import torch

    eye = torch.eye(j.shape[-1], dtype=j.dtype, device=j.device)
    return (eye + j).transpose(-1, -2) @ (eye + j) - eye


def dag_penalty(a: Any) -> Any:
    """D_g(A) = tr[(I + A o A / d)^d] - d (DAG-GNN); 0 exactly when A is acyclic."""
    import torch

    d = a.shape[-1]
    eye = torch.eye(d, dtype=a.dtype, device=a.device)
    return (
        torch.diagonal(torch.linalg.matrix_power(eye + a * a / d, d), dim1=-2, dim2=-1).sum(-1) - d
    )


def mcc(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Mean absolute Pearson correlation after Hungarian matching (columns = components); NaN
    when ``estimate`` holds a NaN or infinite value (a diverged model: no figure to report).
    A constant column's correlations (0/0) count as 0: it carries no signal."""
    from scipy.optimize import linear_sum_assignment

    est = np.asarray(estimate, dtype=np.float64).reshape(-1, estimate.shape[-1])
    tru = np.asarray(truth, dtype=np.float64).reshape(-1, truth.shape[-1])
    if len(est) != len(tru):
        raise ValueError(f"MCC needs paired samples, got {len(est)} and {len(tru)}")
    if not np.isfinite(est).all():  # was 0.0 through nan_to_num: read as a measured MCC
        return float("nan")
    k = tru.shape[1]
    corr = np.corrcoef(est.T, tru.T)[: est.shape[1], est.shape[1] :]
    corr = np.nan_to_num(np.abs(corr))
    rows, cols = linear_sum_assignment(-corr)
    return float(corr[rows, cols].sum() / k)


@dataclass(frozen=True)
class GraphScores:
    shd: int  # node pairs that differ: additions + deletions + reversals + bidirected
    f1: float
    tpr: float  # recall of true edges
    fdr: float  # false discoveries / predicted edges
    n_true: int
    n_pred: int
    skeleton_f1: float  # F1 of the undirected edge sets (orientation ignored)


def graph_scores(estimate: np.ndarray, truth: np.ndarray, threshold: float = 0.3) -> GraphScores:
    """Compare supports of |estimate| > threshold and truth != 0 (diagonals ignored)."""
    est = np.abs(np.asarray(estimate)) > threshold
    tru = np.asarray(truth) != 0
    np.fill_diagonal(est, False)
    np.fill_diagonal(tru, False)
    tp = int((est & tru).sum())
    n_pred, n_true = int(est.sum()), int(tru.sum())
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return GraphScores(
        shd(est, tru),
        f1,
        recall,
        (n_pred - tp) / n_pred if n_pred else 0.0,
        n_true,
        n_pred,
        _f1(np.triu(est | est.T), np.triu(tru | tru.T)),
    )


def shd(est: np.ndarray, tru: np.ndarray) -> int:
    """Structural Hamming distance of two boolean adjacency matrices (diagonals ignored): the
    unordered pairs i < j whose (est_ij, est_ji) differs from (tru_ij, tru_ji). A missing edge,
    an extra edge, a reversed edge, and a true edge estimated in both directions each count 1."""
    est, tru = np.asarray(est, dtype=bool), np.asarray(tru, dtype=bool)
    upper = np.triu(np.ones(est.shape, dtype=bool), k=1)
    differs = (est != tru) | (est.T != tru.T)
    return int((differs & upper).sum())


def _f1(est: np.ndarray, tru: np.ndarray) -> float:
    tp = int((est & tru).sum())
    return 2 * tp / (int(est.sum()) + int(tru.sum())) if tp else 0.0


def linear_sem(s: Any, z: Any, b: Any, mixing: Any) -> Any:
    """x = (I - B)^-1 (tanh(z W^T) + s): a linear-additive SEM with latent drivers (torch)."""
    import torch

    eye = torch.eye(b.shape[0], dtype=b.dtype)
    return torch.linalg.solve(eye - b, torch.tanh(z @ mixing.T) + s)


def nonlinear_sem(s: Any, z: Any, b: Any, mixing: Any, order: Any) -> Any:
    """x_i = tanh(sum_j B_ij x_j) + 0.5 sin(z . w_i) + s_i (1 + 0.2 x_pa^2), solved in the
    topological ``order`` (torch; differentiable in s)."""
    import torch

    xs: list[Any] = [None] * b.shape[0]
    drive = 0.5 * torch.sin(z @ mixing.T)
    for i in order:
        parents = [j for j in range(b.shape[0]) if b[i, j] != 0]
        pa = sum((b[i, j] * xs[j] for j in parents), torch.zeros((), dtype=s.dtype))
        xs[i] = torch.tanh(pa) + drive[i] + s[i] * (1 + 0.2 * pa * pa)
    return torch.stack(xs)
