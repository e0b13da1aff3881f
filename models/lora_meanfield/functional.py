"""Perturbed mean-field self-attention on the sphere (Koubbi, Hernandez, Boussard, ICML 2026).

Tokens x_1..x_n on S^{d-1} follow the Post-LN attention flow (Geshkovski et al.)::

    dx_i/dt = P_{x_i}( sum_j s_ij V x_j ),   s_ij = softmax_j( beta <x_i, A x_j> ),
    P_x y = y - <x, y> x.

Depth is time: L layers over a horizon T use the step h = T / L and
``x <- normalize(x + h * field(x))`` (an Euler step then the layer norm). A LoRA adapter
perturbs the value matrix, V_l = V + dV_l, either tied (the same dV in every layer) or random
(dV_l = eta * sum_a u_a v_a^T with u, v ~ N(0, I/d) drawn afresh per layer).

Forgetting is measured by the Wasserstein-2 distance between the base and adapted token clouds
(exact assignment for equal uniform weights) and by the drift of the cluster direction.

Design decisions the paper leaves open, with reasons:

* LoRA acts on V only and A stays the base A: Prop 3.3 and Thm 4.2 are stated for dV, and
  inside one cluster attention is uniform, so A does not move the cluster point.
* The cluster direction is the normalised mean token: once tokens collapse it is the cluster.
* Random adapters use singular values s_a = 1 and eta = c sqrt(L); the sum of L independent
  increments of size h*eta grows like sqrt(L) h eta = T c, so c is the collapse variable.
* Time to deviation [derived]: in the base cluster the point follows Oja's flow of the adapted
  V~, x(t) ~ exp(V~ t) x_0, so it leaves u_1 for u~_1 after
  T* ~ ln(1/eps_0) / (lambda~_1 - lambda~_2), eps_0 = the initial overlap with u~_1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def attention_field(x: np.ndarray, a: np.ndarray, v: np.ndarray, beta: float) -> np.ndarray:
    """The projected attention velocity P_x(sum_j s_ij V x_j) for tokens ``x`` [n, d]."""
    logits = beta * (x @ a @ x.T)
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=1, keepdims=True)
    pushed = weights @ (x @ v.T)
    return pushed - np.sum(pushed * x, axis=1, keepdims=True) * x


def attention_layer(
    x: np.ndarray, a: np.ndarray, v: np.ndarray, beta: float, h: float
) -> np.ndarray:
    """One Transformer layer: Euler step of size ``h`` then renormalisation to the sphere."""
    y = x + h * attention_field(x, a, v, beta)
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def run_flow(
    x0: np.ndarray,
    a: np.ndarray,
    values: list[np.ndarray] | np.ndarray,
    horizon: float,
    layers: int,
    beta: float = 1.0,
) -> np.ndarray:
    """Tokens after ``layers`` layers over time ``horizon``.

    ``values`` is one [d, d] matrix (tied across layers) or a list of ``layers`` of them.
    """
    if layers < 1:
        raise ValueError(f"layers {layers}: the flow needs at least one layer")
    per_layer = isinstance(values, list)
    if per_layer and len(values) != layers:
        raise ValueError(f"got {len(values)} value matrices for {layers} layers")
    h = horizon / layers
    x = np.asarray(x0, dtype=np.float64)
    for layer in range(layers):
        x = attention_layer(x, a, values[layer] if per_layer else values, beta, h)
    return x


def sphere_tokens(n: int, d: int, seed: int, bias: float = 0.5) -> np.ndarray:
    """Gaussian tokens with |x_1| + ``bias`` in the first coordinate, normalised (so
    <x_i, e_1> > 0, Assumption 3.2's gamma)."""
    x = np.random.default_rng(seed).standard_normal((n, d))
    x[:, 0] = np.abs(x[:, 0]) + bias
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def check_tokens(x: np.ndarray, name: str = "tokens") -> np.ndarray:
    """Validate a [n, d] token matrix: finite, nonzero rows; returns it on the unit sphere."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 2:
        raise ValueError(f"{name}: expected shape [n_tokens, dim >= 2], got {list(x.shape)}")
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
    if bad.size:
        raise ValueError(f"{name}: row {int(bad[0])} has NaN or infinite entries")
    norms = np.linalg.norm(x, axis=1)
    zero = np.flatnonzero(norms == 0)
    if zero.size:
        raise ValueError(f"{name}: row {int(zero[0])} is the zero vector (not on a sphere)")
    return x / norms[:, None]


def wasserstein2(x: np.ndarray, y: np.ndarray) -> float:
    """W2 between two equal-size uniform empirical measures (exact optimal assignment)."""
    from scipy.optimize import linear_sum_assignment

    if x.shape != y.shape:
        raise ValueError(f"W2 needs clouds of equal shape, got {x.shape} and {y.shape}")
    cost = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return float(np.sqrt(cost[rows, cols].mean()))


def cluster_direction(x: np.ndarray) -> np.ndarray:
    """The normalised mean token (the cluster point once tokens have collapsed); ValueError
    when the mean is the zero vector (tokens symmetric about the origin: no direction)."""
    m = x.mean(axis=0)
    norm = float(np.linalg.norm(m))
    if not norm > 1e-12 * max(float(np.abs(x).max(initial=0.0)), 1e-300):
        raise ValueError(
            f"the tokens' mean is the zero vector (norm {norm:.3g}): their cluster direction "
            "is undefined (tokens symmetric about the origin)"
        )
    return m / norm


def tied_adapter(d: int, rank: int, scale: float, seed: int) -> np.ndarray:
    """A random symmetric rank-``rank`` dV = sum_a sign_a scale_a w_a w_a^T (unit w_a)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((d, d))
    for _ in range(rank):
        w = rng.standard_normal(d)
        w /= np.linalg.norm(w)
        out += rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.0) * scale * np.outer(w, w)
    return out


def random_adapters(d: int, rank: int, layers: int, eta: float, seed: int) -> list[np.ndarray]:
    """Per-layer i.i.d. dV_l = eta * sum_a u_a v_a^T with u, v ~ N(0, I/d) (Thm 4.2)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((layers, d, rank)) / np.sqrt(d)
    v = rng.standard_normal((layers, d, rank)) / np.sqrt(d)
    return [eta * u[layer] @ v[layer].T for layer in range(layers)]


@dataclass(frozen=True)
class SpectralBound:
    """Prop 3.3's decomposition of dV in the eigenbasis of V (top eigenvector u_1)."""

    a: float  # u_1^T dV u_1
    b: float  # || P_perp dV u_1 ||
    e: float  # || P_perp dV P_perp ||_op
    gap: float  # lambda_1 - lambda_2 of V

    @property
    def applies(self) -> bool:
        """The proposition's condition gap + a > 2||b|| + ||E||."""
        return self.gap + self.a > 2 * self.b + self.e

    @property
    def bound(self) -> float:
        """The bound on ||u_1 - u~_1||: (2||b|| + ||E||) / (gap + a)."""
        return (2 * self.b + self.e) / (self.gap + self.a)


def spectral_bound(v: np.ndarray, dv: np.ndarray) -> SpectralBound:
    """Decompose ``dv`` against the top eigenvector of the symmetric ``v``."""
    evals, evecs = np.linalg.eigh((v + v.T) / 2)
    u1 = evecs[:, -1]
    perp = np.eye(len(v)) - np.outer(u1, u1)
    return SpectralBound(
        a=float(u1 @ dv @ u1),
        b=float(np.linalg.norm(perp @ dv @ u1)),
        e=float(np.linalg.norm(perp @ dv @ perp, 2)),
        gap=float(evals[-1] - evals[-2]),
    )


def deviation_trace(
    x0: np.ndarray,
    a: np.ndarray,
    v: np.ndarray,
    direction: np.ndarray,
    horizon: float,
    h: float,
    beta: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Times and mean |<x_i, direction>| along a tied flow of step ``h`` up to ``horizon``."""
    steps = round(horizon / h)
    x = np.asarray(x0, dtype=np.float64)
    overlap = np.empty(steps + 1)
    overlap[0] = np.abs(x @ direction).mean()
    for k in range(steps):
        x = attention_layer(x, a, v, beta, h)
        overlap[k + 1] = np.abs(x @ direction).mean()
    return h * np.arange(steps + 1), overlap


def predicted_deviation_time(x0: np.ndarray, v_adapted: np.ndarray) -> float:
    """T_pred = ln(1/eps_0) / (lambda~_1 - lambda~_2), eps_0 the mean overlap with u~_1."""
    evals, evecs = np.linalg.eigh((v_adapted + v_adapted.T) / 2)
    eps0 = float(np.abs(x0 @ evecs[:, -1]).mean())
    return float(np.log(1.0 / eps0) / (evals[-1] - evals[-2]))


def first_crossing(times: np.ndarray, values: np.ndarray, level: float) -> float:
    """The first time ``values`` exceeds ``level`` (linear interpolation); inf if never."""
    above = np.flatnonzero(values > level)
    if above.size == 0:
        return float("inf")
    k = int(above[0])
    if k == 0:
        return float(times[0])
    frac = (level - values[k - 1]) / (values[k] - values[k - 1])
    return float(times[k - 1] + frac * (times[k] - times[k - 1]))
