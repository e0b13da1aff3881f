"""Up-front checks of the ``neuroedge bench vla.specprune`` config.

``check_bench_config`` runs before the checkpoint is loaded (or trained), anything is exported
and any closed-loop episode runs; the visual tokens per inference (``baseline_budget`` and
``budgets`` are bounded by them) are fixed by the architecture (spec.VISUAL, 128). Every refusal
is a ConfigError naming the key, the value and what is expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neuroedge.config_values import SEED_MAX, int_list, integer
from neuroedge.errors import ConfigError

# Where the closed-loop episodes run: eager PyTorch from the checkpoint, or the exported ONNX
# graphs (bench.evaluate_job), which exist only when onnxrt is among the benchmarked backends.
EVAL_BACKENDS = ("host", "onnxrt")
# Counts >= 1 and their upper bounds: threads (torch's count is a C int; 3e9 overflowed), the
# closed-loop episodes per task and the timing repeats (10**6, as the other models' counts: the
# defaults are 50 and 60, the README's largest run 450 episodes).
MAX_COUNT = 10**6
POSITIVE_KEYS: dict[str, int | None] = {
    "threads": 4096,
    "episodes": MAX_COUNT,
    "repeats": MAX_COUNT,
    "workers": None,
}


def check_tasks(value: Any) -> tuple[str, ...]:
    """Config ``tasks``: a non-empty list of distinct task names of sim.TASKS."""
    from neuroedge.models.specprune.sim import TASKS

    valid = ", ".join(sorted(TASKS))
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(
            f"config tasks={value!r}: expected a non-empty list of task names (valid: "
            f"{valid}), e.g. --config 'tasks=[\"button\"]'"
        )
    bad = [t for t in value if not isinstance(t, str) or t not in TASKS]
    if bad:
        raise ConfigError(f"config tasks={value!r}: {bad} are not tasks; valid tasks: {valid}")
    if len(set(value)) != len(value):
        raise ConfigError(f"config tasks={value!r}: a task is listed twice; list each once")
    return tuple(value)


def check_eval_backend(value: Any, backends: Sequence[str]) -> str:
    """Config ``eval_backend``: host, or onnxrt when onnxrt is benchmarked (its graphs are
    exported only then)."""
    if value not in EVAL_BACKENDS:
        raise ConfigError(
            f"config eval_backend={value!r}: expected one of {', '.join(EVAL_BACKENDS)} "
            "(where the closed-loop episodes run)"
        )
    if value == "onnxrt" and "onnxrt" not in backends:
        raise ConfigError(
            f"config eval_backend='onnxrt' runs the episodes on the exported ONNX graphs, which "
            f"are exported only when onnxrt is benchmarked; --backend is {','.join(backends)}: "
            "pass --backend host,onnxrt, or eval_backend=host"
        )
    return str(value)


def check_bench_config(cfg: dict[str, Any], backends: Sequence[str]) -> None:
    """Every config value that can be checked without the checkpoint, before any work."""
    from neuroedge.models.specprune.bench_variants import ablation_configs, candidate_configs
    from neuroedge.models.specprune.functional import LOOKBACKS, PruneConfig, lookback_choices

    from neuroedge.models.specprune.spec import VISUAL

    for key, most in POSITIVE_KEYS.items():
        if key in cfg:
            integer(cfg, key, 1, most)
    if "tasks" in cfg:
        check_tasks(cfg["tasks"])
    if "baseline_budget" in cfg:  # VISUAL: every policy's (make_policy fixes image and patch)
        check_baseline_budget(cfg["baseline_budget"], VISUAL)
    if "eval_backend" in cfg:
        check_eval_backend(cfg["eval_backend"], backends)
    if "lookback" in cfg and (
        not isinstance(cfg["lookback"], str) or cfg["lookback"] not in LOOKBACKS
    ):
        raise ConfigError(
            f"config lookback={cfg['lookback']!r}: expected one of {lookback_choices()} "
            "(the dynamic set's reference frame)"
        )
    if "seed0" in cfg:
        # layouts seed0.. seed numpy's generator: 0..2**32-1 (-1 failed after the training)
        integer(cfg, "seed0", 0, SEED_MAX, hint=" (the first layout seed)")
    if cfg.get("budgets", []) != []:  # an empty list: no budget sweep
        int_list(cfg, "budgets", 1, VISUAL)
    try:
        candidate_configs(cfg.get("candidates", []), PruneConfig())
        ablation_configs(cfg.get("blank_views", []), PruneConfig())
    except (ValueError, TypeError) as err:
        raise ConfigError(f"config: {err}") from None


def check_baseline_budget(value: int, n_visual: int) -> int:
    """Config ``baseline_budget`` against the trained network's visual tokens per inference."""
    return integer(
        {"baseline_budget": value},
        "baseline_budget",
        1,
        n_visual,
        hint=" (visual tokens per inference of the policy)",
    )


def check_candidates(candidates: Mapping[str, Any], model: Any) -> None:
    """ConfigError naming the candidate whose counts or layers do not fit the loaded policy
    (its visual tokens per view and decoder depth), before any export or episode."""
    for label, config in candidates.items():
        try:
            config.check_geometry(model.per_view, len(model.blocks))
        except ValueError as err:
            raise ConfigError(f"{label}: {err}") from None
