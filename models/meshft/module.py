"""nn.Modules of physics.meshft: the learnable Hodge metrics, MeshFT itself, and a
MeshGraphNet-style unstructured baseline.

Hodge modes (M = V0 * f_m, W = V1inv * f_w with f = softplus(raw) + 1e-6):

* ``theory``: M = V0, W = c^2 V1inv, nothing learned;
* ``scalar``: one raw value each for f_m and f_w (identifiable from plane waves);
* ``learn``: raw per node and per edge (free; weakly identifiable from plane waves);
* ``learn_geom``: raw from 2-layer SiLU MLPs (hidden 64) of standardised node features
  (x, y, V0) and edge features (dx, dy, |e|) (minimum image), the paper's default.

Decision: raw parameters start at softplus^-1(1) (and the MLPs' last bias there), so every
learned mode starts at the theory metric with c = 1 instead of the official 0.69 scale: training
then only has to correct dispersion. Dissipation: ``none``, ``global`` (r = softplus(rho)) or
``diag`` (one r per node), all >= 0 so R = diag(r) is PSD.
"""

from __future__ import annotations

import math

import torch
from neuroedge.models.meshft import functional as F
from neuroedge.models.meshft.mesh import Mesh
from torch import nn

HODGE_MODES = ("theory", "scalar", "learn", "learn_geom")
DAMPING_MODES = ("none", "global", "diag")
RAW_ONE = math.log(math.e - 1.0)  # softplus(RAW_ONE) == 1


def _mlp(n_in: int, hidden: int, n_out: int, layers: int = 2) -> nn.Sequential:
    mods: list[nn.Module] = []
    width = n_in
    for _ in range(layers):
        mods += [nn.Linear(width, hidden), nn.SiLU()]
        width = hidden
    mods.append(nn.Linear(width, n_out))
    return nn.Sequential(*mods)


def _standardise(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(0)) / (x.std(0) + 1e-12)


class MeshTensors(nn.Module):
    """A mesh's topology and geometry as buffers (moves with .double()/.float())."""

    def __init__(self, mesh: Mesh) -> None:
        super().__init__()
        self.n_nodes = mesh.n_nodes
        self.register_buffer("edges", torch.as_tensor(mesh.edges, dtype=torch.long))
        self.register_buffer("star0", torch.as_tensor(mesh.star0))
        self.register_buffer("star1", torch.as_tensor(mesh.star1))
        pts = torch.as_tensor(mesh.points)
        vec = torch.as_tensor(mesh.edge_vectors)
        self.register_buffer(
            "node_features", _standardise(torch.cat([pts, self.star0[:, None]], 1))
        )
        self.register_buffer(
            "edge_features", _standardise(torch.cat([vec, vec.norm(dim=1, keepdim=True)], 1))
        )


class Hodge(nn.Module):
    """Diagonal SPD metrics (m per node, w per edge) in one of ``HODGE_MODES``."""

    def __init__(
        self, mesh: MeshTensors, mode: str = "learn_geom", c: float = 1.0, hidden: int = 64
    ) -> None:
        super().__init__()
        if mode not in HODGE_MODES:
            raise ValueError(f"hodge mode {mode!r} is not one of {', '.join(HODGE_MODES)}")
        self.mesh, self.mode, self.c2 = mesh, mode, c * c
        if mode == "scalar":
            self.raw_m = nn.Parameter(torch.tensor(RAW_ONE))
            self.raw_w = nn.Parameter(torch.tensor(RAW_ONE))
        elif mode == "learn":
            self.raw_m = nn.Parameter(torch.full((mesh.n_nodes,), RAW_ONE))
            self.raw_w = nn.Parameter(torch.full((len(mesh.edges),), RAW_ONE))
        elif mode == "learn_geom":
            self.node_net = _mlp(3, hidden, 1)
            self.edge_net = _mlp(3, hidden, 1)
            for net in (self.node_net, self.edge_net):
                nn.init.zeros_(net[-1].weight)
                nn.init.constant_(net[-1].bias, RAW_ONE)

    def raw(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.mode == "learn_geom":
            return (
                self.node_net(self.mesh.node_features.to(self.node_net[0].weight))[:, 0],
                self.edge_net(self.mesh.edge_features.to(self.edge_net[0].weight))[:, 0],
            )
        return self.raw_m, self.raw_w

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        star0, star1 = self.mesh.star0, self.mesh.star1
        if self.mode == "theory":
            return star0, self.c2 * star1
        raw_m, raw_w = self.raw()
        return (
            star0 * (nn.functional.softplus(raw_m) + 1e-6),
            self.c2 * star1 * (nn.functional.softplus(raw_w) + 1e-6),
        )


class SubstepCapError(RuntimeError):
    """A training step whose CFL sub-steps exceed ``MeshFT.substep_cap`` (``train.fit`` turns
    it into a ConfigError naming lr)."""

    def __init__(self, omega: float, ratio: float) -> None:
        super().__init__(f"omega_max {omega:.4g}: {ratio:.4g} sub-steps")
        self.omega, self.ratio = omega, ratio


class MeshFT(nn.Module):
    """Structure-preserving step: KDK with the learned metrics and optional Rayleigh damping."""

    def __init__(
        self,
        mesh: Mesh,
        hodge: str = "learn_geom",
        damping: str = "none",
        c: float = 1.0,
        cfl: float = 1.0,
    ) -> None:
        super().__init__()
        if damping not in DAMPING_MODES:
            raise ValueError(f"damping {damping!r} is not one of {', '.join(DAMPING_MODES)}")
        self.tensors = MeshTensors(mesh)
        self.hodge = Hodge(self.tensors, hodge, c)
        self.damping, self.cfl = damping, cfl
        self.substep_cap: int | None = None  # set by train.fit: the autograd memory bound
        if damping == "global":
            self.raw_r = nn.Parameter(torch.tensor(-6.0))
        elif damping == "diag":
            self.raw_r = nn.Parameter(torch.full((mesh.n_nodes,), -6.0))

    def rate(self) -> torch.Tensor | None:
        if self.damping == "none":
            return None
        return nn.functional.softplus(self.raw_r)

    def forward(
        self, q: torch.Tensor, p: torch.Tensor, dt: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        m, w = self.hodge()
        edges, r = self.tensors.edges, self.rate()
        omega = F.omega_max(m, w, edges)
        ratio = omega * dt / self.cfl
        if self.substep_cap is not None and not ratio <= self.substep_cap:  # NaN refused too
            raise SubstepCapError(omega, ratio)
        n_sub = F.substeps(omega, dt, self.cfl)
        for _ in range(n_sub):
            q, p = F.kdk_step(q, p, m, w, edges, dt / n_sub, r)
        return q, p

    def rollout(
        self, q: torch.Tensor, p: torch.Tensor, dt: float, steps: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``steps`` steps with the metrics and the CFL split computed once (no gradient)."""
        with torch.no_grad():
            m, w = self.hodge()
            return F.rollout(q, p, m, w, self.tensors.edges, dt, steps, self.rate(), self.cfl)


class MeshGraphNet(nn.Module):
    """Encode-process-decode message passing predicting the vector field (dq/dt, dp/dt).

    Inputs are scaled by ``scale`` = (std q, std p) of the training data; RK2 (Heun) steps it.
    """

    def __init__(
        self,
        mesh: Mesh,
        hidden: int = 32,
        layers: int = 2,
        scale: tuple[float, float] = (1.0, 1.0),
        rate_scale: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        super().__init__()
        self.tensors = MeshTensors(mesh)
        self.register_buffer("scale", torch.tensor(scale))
        self.register_buffer("rate_scale", torch.tensor(rate_scale))
        self.node_in = _mlp(2, hidden, hidden, 1)
        self.edge_in = _mlp(3, hidden, hidden, 1)
        self.edge_nets = nn.ModuleList(_mlp(3 * hidden, hidden, hidden, 1) for _ in range(layers))
        self.node_nets = nn.ModuleList(_mlp(2 * hidden, hidden, hidden, 1) for _ in range(layers))
        self.node_out = _mlp(hidden, hidden, 2, 1)

    def field(self, q: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        src, dst = self.tensors.edges[:, 0], self.tensors.edges[:, 1]
        h = self.node_in(torch.stack([q, p], -1) / self.scale)
        e = self.edge_in(self.tensors.edge_features.to(h)).expand(*h.shape[:-2], -1, -1)
        for edge_net, node_net in zip(self.edge_nets, self.node_nets):
            e = e + edge_net(torch.cat([h[..., src, :], h[..., dst, :], e], -1))
            agg = torch.zeros_like(h).index_add_(-2, dst, e).index_add_(-2, src, e)
            h = h + node_net(torch.cat([h, agg], -1))
        out = self.node_out(h) * self.rate_scale
        return out[..., 0], out[..., 1]

    def forward(
        self, q: torch.Tensor, p: torch.Tensor, dt: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        dq1, dp1 = self.field(q, p)
        dq2, dp2 = self.field(q + dt * dq1, p + dt * dp1)
        return q + 0.5 * dt * (dq1 + dq2), p + 0.5 * dt * (dp1 + dp2)
