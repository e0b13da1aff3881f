"""``neuroedge bench vla.specprune``: success rate, latency, tokens and FLOPs per method.

Rows ``unpruned``, ``specprune``, ``fastv``, ``random``:

* success_rate: closed-loop episodes on unseen layouts (seeds from data.EVAL_SEED0), per task
  and overall; the policy re-plans every CHUNK steps.
* latency_p50/p90/p99_ms: end-to-end policy latency of one inference (observation checks,
  pruning prior, controller, network), all methods timed side by side on the same recorded
  observation sequences (bench.latency.measure_side_by_side).
* visual_tokens_kept: visual tokens entering layer 2 (after the static step), mean over
  inferences; visual_tokens_per_layer: mean over all decoder layers (layer-level pruning too).
* flops_per_inference: counted from the token counts with functional.layer_flops.

FastV and random pruning get SpecPrune's fine-mode budget (config ``baseline_budget``) at every
step, so they never keep fewer visual tokens after layer 1 than SpecPrune does; they have no
layer-level pruning. ``workers`` > 1 evaluates (method, task) cells in parallel processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from neuroedge.models.specprune.data import CHUNK, EVAL_SEED0
from neuroedge.models.specprune.functional import (
    PruneConfig,
    kept_after_dynamic,
    layer_flops,
)
from neuroedge.models.specprune.policy import PrunedPolicy, torch_engine
from neuroedge.models.specprune.sim import MAX_STEPS, ManipulationEnv
from neuroedge.types import Measurement, Report

METHOD_ORDER = ("unpruned", "specprune", "fastv", "random")
COLUMNS = ("success_rate", "latency_p50_ms", "speedup", "visual_tokens_kept",
           "visual_tokens_per_layer", "flops_per_inference")


def rollout(env: ManipulationEnv, policy: PrunedPolicy, seed: int) -> bool:
    """One closed-loop episode; True on Meta-World's success signal."""
    obs, success = env.reset(seed), False
    policy.reset()
    while not success and not env.done_by_time:
        action = policy.select_action(obs)
        need_images = len(policy.queue) == 0  # render only when the next step re-plans
        obs, success = env.step(action, with_images=need_images)
    return success


def decoder_flops(model: Any, static_kept: int | None, prune: PruneConfig | None
                  ) -> tuple[float, list[int]]:
    """Decoder FLOPs of one inference with ``static_kept`` visual tokens after layer 1, and the
    visual tokens each layer processes."""
    cfg = model.config
    dim, ffn, depth = cfg["dim"], cfg["ffn"], cfg["depth"]
    other = 1 + cfg["text_len"] + cfg["chunk"]
    visual = model.n_visual
    counts = [visual] * depth
    if static_kept is not None:
        layers = prune.dynamic_layers if prune is not None else ()
        keep = prune.dynamic_keep if prune is not None else 1.0
        counts = [visual, visual, *kept_after_dynamic(static_kept, layers, keep, depth)]
    return float(sum(layer_flops(n + other, dim, ffn) for n in counts)), counts


def evaluate_job(job: tuple[str, str, dict[str, Any], str, int]) -> dict[str, Any]:
    """One (method, task) cell in its own process: ``(checkpoint, method, prune, task, n)``."""
    import torch
    from neuroedge.models.specprune.train import load_policy_checkpoint

    checkpoint, method, prune_fields, task_name, episodes = job
    torch.set_num_threads(1)  # two threads per process spin on a loaded 2-core machine
    model = load_policy_checkpoint(checkpoint)[0]
    prune = PruneConfig(**prune_fields)
    policy = PrunedPolicy(torch_engine(model, method, prune), method, prune, seed=1)
    wins, kept, modes = 0, [], []
    with ManipulationEnv(task_name) as env:
        for ep in range(episodes):
            wins += rollout(env, policy, EVAL_SEED0 + ep)
            kept += policy.kept
            modes += policy.modes
    return {"method": method, "task": task_name, "wins": wins, "episodes": episodes,
            "kept": kept, "modes": modes}


def evaluate_all(checkpoint: str, configs: Mapping[str, PruneConfig], tasks: Sequence[str],
                 episodes: int, workers: int) -> dict[str, dict[str, Any]]:
    """Success per task and kept-token statistics of every method; cells run in parallel
    processes (spawned: each owns its EGL context) when ``workers`` > 1."""
    from dataclasses import asdict

    from tqdm import tqdm

    jobs = [(checkpoint, m, asdict(configs[m]), t, episodes) for m in METHOD_ORDER for t in tasks]
    with tqdm(total=len(jobs), desc=f"closed-loop cells ({episodes} episodes each)") as bar:
        if workers <= 1:
            cells = [evaluate_job(j) for j in jobs if not bar.update(1)]
        else:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
                cells = []
                for cell in pool.map(evaluate_job, jobs):
                    cells.append(cell)
                    bar.update(1)
    results: dict[str, dict[str, Any]] = {}
    for m in METHOD_ORDER:
        mine = [c for c in cells if c["method"] == m]
        kept = [k for c in mine for k in c["kept"]]
        modes = [x for c in mine for x in c["modes"]]
        results[m] = {"per_task": {c["task"]: c["wins"] / c["episodes"] for c in mine},
                      "kept": float(np.mean(kept)), "kept_all": kept,
                      "fine_fraction": float(np.mean([x == "fine" for x in modes]))}
    return results


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


def latency_side_by_side(policies: Mapping[str, PrunedPolicy], sequences: list[list[dict]],
                         repeats: int) -> dict[str, Any]:
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

    return measure_side_by_side({n: make(n, p) for n, p in policies.items()}, repeats=repeats,
                                warmup=3, block=5)


def speedup_plot(doc: dict[str, Any], path: Path) -> Path:
    """Success rate against end-to-end speedup, one point per method."""
    from neuroedge.bench.report import finish_figure, pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for row in doc["rows"]:
        m = row["metrics"]
        marker = "o" if row["backend"] == "host" else "s"
        ax.scatter(m["speedup"]["value"], 100 * m["success_rate"]["value"], s=40, marker=marker)
        ax.annotate(f"{row['variant']} ({row['backend']})",
                    (m["speedup"]["value"], 100 * m["success_rate"]["value"]),
                    textcoords="offset points", xytext=(5, 4 if marker == "o" else -12),
                    fontsize=8)
    ax.set_xlabel("end-to-end policy speedup vs unpruned (p50, same run)")
    ax.set_ylabel("success rate (%)")
    ax.set_title("vla.specprune on Meta-World")
    ax.grid(alpha=0.3)
    return finish_figure(fig, path)


def row(method: str, result: Mapping[str, Any], latency: Any, base_p50: float,
        flops: float, counts: list[int], budget: int | None, backend: str = "host") -> Report:
    metrics = {"success_rate": Measurement(float(np.mean(list(result["per_task"].values()))),
                                           "fraction"),
               **{k: v for k, v in latency.metrics().items() if k != "peak_rss_mb"},
               "speedup": Measurement(base_p50 / latency.percentile(50), "x"),
               "visual_tokens_kept": Measurement(result["kept"], "tokens", "counted"),
               "visual_tokens_per_layer": Measurement(float(np.mean(counts)), "tokens",
                                                      "counted"),
               "flops_per_inference": Measurement(flops, "FLOP", "counted")}
    metrics.update({f"success_rate_{t}": Measurement(v, "fraction")
                    for t, v in result["per_task"].items()})
    notes = [f"fine-mode fraction {result['fine_fraction']:.2f}"] if method == "specprune" else []
    if budget is not None and method in ("fastv", "random"):
        notes.append(f"static budget {budget} visual tokens (SpecPrune's fine-mode budget)")
    if backend != "host":
        notes.append("success_rate from the host engine; this backend's actions match it "
                     "(see export.max_abs_err)")
    return Report("vla.specprune", backend, method, metrics=metrics, notes=tuple(notes))


def static_counts(model: Any, method: str, result: Mapping[str, Any],
                  prune: PruneConfig) -> tuple[float, list[int]]:
    """Mean decoder FLOPs over the method's inferences, and the mean tokens per layer."""
    if method == "unpruned":
        return decoder_flops(model, None, None)
    per_call = [decoder_flops(model, k, prune if method == "specprune" else None)
                for k in result["kept_all"]]
    counts = np.mean([c for _, c in per_call], axis=0).tolist()
    return float(np.mean([f for f, _ in per_call])), counts


def vision_flops(model: Any) -> float:
    """Patch embedding and the ViT block of both views (attention + GELU MLP of width 2D)."""
    p, d, n = model.patch, model.config["dim"], model.per_view
    block = 2.0 * (4 * n * d * d + 2 * n * n * d + 2 * n * d * 2 * d)
    return 2 * (2.0 * n * 3 * p * p * d + block)


def parity_onnx(model: Any, prune: PruneConfig, sequences: list[list[dict]],
                out_dir: Path) -> dict[str, Any]:
    """Export both controller modes to ONNX and compare actions with eager on real frames."""
    from neuroedge.models.specprune.deploy import export_policy, load_policy

    export_policy(model, out_dir, "onnxrt", prune=prune)
    diffs = {}
    for mode in ("coarse", "fine"):
        exported = load_policy(out_dir, "onnxrt", controller=False)
        eager = PrunedPolicy(torch_engine(model, "specprune", prune), "specprune", prune,
                             controller=False)
        worst = 0.0
        for seq in sequences:
            for p in (exported, eager):
                p.reset()
                p.state = p.state._replace(mode=mode)
            for obs in seq:
                worst = max(worst, float(np.abs(exported.plan(obs) - eager.plan(obs)).max()))
        diffs[mode] = worst
    return {"policy_dir": str(out_dir), "max_abs_err": diffs}


def onnx_policies(model: Any, configs: Mapping[str, PruneConfig], out_dir: Path
                  ) -> dict[str, PrunedPolicy]:
    """Every method exported (one static graph per controller mode) and loaded in ONNX Runtime."""
    from neuroedge.models.specprune.deploy import export_policy, load_policy

    policies = {}
    for m in METHOD_ORDER:
        export_policy(model, out_dir / m, "onnxrt", method=m, prune=configs[m])
        policies[m] = load_policy(out_dir / m, "onnxrt")
    return policies


def run_bench(out_dir: str, backends: Sequence[str] = ("host",),
              config: Mapping[str, Any] | None = None, history: str | None = None
              ) -> dict[str, Any]:
    """Evaluate the four methods, time them side by side, check ONNX parity, write the report."""
    import copy

    import torch
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.specprune.spec import load_trained
    from neuroedge.paths import checkpoint_path

    cfg = dict(config or {})
    torch.set_num_threads(int(cfg.get("threads", 1)))  # 2 threads spin on a loaded 2-core box
    model, train_cfg = load_trained(cfg)
    tasks = tuple(cfg.get("tasks", train_cfg["tasks"]))
    episodes = int(cfg.get("episodes", 50))
    prune = PruneConfig()
    budget = int(cfg.get("baseline_budget", prune.budget_fine))
    same = PruneConfig(budget_coarse=budget, budget_fine=budget)
    configs = {"unpruned": prune, "specprune": prune, "fastv": same, "random": same}
    checkpoint = str(cfg.get("checkpoint") or checkpoint_path("vla.specprune"))
    results = evaluate_all(checkpoint, configs, tasks, episodes, int(cfg.get("workers", 1)))
    sequences = record_observations(tasks)
    policies = {m: PrunedPolicy(torch_engine(copy.deepcopy(model), m, configs[m]), m,
                                configs[m]) for m in METHOD_ORDER}
    repeats = int(cfg.get("repeats", 60))
    timings = {"host": latency_side_by_side(policies, sequences, repeats)}
    if "onnxrt" in backends:
        graphs = onnx_policies(model, configs, Path(out_dir) / "policy_onnx_methods")
        timings["onnxrt"] = latency_side_by_side(graphs, sequences, repeats)
    rows = []
    for backend, latency in timings.items():
        base = latency["unpruned"].percentile(50)
        for m in METHOD_ORDER:
            flops, counts = static_counts(model, m, results[m], configs[m])
            rows.append(row(m, results[m], latency[m], base, flops + vision_flops(model), counts,
                            budget, backend))
    extra: dict[str, Any] = {"columns": list(COLUMNS), "episodes_per_task": episodes,
                             "tasks": list(tasks), "config": {**cfg, "train": train_cfg}}
    if "onnxrt" in backends:
        extra["export"] = parity_onnx(model, prune, sequences, Path(out_dir) / "policy_onnx")
    doc = build_document("vla.specprune", rows, **extra)
    sections = [f"- ONNX export parity (max abs action diff): {extra['export']['max_abs_err']}"
                ] if "export" in extra else []
    write_report(doc, out_dir, columns=COLUMNS, sections=sections, plots=[speedup_plot],
                 history=history)
    return doc
