"""vla.specprune: the lean in-graph pruning selects exactly what the first implementation did.

The oracle below is the first implementation's pruning, written plainly: attention mask and
RoPE recomputed from the kept positions, dynamic keeps in TopK order, the double-argsort rank
weights of eq. 6 and the head-mean task score of eq. 1. The model now keeps tokens sorted by
position (constant masks), gathers RoPE rows, scatters constant rank weights and folds the head
mean into the row weights; the kept sets must not change.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neuroedge.models.specprune import functional as fn
from neuroedge.models.specprune.functional import PruneConfig


def reference_forward(model, primary, wrist, proprio, text, prior):
    """(actions, sorted kept positions per pruning stage) by the first implementation."""
    x = model.embed(primary, wrist, proprio, text)
    b, n, _ = x.shape
    pos, nv, depth = torch.arange(n).expand(b, n), model.n_visual, len(model.blocks)
    spec, rows = model.method == "specprune", slice(model.text0 - n, model.action0 - n)
    importance = score = received = torch.zeros(b, nv)
    local, record = torch.zeros(b, nv, dtype=torch.bool), []
    ema_layers = {0, 1, *(k - 1 for k in model.prune.dynamic_layers if k < depth)}
    weight = (text != 0).float()

    def mask(p: torch.Tensor) -> torch.Tensor:
        allowed = (p[:, None, :] <= p[:, :, None]) | (p[:, :, None] >= model.action0)
        return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))[:, None]

    for layer, block in enumerate(model.blocks):
        keep = None
        if layer == 2 and model.method != "unpruned":
            keep = model.static_keep(local, prior, received, score)
        elif spec and layer in model.prune.dynamic_layers:
            keep = torch.topk(importance, math.ceil(model.prune.dynamic_keep * nv), -1).indices
        if keep is not None:
            index = torch.cat([keep, torch.arange(nv, x.shape[1]).expand(b, -1)], 1)
            x = torch.gather(x, 1, index[:, :, None].expand(-1, -1, x.shape[2]))
            pos, importance = torch.gather(pos, 1, index), torch.gather(importance, 1, keep)
            nv = keep.shape[1]
            record.append(torch.sort(pos[:, :nv], -1).values)
        x, attn = block(x, model.rope(pos), mask(pos), slice(None))
        attn = attn.mean(1)
        if model.method == "fastv" and layer == 1:
            received = attn.mean(1)[:, :nv]
        score = (attn[:, rows, :nv] * weight[:, :, None]).sum(1) / weight.sum(1, keepdim=True)
        if spec and layer in ema_layers:
            s = eq6_rank_confidence(score, eps=model.prune.eps)
            importance = fn.ema(importance, s, model.prune.beta)
            if layer < 2:
                local = local | model.per_view_top(score)
    return model.head(model.norm(x[:, -model.queries.shape[0] :])), record


def eq6_rank_confidence(score: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Paper eq. 6 written out: ranks by double argsort, sigmoid weights normalised per row."""
    n = score.shape[-1]
    ranks = torch.argsort(torch.argsort(score, dim=-1, descending=True), dim=-1).to(score.dtype)
    w_rank = torch.sigmoid(-(8.0 / n) * ranks)
    w_rank = w_rank / w_rank.sum(-1, keepdim=True)
    return w_rank * score.mean(-1, keepdim=True) / (score.std(-1, keepdim=True) + eps)


def test_one_sort_rank_confidence_equals_eq6():
    gen = torch.Generator().manual_seed(0)
    for n in (128, 48, 41, 35):
        score = torch.rand(3, n, generator=gen)
        fast, reference = fn.rank_confidence_score(score), eq6_rank_confidence(score)
        assert torch.allclose(fast, reference, rtol=1e-6, atol=0)
        assert torch.equal(fast.argsort(-1), reference.argsort(-1))


@pytest.mark.parametrize("method", ["specprune", "fastv", "random"])
def test_lean_graph_keeps_the_same_tokens_as_the_reference(method):
    from neuroedge.models.specprune.spec import example
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    torch.manual_seed(1)
    model, cfg = make_policy(DEFAULTS).eval(), PruneConfig()
    rng = np.random.default_rng(0)
    for seed in range(6):
        x = {k: torch.from_numpy(v) for k, v in example(seed).items()}
        if seed % 2:  # padded instruction: only the non-padding rows score
            x["text"][0, 5:] = 0
        if method == "random":
            x["prior"] = torch.from_numpy(rng.random((1, 128)).astype(np.float32))
        for mode in ("coarse", "fine"):
            model.configure(method, cfg.budget(mode), cfg.k_local(mode), cfg)
            model.record = []
            with torch.inference_mode():
                actions, _ = model(*x.values())
                expected, stages = reference_forward(model, *x.values())
            assert len(model.record) == len(stages) == (3 if method == "specprune" else 1)
            for got, want in zip(model.record, stages):
                assert torch.equal(got, want)
            assert torch.allclose(actions, expected, atol=1e-5)


@pytest.mark.parametrize("chunk", [8, 4])
def test_chunk_lookback_reproduces_the_previous_query_frame_selection(chunk):
    """lookback="chunk": the dynamic set of the first implementation (patch similarity with the
    frame of the query round(T(v) / chunk) inferences back, recomputed here from pixels): 1
    back at today's chunk of 8, 3 at the chunk of 4 a policy exported before e0a859b returns."""
    from neuroedge.models.specprune.policy import PrunedPolicy

    def engine(mode, inputs):
        return np.zeros((1, chunk, 4), np.float32), np.zeros((1, 128), np.float32)

    cfg, rng = PruneConfig(k_global=0, lookback="chunk"), np.random.default_rng(0)
    policy = PrunedPolicy(engine, "specprune", cfg)
    frames, base = [], rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    for step in range(5):
        obs = {
            "primary": base.copy(),
            "wrist": base[::-1].copy(),
            "proprio": np.array([0, 0.6, 0.2, 1], np.float32),
            "instruction": "push the green drawer closed",
        }
        obs["primary"][8 * step : 8 * step + 8, :16] = 255  # two changed patches per step
        prior = policy.prior(obs, 0.0)
        expected = np.zeros(128, np.float32)
        if frames:
            back = max(1, round(fn.lookback_steps(0.0, cfg.v_max) / chunk))
            past = frames[-min(back, len(frames))]
            for view, cam in enumerate(("primary", "wrist")):
                sim = fn.patch_similarity(obs[cam], past[cam], 8)
                expected[64 * view + fn.dynamic_set(sim, cfg.tau, cfg.k_dynamic)] = 1
        assert np.array_equal(prior, expected)
        assert int(prior.sum()) == (0 if step == 0 else 4)
        policy.plan(obs)
        frames = (frames + [obs])[-4:]
