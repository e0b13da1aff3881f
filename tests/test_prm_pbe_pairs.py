"""pbe.prm_rl: trees that give no preference pairs, or none on one side of the PRM's train /
held-out split, are refused with a ConfigError naming the keys (bench and ordinary builds);
smoke builds work for every seed; a build derives tree_tasks from train_tasks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.prm_pbe import dsl
from neuroedge.models.prm_pbe import experiment as X
from neuroedge.models.prm_pbe import prm as R
from neuroedge.models.prm_pbe import spec as S
from neuroedge.models.prm_pbe.policy import Policy, root_nodes, step_nodes

TINY = {"train_tasks": 20, "test_tasks": 2, "sft_epochs": 1, "tree_tasks": 5, "prm_steps": 2}


class Stop(Exception):
    pass


def tiny(**extra) -> dict:
    return X.check_config({**X.DEFAULTS, **TINY, **extra})


@pytest.fixture
def siblings_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every child valued 0: no two siblings differ, so no pair, whatever the policy."""

    def child_values(policy, nodes, ops, cfg, gen):
        return np.zeros(len(ops)), step_nodes(nodes, ops)

    monkeypatch.setattr(R, "child_values", child_values)


def test_trees_without_pairs_are_a_config_error_naming_the_keys(siblings_alike) -> None:
    cfg = tiny(tau=0.5, tree_k=3)
    train, _ = X.tasks_of(cfg)
    torch.manual_seed(0)
    policy = Policy(cfg["hidden"])
    with pytest.raises(ConfigError, match=r"tree_tasks=5.*tree_k=3.*tau=0\.5"):
        X.reward_model(policy, train, cfg)


def fake_pairs(task_ids: list[int]) -> R.Pairs:
    """One pair per entry, each at the root of a task, from the task index given."""
    rng = np.random.default_rng(0)
    nodes = root_nodes([dsl.random_task(rng, 1) for _ in task_ids])
    n = len(task_ids)
    fb = np.asarray(nodes.fb)
    return R.Pairs(
        nodes, np.zeros(n, np.int64), np.ones(n, np.int64), fb, fb, np.array(task_ids), np.ones(n)
    )


@pytest.mark.parametrize(
    ("task_ids", "counts"),
    [
        ([0, 5, 10], "3 preference pairs, 0 to train the PRM and 3 to score it"),
        ([1, 2, 7], "3 preference pairs, 3 to train the PRM and 0 to score it"),
    ],
)
def test_an_empty_side_of_the_split_is_refused_naming_tree_tasks_and_the_counts(
    monkeypatch, task_ids, counts
) -> None:
    monkeypatch.setattr(R, "build_pairs", lambda *a, **k: fake_pairs(task_ids))
    cfg = tiny()
    train, _ = X.tasks_of(cfg)
    with pytest.raises(ConfigError, match=rf"tree_tasks=5: the trees gave {counts}"):
        X.reward_model(None, train, cfg)  # was a PRM at its random init, or a NaN score


def test_a_smoke_build_works_on_a_seed_whose_trees_give_no_pairs() -> None:
    program = S.build({"smoke": True, "seed": 2})  # was a RuntimeError: no pairs on seed 2
    assert program.meta["prm"].startswith("smoke, untrained: the trees of 20 tasks")
    out = program.fn(**S.example(0))
    assert out["program"].shape == (4, dsl.MAX_OPS + 1)


def test_an_ordinary_build_without_pairs_is_refused_naming_train_tasks(siblings_alike) -> None:
    with pytest.raises(ConfigError, match=r"tree_tasks=10 .*raise train_tasks"):
        S.build({"train_tasks": 10, "sft_epochs": 1, "updates": 3, "variant": "prm"})


def test_a_build_with_fewer_training_tasks_than_the_default_tree_tasks_runs(monkeypatch) -> None:
    seen = {}

    def tasks_of(cfg):
        seen.update(cfg)
        raise Stop  # before any training: the config is what is tested

    monkeypatch.setattr(X, "tasks_of", tasks_of)
    with pytest.raises(Stop):
        S.build({"train_tasks": 100})  # was refused: tree_tasks (200) exceeds train_tasks
    assert seen["tree_tasks"] == 100 and seen["train_tasks"] == 100
    with pytest.raises(Stop):
        S.build({})
    assert seen["tree_tasks"] == X.DEFAULTS["tree_tasks"]  # the default build is unchanged


def test_the_bench_still_refuses_tree_tasks_above_train_tasks_when_both_are_given(tmp_path):
    with pytest.raises(ConfigError, match=r"tree_tasks \(300\) exceeds train_tasks \(100\)"):
        X.bench(str(tmp_path), config={"tree_tasks": 300, "train_tasks": 100})
