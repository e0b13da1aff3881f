"""Timing and export of the vla.specprune benchmark methods.

Observation sequences recorded from expert rollouts, end-to-end latency of every method side
by side on them (eager and the exported ONNX graphs), the per-method ONNX exports, and the
export parity check against eager.

The timing and parity replays run each inference as a closed-loop episode does
(``replay_query``, as bench.rollout): the policy's clock at the recorded env step, and a
SpecPrune re-plan with the speed look-back handed the frame T(v) env steps back first, so the
dynamic set, the controller and the timed work are those of an episode. One timed call is one
inference with that bookkeeping (the frame hand-over is part of SpecPrune's cost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from neuroedge.models.specprune.bench_variants import base_method
from neuroedge.models.specprune.data import CHUNK, EVAL_SEED0
from neuroedge.models.specprune.functional import PruneConfig, lookback_range
from neuroedge.models.specprune.policy import PrunedPolicy, torch_engine
from neuroedge.models.specprune.sim import CAMERAS, MAX_STEPS, ManipulationEnv


class Recording(NamedTuple):
    """One expert rollout: the observations at the query steps (every CHUNK-th env step from
    0) and the camera frames of every env step a speed look-back can reach."""

    queries: list[dict[str, Any]]
    frames: dict[int, dict[str, np.ndarray]]


def referable(step: int) -> bool:
    """Whether the frame of env ``step`` can be a query's reference: a query step itself, or
    T in [T_min, T_max] steps before one (6 of every 8 steps; the others are not rendered)."""
    low, high = lookback_range()
    return step % CHUNK == 0 or any((step + t) % CHUNK == 0 for t in range(low, high + 1))


def record_observations(tasks: Sequence[str], per_task: int = 12) -> list[Recording]:
    """One recorded expert rollout per task, ``per_task`` queries long, for the replays."""
    recordings = []
    for name in tasks:
        with ManipulationEnv(name) as env:
            obs, queries, frames = env.reset(EVAL_SEED0 + 999), [], {}
            for step in range(min(MAX_STEPS, per_task * CHUNK)):
                if referable(step):
                    frames[step] = {cam: obs[cam] for cam in CAMERAS}
                if step % CHUNK == 0:
                    queries.append(obs)
                obs, _ = env.step(env.expert_action(), with_images=referable(step + 1))
            recordings.append(Recording(queries, frames))
    return recordings


def replay_query(policy: PrunedPolicy, recording: Recording, k: int) -> np.ndarray:
    """Inference ``k`` of ``recording`` (env step k * CHUNK) as an episode runs it: the
    reference frame a speed look-back asks for is handed over, then the policy plans. The
    caller resets the policy before k = 0."""
    obs = recording.queries[k]
    past = policy.missing_reference(obs)
    if past is not None:
        policy.add_frame(past, recording.frames[past])
    return policy.plan(obs)


def latency_side_by_side(
    policies: Mapping[str, PrunedPolicy], sequences: Sequence[Recording], repeats: int
) -> dict[str, Any]:
    from neuroedge.bench.latency import measure_side_by_side

    flat = [(rec, k) for rec in sequences for k in range(len(rec.queries))]
    cursor = {name: 0 for name in policies}

    def make(name: str, policy: PrunedPolicy):
        def call() -> None:
            rec, k = flat[cursor[name] % len(flat)]
            if k == 0:  # a new episode
                policy.reset()
            replay_query(policy, rec, k)
            cursor[name] += 1

        return call

    return measure_side_by_side(
        {n: make(n, p) for n, p in policies.items()}, repeats=repeats, warmup=3, block=5
    )


def parity_onnx(
    model: Any, prune: PruneConfig, sequences: Sequence[Recording], out_dir: Path
) -> dict[str, Any]:
    """Export both controller modes to ONNX and compare actions with eager on real frames."""
    from neuroedge.models.specprune.deploy import export_policy, load_policy

    export_policy(model, out_dir, "onnxrt", prune=prune)
    diffs = {}
    for mode in ("coarse", "fine"):
        exported = load_policy(out_dir, "onnxrt", controller=False)
        eager = PrunedPolicy(
            torch_engine(model, "specprune", prune), "specprune", prune, controller=False
        )
        worst = 0.0
        for rec in sequences:
            for p in (exported, eager):
                p.reset()
                p.state = p.state._replace(mode=mode)
            for k in range(len(rec.queries)):
                a, b = replay_query(exported, rec, k), replay_query(eager, rec, k)
                worst = max(worst, float(np.abs(a - b).max()))
        diffs[mode] = worst
    return {"policy_dir": str(out_dir), "max_abs_err": diffs}


def export_methods(model: Any, configs: Mapping[str, PruneConfig], out_dir: Path) -> dict[str, str]:
    """Every method exported for ONNX Runtime (one static graph per controller mode)."""
    from neuroedge.models.specprune.deploy import export_policy

    return {
        m: str(export_policy(model, out_dir / m, "onnxrt", method=base_method(m), prune=configs[m]))
        for m in configs
    }


def time_methods(
    model: Any,
    configs: Mapping[str, PruneConfig],
    sources: Mapping[str, str],
    sequences: Sequence[Recording],
    backends: Sequence[str],
    repeats: int,
) -> dict[str, dict[str, Any]]:
    """End-to-end latency of every method in ``configs`` (labels such as
    ``specprune@candidate=0`` too), eager and (if asked) the exported ONNX graphs."""
    import copy

    policies = {
        m: PrunedPolicy(
            torch_engine(copy.deepcopy(model), base_method(m), configs[m]),
            base_method(m),
            configs[m],
        )
        for m in configs
    }
    timings = {"host": latency_side_by_side(policies, sequences, repeats)}
    if "onnxrt" in backends:
        from neuroedge.models.specprune.deploy import load_policy

        graphs = {m: load_policy(sources[m], "onnxrt") for m in configs}
        timings["onnxrt"] = latency_side_by_side(graphs, sequences, repeats)
    return timings
