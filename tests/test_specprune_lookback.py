"""vla.specprune: the dynamic set's reference frame is T(v) env steps back (paper eq. 3).

Frames are gray with one red patch whose index names the env step it was seen at, so the
dynamic set (the patches that changed against the reference frame) says which frame the
policy compared with. The first implementation kept only the frames of past queries and
compared with the previous one (8 steps back) at every speed; ``lookback="chunk"`` keeps that.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from neuroedge.models.specprune import functional as fn
from neuroedge.models.specprune.functional import PruneConfig

INSTRUCTION = "press the red button down"


def mark(step: int) -> int | None:
    """The red patch of the frame at env ``step`` (the query frame at 16 has none)."""
    return {0: 63, 8: 40, 16: None}.get(step, step)


def frame(step: int) -> np.ndarray:
    image = np.full((64, 64, 3), 100, np.uint8)
    patch = mark(step)
    if patch is not None:
        row, col = divmod(patch, 8)
        image[8 * row : 8 * row + 8, 8 * col : 8 * col + 8] = (250, 0, 0)
    return image


def hand_at(step: int, speed: float) -> np.ndarray:
    """Hand position (m): still over the first chunk, then ``speed`` cm/step along x."""
    return np.array([0.01 * speed * max(0, step - 8), 0.6, 0.2, 1.0], np.float32)


def observation(step: int, speed: float, images: bool = True) -> dict:
    obs = {"proprio": hand_at(step, speed), "instruction": INSTRUCTION}
    if images:
        obs.update(primary=frame(step), wrist=frame(step))
    return obs


def stub_policy(lookback: str = "speed", method: str = "specprune"):
    """A PrunedPolicy over an engine that records each prior and returns a zero chunk of 8."""
    from neuroedge.models.specprune.policy import PrunedPolicy

    priors = []

    def engine(mode, inputs):
        priors.append(inputs["prior"][0].copy())
        return np.zeros((1, 8, 4), np.float32), np.zeros((1, 128), np.float32)

    cfg = PruneConfig(k_global=0, lookback=lookback)
    return PrunedPolicy(engine, method, cfg, controller=False), priors


def changed(prior: np.ndarray) -> list[list[int]]:
    """The dynamic set per view, as patch indices."""
    return [np.flatnonzero(prior[:64]).tolist(), (np.flatnonzero(prior[64:])).tolist()]


def expected(query: int, reference: int) -> list[list[int]]:
    both = sorted({mark(query), mark(reference)} - {None})
    return [both, both]


def run_every_step(policy, speed: float, steps: int = 17) -> None:
    """select_action at env steps 0..steps-1, images at every step (a robot stack)."""
    for step in range(steps):
        policy.select_action(observation(step, speed))


def run_on_demand(policy, speed: float, steps: int = 17) -> list[int]:
    """As bench.rollout: images at re-plans only, the asked-for earlier frame handed over."""
    asked = []
    for step in range(steps):
        obs = observation(step, speed, images=step % 8 == 0)
        past = policy.missing_reference(obs)
        if past is not None:
            asked.append(past)
            policy.add_frame(past, {"primary": frame(past), "wrist": frame(past)})
        policy.select_action(obs)
    return asked


@pytest.mark.parametrize("feed", [run_every_step, run_on_demand])
@pytest.mark.parametrize("speed", [0.0, 0.5, 1.0, 3.0])
def test_dynamic_set_comes_from_the_frame_t_of_v_steps_back(feed, speed):
    policy, priors = stub_policy()
    feed(policy, speed)
    back = fn.lookback_steps(speed)  # 11, 8, 6, 6 env steps
    assert len(priors) == 3  # inferences at env steps 0, 8 and 16
    assert changed(priors[0]) == [[], []]  # nothing earlier at the episode start
    assert changed(priors[1]) == expected(8, 0)  # 8 - T < 0: clamped to the episode start
    assert changed(priors[2]) == expected(16, 16 - back)
    assert policy.lookbacks == [0, 8, back]
    # the first implementation compared with the query frame at step 8 at every speed
    assert (changed(priors[2]) == expected(16, 8)) == (back == 8)


def test_slow_and_fast_hands_compare_with_different_frames():
    seen = {}
    for speed in (0.0, 1.0):
        policy, priors = stub_policy()
        asked = run_on_demand(policy, speed)
        seen[speed] = changed(priors[2])[0]
        assert asked == [16 - fn.lookback_steps(speed)]  # step 8 clamps to the held frame 0
    assert seen == {0.0: [5], 1.0: [10]}


def test_chunk_lookback_compares_with_the_previous_query_at_every_speed():
    for speed in (0.0, 0.5, 1.0, 3.0):
        for feed in (run_every_step, run_on_demand):
            policy, priors = stub_policy("chunk")
            feed(policy, speed)
            assert changed(priors[1]) == expected(8, 0)
            assert changed(priors[2]) == expected(16, 8)
            assert policy.lookbacks == [0, 8, 8]
            assert set(policy.frames) <= {0, 8, 16}  # query frames only
            assert policy.missing_reference(observation(24, speed)) is None


def test_only_specprune_with_the_speed_lookback_holds_frames_between_queries():
    for method, lookback in (("unpruned", "speed"), ("fastv", "speed"), ("specprune", "chunk")):
        policy, _ = stub_policy(lookback, method)
        assert run_on_demand(policy, 0.0) == []
        assert all(step % 8 == 0 for step in policy.frames)


def test_frames_beyond_any_later_lookback_are_dropped():
    policy, _ = stub_policy()
    run_every_step(policy, 0.0, steps=41)  # inferences at 0, 8, ..., 40
    assert min(policy.frames) >= 40 + 8 - 11 and max(policy.frames) == 40
    assert set(policy.patches) <= set(policy.frames)


def test_a_replanning_caller_without_frames_gets_the_nearest_one():
    """plan() alone (no select_action clock): queries one chunk apart, only their frames."""
    policy, priors = stub_policy()
    for step in (0, 8, 16):
        policy.plan(observation(step, 0.0))
    assert policy.queries == [0, 8, 16]
    assert policy.lookbacks == [0, 8, 8]  # T = 11: the query frame at 8 is the nearest to 5
    assert changed(priors[2]) == expected(16, 8)


def test_replay_of_a_recording_matches_the_episode_loop():
    """The timing and parity replays (bench_timing.replay_query) run each inference as the
    episode loop does: same reference frames, same priors."""
    from neuroedge.models.specprune.bench_timing import Recording, referable, replay_query

    for speed in (0.0, 1.0):
        steps = range(24)
        recording = Recording(
            [observation(s, speed) for s in steps if s % 8 == 0],
            {s: {"primary": frame(s), "wrist": frame(s)} for s in steps if referable(s)},
        )
        replayed, priors = stub_policy()
        for k in range(3):
            replay_query(replayed, recording, k)
        episode, episode_priors = stub_policy()
        run_on_demand(episode, speed, steps=17)
        assert replayed.lookbacks == episode.lookbacks == [0, 8, fn.lookback_steps(speed)]
        assert all(np.array_equal(a, b) for a, b in zip(priors, episode_priors, strict=True))


def test_latency_replay_runs_every_method_on_recordings():
    from neuroedge.models.specprune.bench_timing import Recording, latency_side_by_side

    recording = Recording(
        [observation(s, 1.0) for s in (0, 8, 16)],
        {s: {"primary": frame(s), "wrist": frame(s)} for s in range(17)},
    )
    policies = {m: stub_policy(method=m)[0] for m in ("unpruned", "specprune")}
    timings = latency_side_by_side(policies, [recording, recording], repeats=5)
    assert set(timings) == {"unpruned", "specprune"}
    assert set(policies["specprune"].lookbacks) == {0, 8, 6}  # as in an episode
    assert policies["unpruned"].lookbacks == []


def test_lookback_value_is_checked_early_and_named():
    from neuroedge.errors import ConfigError
    from neuroedge.models.specprune.bench_checks import check_bench_config
    from neuroedge.models.specprune.spec import SPEC

    with pytest.raises(ValueError, match=r"lookback='fast'.*'speed'.*'chunk'"):
        PruneConfig(lookback="fast")
    for bad in ("fast", ["speed"], 1):
        with pytest.raises(ConfigError, match=r"config lookback=.*'speed' \(.*'chunk' \("):
            check_bench_config({"lookback": bad}, ("host",))
    check_bench_config({"lookback": "chunk"}, ("host",))
    SPEC.check_config({"lookback": "chunk"}, "bench")  # a known bench key


def test_bench_configs_carry_the_lookback():
    from neuroedge.models.specprune.bench import main_configs
    from neuroedge.models.specprune.bench_variants import sweep_configs

    for value in ("speed", "chunk"):
        prune, budget, configs = main_configs({"lookback": value, "baseline_budget": 31}, 128)
        assert prune.lookback == value and budget == 31
        assert {c.lookback for c in configs.values()} == {value}
        assert configs["fastv"].budget("coarse") == configs["fastv"].budget("fine") == 31
        assert {c.lookback for c in sweep_configs([8], 128, value).values()} == {value}
    assert main_configs({}, 128)[0] == PruneConfig()  # default: the paper's look-back


def test_report_notes_name_the_lookback_and_the_baseline_budget():
    from neuroedge.bench.latency import Latency
    from neuroedge.models.specprune.bench_report import row

    result = {"per_task": {"button": 0.5}, "kept": 31.0, "fine_fraction": 0.25}
    lat = Latency((5.0,) * 5, 1)
    spec = row(
        "specprune",
        {**result, "lookback": "speed", "lookbacks": [6, 8, 11]},
        lat,
        9.0,
        2.6e8,
        [128, 128] + [32] * 6,
        31,
        "onnxrt",
        "onnxrt",
    )
    assert any(
        "lookback=speed" in n and "8.3 env steps back (min 6, max 11)" in n for n in spec.notes
    )
    fastv = row("fastv", result, lat, 9.0, 2.67e8, [128, 128] + [31] * 6, 31, "onnxrt", "onnxrt")
    assert any("baseline_budget=31 visual tokens after layer 1" in n for n in fastv.notes)
    assert not any("fine-mode budget" in n for n in fastv.notes)


def test_exported_policy_keeps_its_lookback(tmp_path):
    import json

    from neuroedge.models.specprune.deploy import export_policy, load_policy
    from neuroedge.models.specprune.train import DEFAULTS, make_policy

    model = make_policy({**DEFAULTS, "dim": 32, "heads": 2, "depth": 3, "ffn": 64}).eval()
    for value in ("speed", "chunk"):
        export_policy(model, tmp_path / value, "host", prune=PruneConfig(lookback=value))
        assert load_policy(tmp_path / value, "host").prune.lookback == value
    manifest = json.loads((tmp_path / "speed" / "policy.json").read_text())
    del manifest["prune"]["lookback"]  # written before the key existed
    (tmp_path / "speed" / "policy.json").write_text(json.dumps(manifest))
    assert load_policy(tmp_path / "speed", "host").prune.lookback == "chunk"


def picture(episode: int, step: int) -> np.ndarray:
    """A camera frame of its own for each (episode, env step)."""
    return np.random.default_rng([episode, step]).integers(0, 256, (64, 64, 3), np.uint8)


def hashing_policy():
    """A SpecPrune policy (controller on) over an engine whose actions and scores are a fixed
    function of its mode and inputs, as a network's are; it records each (mode, prior)."""
    from neuroedge.models.specprune.policy import PrunedPolicy

    calls = []

    def engine(mode, inputs):
        digest = hashlib.sha256(mode.encode())
        for key in sorted(inputs):
            digest.update(np.ascontiguousarray(inputs[key]).tobytes())
        rng = np.random.default_rng(int.from_bytes(digest.digest()[:8], "little"))
        calls.append((mode, inputs["prior"][0].copy()))
        return rng.uniform(-1, 1, (1, 8, 4)).astype(np.float32), rng.random((1, 128), np.float32)

    return PrunedPolicy(engine, "specprune", PruneConfig(), controller=True), calls


def play(policy, episode: int, steps: int) -> tuple[np.ndarray, list[int]]:
    """Episode 0 (A): images at every step, the hand descending 1 mm/step (fine mode from the
    second inference). Episode 1 (B): as bench.rollout, images at re-plans only and the
    asked-for earlier frame handed over, the hand still 4 mm below A's last inference's."""
    actions, asked = [], []
    for step in range(steps):
        z = 0.2 - 0.001 * step if episode == 0 else 0.18
        obs = {"proprio": np.array([0.0, 0.6, z, 1.0], np.float32), "instruction": INSTRUCTION}
        if episode == 0 or step % 8 == 0:
            obs.update(primary=picture(episode, step), wrist=picture(episode, step)[::-1])
        past = policy.missing_reference(obs)
        if past is not None:
            asked.append(past)
            earlier = picture(episode, past)
            policy.add_frame(past, {"primary": earlier, "wrist": earlier[::-1]})
        actions.append(policy.select_action(obs))
    return np.array(actions), asked


def test_reset_starts_the_next_episode_as_a_fresh_policy():
    """bench.rollout reuses one policy per cell and calls reset() before each episode; after
    it, episode B runs as on a new policy: no global set from A's last scores, coarse mode
    (not A's fine), no speed measured from A's last hand, no A frame at B's look-back target
    13 (B asks for its own), B's clock from step 0."""
    used, used_calls = hashing_policy()
    play(used, 0, 17)  # inferences at 0, 8 and 16
    assert used.modes == ["coarse", "fine", "fine"] and sorted(used.frames) == [13, 14, 15, 16]
    used.reset()
    used_calls.clear()
    actions, asked = play(used, 1, 25)
    fresh, fresh_calls = hashing_policy()
    fresh_actions, fresh_asked = play(fresh, 1, 25)
    assert fresh.modes == ["coarse", "fine", "fine", "fine"]
    assert fresh.lookbacks == [0, 8, 11, 11] and fresh_asked == [5, 13]  # T(0) = 11
    assert not fresh_calls[0][1].any()  # no previous inference: no global set

    assert used.modes == fresh.modes and [m for m, _ in used_calls] == fresh.modes
    assert (used.lookbacks, asked) == (fresh.lookbacks, fresh_asked)
    assert len(used_calls) == len(fresh_calls) == 4
    for k, ((_, prior), (_, fresh_prior)) in enumerate(zip(used_calls, fresh_calls)):
        assert np.array_equal(prior, fresh_prior), f"inference {k}: prior differs"
    np.testing.assert_array_equal(actions, fresh_actions)
    assert used.kept == fresh.kept
