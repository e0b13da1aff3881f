"""vla.specprune's Meta-World benchmark: observations, expert, success detection, a rollout."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

# find_spec, not importorskip: importing metaworld loads mujoco, which fixes its GL platform at
# import time; sim.py must set MUJOCO_GL=egl first.
if importlib.util.find_spec("metaworld") is None or importlib.util.find_spec("torch") is None:
    pytest.skip("metaworld==3.1.1 and torch are needed", allow_module_level=True)

from neuroedge.models.specprune.data import CHUNK, tokenize
from neuroedge.models.specprune.sim import (
    ACTION_DIM,
    TASKS,
    ManipulationEnv,
    check_observation,
    task,
)


def test_observation_has_two_views_proprio_and_instruction():
    with ManipulationEnv("drawer") as env:
        obs = env.reset(seed=3)
        check_observation(obs)
        assert obs["instruction"] == TASKS["drawer"].instruction
        assert obs["primary"].std() > 5 and obs["wrist"].std() > 5  # rendered, not blank
        assert not np.array_equal(obs["primary"], obs["wrist"])
        assert tokenize(obs["instruction"]).shape == (8,)


def test_layout_depends_on_the_seed_and_repeats_with_it():
    with ManipulationEnv("button", render=False) as env:
        env.reset(seed=1, with_images=False)
        a = env.env._last_rand_vec.copy()
        env.reset(seed=2, with_images=False)
        b = env.env._last_rand_vec.copy()
        env.reset(seed=1, with_images=False)
        assert np.allclose(a, env.env._last_rand_vec) and not np.allclose(a, b)


def test_scripted_expert_succeeds_and_random_arm_does_not():
    with ManipulationEnv("drawer", render=False) as env:
        env.reset(seed=5, with_images=False)
        success = False
        while not success and not env.done_by_time:
            _, success = env.step(env.expert_action(), with_images=False)
        assert success and env.steps < 120
        env.reset(seed=5, with_images=False)
        rng = np.random.default_rng(0)
        idle = [
            env.step(rng.uniform(-0.05, 0.05, ACTION_DIM), with_images=False)[1] for _ in range(20)
        ]
        assert not any(idle)


def test_short_closed_loop_rollout_with_specprune_policy():
    import torch
    from neuroedge.models.specprune.functional import PruneConfig
    from neuroedge.models.specprune.policy import PrunedPolicy, torch_engine
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    torch.manual_seed(0)
    policy = PrunedPolicy(
        torch_engine(make_policy(DEFAULTS).eval(), "specprune", PruneConfig()),
        "specprune",
        PruneConfig(),
    )
    with ManipulationEnv("button") as env:
        obs = env.reset(seed=7)
        start = obs["proprio"].copy()
        for _ in range(2 * CHUNK):
            obs, _ = env.step(policy.select_action(obs))
    assert len(policy.kept) == 2 and policy.kept[0] == PruneConfig().budget_coarse
    assert not np.allclose(start, obs["proprio"])  # the arm moved under the policy


def test_unknown_task_and_bad_action_are_refused():
    with pytest.raises(ValueError, match="unknown task 'stack'; valid tasks: button, drawer"):
        task("stack")
    with ManipulationEnv("reach", render=False) as env:
        env.reset(seed=0, with_images=False)
        with pytest.raises(ValueError, match="action must be 4 finite numbers"):
            env.step(np.array([0, np.nan, 0, 0]))


def test_view_ablation_feeds_the_policy_a_gray_camera_and_only_that_camera():
    from neuroedge.models.specprune import bench
    from neuroedge.models.specprune.functional import PruneConfig

    seen = []

    class Recorder:  # stands in for PrunedPolicy: records the views each re-plan is given
        def reset(self):
            self.queue = []

        def missing_reference(self, obs):  # asks for no earlier frame
            return None

        def select_action(self, obs):
            if not self.queue:  # a re-plan: the only steps with fresh images
                seen.append({cam: np.asarray(obs[cam]).copy() for cam in ("primary", "wrist")})
                self.queue = [np.zeros(4, dtype=np.float32)] * CHUNK
            return self.queue.pop()

    with ManipulationEnv("reach") as env:
        bench.rollout(env, Recorder(), seed=3, blank_view="wrist")
        blanked = seen[:]
        seen.clear()
        bench.rollout(env, Recorder(), seed=3)
    assert blanked and all((s["wrist"] == bench.BLANK_VALUE).all() for s in blanked)
    assert all(np.array_equal(a["primary"], b["primary"]) for a, b in zip(blanked, seen))
    assert not (seen[0]["wrist"] == bench.BLANK_VALUE).all()  # the real view is not gray
    cfg = PruneConfig()
    assert list(bench.ablation_configs(["wrist", "primary", "wrist"], cfg)) == [
        "unpruned@blank=wrist",
        "unpruned@blank=primary",
    ]
    assert bench.base_method("unpruned@blank=wrist") == "unpruned"
    assert bench.blanked_view("unpruned@blank=primary") == "primary"
    assert bench.blanked_view("fastv@budget=8") is None
    with pytest.raises(ValueError, match=r"\['top'\] are not cameras"):
        bench.ablation_configs(["top"], cfg)
    with pytest.raises(ValueError, match="list of camera names"):
        bench.ablation_configs("wrist", cfg)


def test_frames_at_renders_an_earlier_step_exactly_as_it_was_seen():
    with ManipulationEnv("button") as env:
        live = {0: env.reset(seed=4)}
        for step in range(1, 8):
            obs, _ = env.step(env.expert_action(), with_images=step in (3, 7))
            if step in (3, 7):
                live[step] = obs
        for step, obs in live.items():
            frames = env.frames_at(step)
            assert all(np.array_equal(frames[cam], obs[cam]) for cam in ("primary", "wrist"))
        assert not np.array_equal(env.frames_at(0)["wrist"], live[7]["wrist"])  # it moved
        with pytest.raises(ValueError, match=r"step 8: this episode has steps 0\.\.7"):
            env.frames_at(8)


def test_rollout_hands_the_policy_the_frame_t_of_v_steps_back():
    """A full episode of bench.rollout with SpecPrune's speed look-back (a stub network that
    moves the hand fast and slow in turn): every inference compared with the frame exactly
    T(v) env steps back, v measured from the hand positions the network was given."""
    from neuroedge.models.specprune import bench
    from neuroedge.models.specprune.functional import PruneConfig, lookback_steps
    from neuroedge.models.specprune.policy import PrunedPolicy

    hands = []

    def engine(mode, inputs):
        hands.append(inputs["proprio"][0, :3].astype(np.float64))
        speed = 1.0 if len(hands) % 2 else 0.05
        actions = np.zeros((1, CHUNK, 4), np.float32)
        actions[0, :, 0] = speed * (-1) ** (len(hands) // 2)
        return actions, np.zeros((1, 128), np.float32)

    policy = PrunedPolicy(engine, "specprune", PruneConfig())
    with ManipulationEnv("reach") as env:
        bench.rollout(env, policy, seed=2)
    speeds = [100 * np.linalg.norm(b - a) / CHUNK for a, b in zip(hands, hands[1:])]
    want = [min(8 * (k + 1), lookback_steps(v)) for k, v in enumerate(speeds)]
    assert policy.lookbacks == [0, *want]
    assert len(set(want)) > 1  # the look-back did depend on the speed
