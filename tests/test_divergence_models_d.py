"""Training that diverges, second wave D: freq_halluc, grad_transformer, hair_trigger's training,
prefix_rft and prm_pbe stop at a non-finite loss with TrainingDiverged (exit 2, the keys to
lower named) instead of training on, and measuring, a NaN net."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from neuroedge.errors import TrainingDiverged


def test_freq_halluc_lm_stops_at_nan_loss():
    from neuroedge.models.freq_halluc import lm

    task = lm.RecallTask(keys=8, values=4, pairs=2, queries=1)
    cfg = {"d_model": 8, "heads": 2, "layers": 1, "steps": 20, "batch": 4, "lr": 1e30}
    with pytest.raises(TrainingDiverged, match=r"LM training step \d+.*lower lr"):
        lm.train_lm(task, {**cfg, "stop_loss": 0.0}, 0)


def test_freq_halluc_tiny_temperature_samples_the_argmax():
    """temperature=1e-300 was accepted and a RuntimeError traceback (logits / T = inf - inf)."""
    from neuroedge.models.freq_halluc import lm

    task = lm.RecallTask(keys=8, values=4, pairs=2, queries=2)
    torch.manual_seed(0)
    model = lm.RecallLM(task.vocab, task.length, 8, 2, 1).eval()
    ids, _ = lm.sample_sequences(task, np.random.default_rng(0), 16, 0.5)
    cold = lm.generate(model, task, ids, 1e-300, 0)
    np.testing.assert_array_equal(cold, lm.generate(model, task, ids, 0, 0))


def gt_config(**over):
    from neuroedge.models.grad_transformer import experiment as X

    return X.check_config({**X.DEFAULTS, "steps": 3, "batch": 4, "d_model": 8, **over})


def test_grad_transformer_refuses_overflowed_shadow_updates():
    """gd_lr=1 at gd_steps=100 took the shadow updates past float32 (~1e115): the generator
    trained on inf tokens, a NaN net, and the run exited 0."""
    from neuroedge.models.grad_transformer import experiment as X

    from neuroedge.models.grad_transformer import functional as F

    small, large = np.full((8, F.SMALL), 1e115), np.full((8, F.LARGE), 1e115)
    with pytest.raises(TrainingDiverged, match="lower gd_lr or gd_steps"):
        X.train_gt(small, large, gt_config(), 0)


def test_grad_transformer_stops_at_nan_loss():
    from neuroedge.models.grad_transformer import experiment as X

    rng = np.random.default_rng(0)
    from neuroedge.models.grad_transformer import functional as F

    small, large = rng.standard_normal((16, F.SMALL)), rng.standard_normal((16, F.LARGE))
    cfg = {**gt_config(), "lr": 1e30, "steps": 5}  # past check_config: the loop's own guard
    with pytest.raises(TrainingDiverged, match=r"training step 5.*lower lr"):
        X.train_gt(small, large, cfg, 0)


def test_grad_transformer_cli_gd_lr_overflow_exit_2(tmp_path, capsys):
    from neuroedge.cli import main

    rc = main(["bench", "transfer.grad_transformer", "--backend", "host", "--out",
               str(tmp_path / "o"), "--config", "seeds=[0]", "workers=1", "shadow_tasks=4",
               "private_tasks=1", "samples=16", "gd_lr=1", "steps=2", "d_model=8"])  # fmt: skip
    assert rc == 2
    assert "lower gd_lr or gd_steps" in capsys.readouterr().err
    assert not (tmp_path / "o" / "report.json").exists()


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_hair_trigger_meta_train_stops_at_nan_loss(lam):
    from neuroedge.models.hair_trigger import functional as F

    cfg = F.MetaConfig(width=8, steps=3, lr=1e30, lam=lam, batch=8, update_batch=4)
    keys = "lr, lam, eta" if lam else "lr and"
    with pytest.raises(TrainingDiverged, match=rf"training step 3.*lower {keys}"):
        F.meta_train(cfg, 0)


def prefix_policy(lr):
    from neuroedge.models.prefix_rft import functional as F

    torch.manual_seed(0)
    policy = F.Policy(8)
    return policy, torch.optim.Adam(policy.parameters(), lr=lr)


def test_prefix_rft_sft_step_stops_at_nan_loss():
    from neuroedge.models.prefix_rft import functional as F

    policy, opt = prefix_policy(1e37)  # the GRU saturates: lr=10 (the bound) stays finite
    prompts = torch.as_tensor(F.index_prompts(np.arange(8)))
    with pytest.raises(TrainingDiverged, match="SFT step.*lower base_lr, lr"):
        for _ in range(4):
            F.sft_step(policy, opt, prompts, F.answers(prompts))


def test_prefix_rft_rl_step_stops_at_nan_policy():
    """The step before left the weights NaN: prefix_advantages' ValueError was a traceback."""
    from neuroedge.models.prefix_rft import experiment as X
    from neuroedge.models.prefix_rft import functional as F

    policy, opt = prefix_policy(1e37)  # the GRU saturates: lr=10 (the bound) stays finite
    cfg = {**X.DEFAULTS, "rollouts": 2, "steps": 10}
    prompts = torch.as_tensor(F.index_prompts(np.arange(4)))
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(TrainingDiverged, match=r"rl.prefix_rft Prefix-RFT step \d.*lower lr"):
        for step in range(10):
            F.rl_step(policy, opt, prompts, cfg, step, gen, True)


def prm_setup():
    from neuroedge.models.prm_pbe import experiment as X

    cfg = X.check_config({**X.DEFAULTS, "train_tasks": 20, "test_tasks": 2, "tree_tasks": 5})
    return cfg, X.tasks_of(cfg)[0]


def test_prm_pbe_ppo_update_stops_at_nan_loss():
    """lr=0.1 (accepted: lr <= 10) overflowed the PPO ratio at the first update: every arm's
    policy NaN, its pass@1 0 in the report, exit 0."""
    from neuroedge.models.prm_pbe.policy import Policy
    from neuroedge.models.prm_pbe.ppo import ppo_update

    cfg, train = prm_setup()
    torch.manual_seed(0)
    policy = Policy(32)
    ref = copy.deepcopy(policy)
    opt = torch.optim.Adam(policy.parameters(), lr=10.0)
    gen = torch.Generator().manual_seed(0)
    batch = [t for n in (1, 2, 3) for t in train[n]][:16]
    with pytest.raises(TrainingDiverged, match=r"PPO update \(optimiser step \d+\).*lower lr"):
        for _ in range(3):
            ppo_update(policy, ref, opt, batch, None, {**cfg, "lr": 10.0}, gen)


def test_prm_pbe_sft_and_prm_stop_at_nan_loss():
    from neuroedge.models.prm_pbe import prm as R
    from neuroedge.models.prm_pbe.policy import Policy, sft

    cfg, train = prm_setup()
    with pytest.raises(TrainingDiverged, match="SFT epoch 1.*lower sft_lr"):
        sft(Policy(8), train[1], {**cfg, "sft_lr": 1e30, "sft_epochs": 1}, 0)
    n, nodes = 6, R.root_nodes(train[1][:6])
    pairs = R.Pairs(nodes, np.zeros(n, np.int64), np.ones(n, np.int64), nodes.fb, nodes.fb,
                    np.arange(n), np.ones(n))  # fmt: skip
    bad = {**cfg, "hidden": 8, "prm_lr": 1e30, "prm_steps": 3, "prm_batch": 4}
    with pytest.raises(TrainingDiverged, match="PRM training step 3.*lower prm_lr"):
        R.train_prm(pairs, np.arange(n), bad, 0)
