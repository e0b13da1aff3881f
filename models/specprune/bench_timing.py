"""Timing and export of the vla.specprune benchmark methods.

Observation sequences recorded from expert rollouts, end-to-end latency of every method side
by side on them (eager and the exported ONNX graphs), the per-method ONNX exports, and the
export parity check against eager.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.specprune.bench_variants import base_method
from neuroedge.models.specprune.data import CHUNK, EVAL_SEED0
from neuroedge.models.specprune.functional import PruneConfig
from neuroedge.models.specprune.policy import PrunedPolicy, torch_engine
from neuroedge.models.specprune.sim import MAX_STEPS, ManipulationEnv


def record_observations(tasks: Sequence[str], per_task: int = 12) -> list[list[dict]]:
    """Observation sequences at query steps of expert rollouts, for side-by-side latency."""
    sequences = []
    for name in tasks:
        with ManipulationEnv(name) as env:
            obs, seq = env.reset(EVAL_SEED0 + 999), []
            for step in range(min(MAX_STEPS, per_task * CHUNK)):
                if step % CHUNK == 0:
                    seq.append(obs)
                obs, _ = env.step(env.expert_action(), with_images=(step + 1) % CHUNK == 0)
            sequences.append(seq)
    return sequences


def latency_side_by_side(
    policies: Mapping[str, PrunedPolicy], sequences: list[list[dict]], repeats: int
) -> dict[str, Any]:
    from neuroedge.bench.latency import measure_side_by_side

    flat = [obs for seq in sequences for obs in seq]
    cursor = {name: 0 for name in policies}

    def make(name: str, policy: PrunedPolicy):
        def call() -> None:
            i = cursor[name] % len(flat)
            if i == 0 or flat[i]["instruction"] != flat[i - 1]["instruction"]:
                policy.reset()
            policy.plan(flat[i])
            cursor[name] += 1

        return call

    return measure_side_by_side(
        {n: make(n, p) for n, p in policies.items()}, repeats=repeats, warmup=3, block=5
    )


def parity_onnx(
    model: Any, prune: PruneConfig, sequences: list[list[dict]], out_dir: Path
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
        for seq in sequences:
            for p in (exported, eager):
                p.reset()
                p.state = p.state._replace(mode=mode)
            for obs in seq:
                worst = max(worst, float(np.abs(exported.plan(obs) - eager.plan(obs)).max()))
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
    sequences: list[list[dict]],
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
