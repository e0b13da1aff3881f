"""causal.cadre formulas pinned by independent computations: flow density, KL_z, DAG penalty."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.cadre.functional import dag_penalty
from neuroedge.models.cadre.module import AffineConditionalFlow, CaDRe
from torch.distributions import Normal


def chain_log_prob(flow: AffineConditionalFlow, v: torch.Tensor, cond: torch.Tensor):
    """sum_i log N(v_i; mu_i(cond, v_<i), sigma_i(cond)^2), one Normal per coordinate."""
    sigma = flow.log_scale(cond).clamp(-5, 5).exp()
    total = torch.zeros(len(v), dtype=v.dtype)
    for i, loc in enumerate(flow.loc):
        mu = loc(torch.cat([cond, v[:, :i]], -1))[:, 0]
        total = total + Normal(mu, sigma[:, i]).log_prob(v[:, i])
    return total


def test_affine_flow_log_prob_is_the_conditional_gaussian_chain():
    torch.manual_seed(0)
    flow = AffineConditionalFlow(3, 2, 8).double()
    with torch.no_grad():  # scales well away from 1, so the log-det's sign matters
        flow.log_scale[-1].bias.copy_(torch.tensor([0.8, -0.6, 0.4], dtype=torch.float64))
    v = torch.randn(5, 3, dtype=torch.float64)
    cond = torch.randn(5, 2, dtype=torch.float64)
    with torch.no_grad():
        assert torch.allclose(flow.log_prob(v, cond), chain_log_prob(flow, v, cond), atol=1e-10)


def test_kl_z_is_the_monte_carlo_kl_of_the_drawn_latents():
    """kl_z = mean over windows of log q(z | x) - log p(z), p: N(0, I) for z_1, then the
    flow p(z_t | z_t-1, c); z the same draw ``terms`` takes (the first randn after seeding)."""
    torch.manual_seed(1)
    model = CaDRe(dx=3, dz=2, domains=2, hidden=8).double()
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    domain = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        torch.manual_seed(7)
        kl_z = model.terms(x, domain)["kl_z"]
        torch.manual_seed(7)
        mu, logvar = model.encode_z(x)
        std = (0.5 * logvar).exp()
        z = mu + torch.randn_like(mu) * std
        log_q = Normal(mu, std).log_prob(z).sum((1, 2))
        log_p = Normal(0.0, 1.0).log_prob(z[:, 0]).sum(-1)
        emb = model.embedding(domain)
        for t in range(1, z.shape[1]):
            cond = torch.cat([z[:, t - 1], emb], -1)
            log_p = log_p + chain_log_prob(model.z_prior, z[:, t], cond)
    assert float(kl_z) == pytest.approx(float((log_q - log_p).mean()), abs=1e-9)


def test_dag_penalty_of_a_two_cycle_in_closed_form():
    """A = [[0, a], [b, 0]], d = 2: tr[(I + A o A / 2)^2] - 2 = a^2 b^2 / 2; 0 when acyclic."""
    a, b = 1.5, -0.8
    cyc = torch.tensor([[0.0, a], [b, 0.0]], dtype=torch.float64)
    assert float(dag_penalty(cyc)) == pytest.approx(a * a * b * b / 2, rel=1e-12)
    assert float(dag_penalty(torch.tensor([[0.0, a], [0.0, 0.0]]))) == pytest.approx(0.0, abs=1e-6)
