"""pbe.prm_rl: the DSL interpreter, task generation, rollouts against executing the program,
GAE and the PRM step rewards against hand-worked values, SFT, the trees' preference pairs and
the bench end to end on a small config."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neuroedge.models.prm_pbe import dsl
from neuroedge.models.prm_pbe import policy as P
from neuroedge.models.prm_pbe import ppo as O
from neuroedge.models.prm_pbe import prm as R

CFG = {
    "hidden": 64,
    "sft_lr": 3e-3,
    "sft_epochs": 20,
    "batch": 32,
    "tree_k": 4,
    "value_rollouts": 8,
    "tree_temperature": 0.8,
    "tau": 0.3,
    "prm_steps": 100,
    "prm_lr": 1e-3,
    "prm_batch": 128,
}


def op(name: str) -> int:
    return dsl.OP_NAMES.index(name)


def test_every_op_does_what_its_name_says() -> None:
    s = "abc dEf"
    expected = {
        "upper": "ABC DEF",
        "lower": "abc def",
        "reverse": "fEd cba",
        "dup": "abc dEfabc dEf",
        "first_word": "abc",
        "take(2)": "ab",
        "drop(3)": " dEf",
        "append('#')": "abc dEf#",
        "prepend('@')": "@abc dEf",
        "replace('a','#')": "#bc dEf",
        "replace(' ','b')": "abcbdEf",
    }
    for name, out in expected.items():
        assert dsl.apply(op(name), s) == out, name
    assert dsl.apply(dsl.END, s) == s and len(dsl.OPS) == 31 and dsl.N_ACTIONS == 32
    assert len(dsl.apply(op("dup"), "x" * 20)) == dsl.MAX_LEN  # cut after every op
    assert dsl.execute([op("upper"), dsl.END, op("reverse")], "ab") == "AB"  # END stops


def test_tasks_are_their_programs_on_their_inputs_and_every_op_counts() -> None:
    rng = np.random.default_rng(0)
    for length in (1, 2, 3, 4):
        tasks = dsl.make_tasks(rng, length, 30)
        assert len({(t.inputs, t.outputs) for t in tasks}) == 30
        for t in tasks:
            assert t.length == length and len(t.inputs) == dsl.EXAMPLES
            assert all(4 <= len(x) <= 8 and set(x) <= set(dsl.LETTERS + " ") for x in t.inputs)
            assert tuple(dsl.execute(t.program, x) for x in t.inputs) == t.outputs
            assert t.outputs != t.inputs and all(t.outputs)
    seen = {(t.inputs, t.outputs) for t in tasks}
    fresh = dsl.make_tasks(np.random.default_rng(0), 4, 30, seen)
    assert not seen & {(t.inputs, t.outputs) for t in fresh}


def test_encoding_and_edit_distance() -> None:
    ids = dsl.encode(["ab", "", "#" * dsl.MAX_LEN])
    assert ids.shape == (3, dsl.MAX_LEN) and ids[0, :3].tolist() == [1, 2, 0]
    assert (ids[1] == 0).all() and (ids[2] == dsl.CHARS.index("#") + 1).all()
    assert dsl.edit_distance("kitten", "sitting") == 3 and dsl.edit_distance("", "abc") == 3
    assert dsl.distance(["ab", "abcd"], ["ab", "abce"]) == pytest.approx(0.125)


def test_greedy_rollouts_report_what_executing_their_program_gives() -> None:
    torch.manual_seed(0)
    policy = P.Policy(32)
    tasks = dsl.make_tasks(np.random.default_rng(1), 1, 40)
    tasks[0] = dsl.Task((), ("abcd",) * 4, ("abcd",) * 4)  # solved at the root: END solves it
    traj = P.rollout(policy, P.root_nodes(tasks), greedy=True)
    programs = [[] for _ in tasks]
    for rows, act in zip(traj.rows, traj.actions, strict=True):
        for r, a in zip(rows, act.tolist(), strict=True):
            programs[r].append(a)
    for task, prog, ok in zip(tasks, programs, traj.success, strict=True):
        assert prog[-1] == dsl.END and len(prog) <= dsl.MAX_OPS + 1
        assert ok == (tuple(dsl.execute(prog, x) for x in task.inputs) == task.outputs)
    logits, _ = policy(P.Nodes([["a"] * 4], [("a",) * 4], np.array([0]), np.array([4])).tensors())
    assert logits.argmax(-1).item() == dsl.END and logits[0, :-1].max() < -1e8  # budget spent


def test_gae_and_prm_step_rewards_follow_hand_worked_values() -> None:
    # one rollout, two decisions (an op, then END) that solve the task
    t = {"x": torch.zeros(1)}
    traj = P.Trajectories(
        [t, t],
        [torch.tensor([3]), torch.tensor([dsl.END])],
        [torch.zeros(1), torch.zeros(1)],
        [np.array([0]), np.array([0])],
        [np.zeros((1, 4, 2)), np.zeros((1, 4, 2))],
        np.array([True]),
    )
    rewards = O.step_rewards(traj, None, 0.5)
    assert [r.tolist() for r in rewards] == [[0.0], [1.0]]
    adv, ret = O.gae(traj, rewards, [np.array([0.5]), np.array([0.8])], lam=0.95)
    # delta_2 = 1 - 0.8 = 0.2; delta_1 = 0 + 0.8 - 0.5 = 0.3; A_1 = 0.3 + 0.95 * 0.2
    assert adv.tolist() == pytest.approx([0.49, 0.2]) and ret.tolist() == pytest.approx([0.99, 1.0])

    class Scores(torch.nn.Module):
        def forward(self, t, act, fb):
            return act.double()  # score = op id

    shaped = O.step_rewards(traj, Scores(), 0.5)  # scores 3 and 31: z = -1, +1
    assert np.concatenate(shaped).tolist() == pytest.approx([-0.5, 1.5])
    # node-centred: scores minus node baselines 1 and 31 -> 2 and 0, scaled by their sd 1
    centred = O.step_rewards(traj, Scores(), 0.5, [np.array([1.0]), np.array([31.0])])
    assert np.concatenate(centred).tolist() == pytest.approx([1.0, 1.0])


def test_node_baselines_average_the_prm_over_the_policy_steps() -> None:
    class Scores(torch.nn.Module):
        def forward(self, t, act, fb):
            return act.double()  # score = op id

    class Fixed(torch.nn.Module):  # all mass on op 5, END once the op budget is spent
        def forward(self, t):
            logits = torch.full((len(t["step"]), dsl.N_ACTIONS), -1e9)
            last = t["step"] >= dsl.MAX_OPS
            logits[~last, 5] = 0.0
            logits[last, dsl.END] = 0.0
            return logits, torch.zeros(len(t["step"]))

    rng = np.random.default_rng(0)
    tasks = dsl.make_tasks(rng, 1, 3)
    traj = P.rollout(Fixed(), P.root_nodes(tasks), torch.Generator().manual_seed(0))
    assert len(traj.nodes) == len(traj.actions) == dsl.MAX_OPS + 1
    base = O.node_baselines(traj, Scores(), Fixed(), 3, torch.Generator().manual_seed(1))
    assert [b.tolist() for b in base] == [[float(a[0])] * len(a) for a in traj.actions]
    # the policy's own step is its node's mean: every centred PRM term is 0
    rewards = O.step_rewards(traj, Scores(), 0.5, base)
    outcome = O.step_rewards(traj, None, 0.5)
    for r, o in zip(rewards, outcome, strict=True):
        np.testing.assert_allclose(r, o)


def test_sft_learns_one_op_tasks_and_the_trees_give_a_prm_that_orders_pairs() -> None:
    rng = np.random.default_rng(2)
    tasks = dsl.make_tasks(rng, 1, 150)
    torch.manual_seed(2)
    policy = P.Policy(CFG["hidden"])
    before = P.pass_at_1(policy, tasks).mean()
    P.sft(policy, tasks, CFG, 2)
    assert P.pass_at_1(policy, tasks).mean() > max(0.8, before + 0.5)
    tree = tasks[:40] + dsl.make_tasks(rng, 2, 40)
    pairs = R.build_pairs(policy, tree, CFG, torch.Generator().manual_seed(0))
    assert len(pairs.better) > 50 and (pairs.gap >= CFG["tau"]).all()
    assert (pairs.better != pairs.worse).all()
    held = pairs.task % 5 == 0
    prm = R.train_prm(pairs, np.flatnonzero(~held), CFG, 0)
    assert R.pair_accuracy(prm, pairs, np.flatnonzero(held)) > 0.7


def test_the_bench_runs_every_arm_and_reads_the_claim(tmp_path) -> None:
    from neuroedge.models.prm_pbe.experiment import ARMS, bench

    small = {
        "seed": 0,
        "train_tasks": 150,
        "test_tasks": 30,
        "hidden": 64,
        "sft_epochs": 10,
        "tree_tasks": 10,
        "prm_steps": 20,
        "updates": 6,
        "tasks_per_update": 16,
    }
    doc = bench(str(tmp_path), config=small)
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert set(rows) == {"sft", "reward_model", *ARMS}
    # imitation of length-1 programs works (test_sft_learns_... checks how well)
    assert rows["sft"]["pass1_len1"]["value"] > rows["sft"]["pass1_len4"]["value"] + 0.1
    assert rows["reward_model"]["pairs"]["value"] > 0
    assert set(doc["claim"]["parts"]) == {
        "a_prm_pair_accuracy",
        "b_c_ge_b_ge_a_and_c_minus_a",
        "c_every_arm_above_warm_start",
    }
    assert (
        json.loads((tmp_path / "report.json").read_text())["claim"]["parts"]
        == doc["claim"]["parts"]
    )
    assert (tmp_path / "pass_at_1.png").stat().st_size > 10_000
    assert "## Claim over seeds [0]: " in (tmp_path / "report.md").read_text()


def test_top1_solves_reads_the_prm_best_step_over_all_actions() -> None:
    tasks = dsl.make_tasks(np.random.default_rng(5), 1, 30)

    class Closest(torch.nn.Module):  # the step that reaches the targets scores highest
        def forward(self, t, op, fb_after):
            return -fb_after[..., 0].mean(1)

    class AlwaysEnd(torch.nn.Module):
        def forward(self, t, op, fb_after):
            return (op == dsl.END).float()

    assert R.top1_solves(Closest(), tasks) == 1.0
    assert R.top1_solves(AlwaysEnd(), tasks) == 0.0
