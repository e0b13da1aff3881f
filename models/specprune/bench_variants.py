"""Row labels of the vla.specprune benchmark and the PruneConfig each row runs.

The main rows (METHOD_ORDER), the budget sweep (``specprune@budget=B``), SpecPrune candidates
(``specprune@candidate=K``), the view ablation (``unpruned@blank=VIEW``, with the gray frame it
feeds the policy) and the layout seed of the first evaluation episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from neuroedge.models.specprune.data import EVAL_SEED0, TUNE_SEED0
from neuroedge.models.specprune.functional import PruneConfig
from neuroedge.models.specprune.sim import CAMERAS

METHOD_ORDER = ("unpruned", "specprune", "fastv", "random")


SWEEP_METHODS = ("specprune", "fastv", "random")


def sweep_label(method: str, budget: int) -> str:
    """The row name of ``method`` at fine budget ``budget`` in the budget sweep."""
    return f"{method}@budget={budget}"


def base_method(label: str) -> str:
    """``fastv@budget=8`` -> ``fastv``; a plain method name is its own base."""
    method = label.split("@", 1)[0]
    if method not in METHOD_ORDER:
        raise ValueError(f"unknown method {method!r} in {label!r}; expected one of {METHOD_ORDER}")
    return method


def sweep_configs(budgets: Any, n_visual: int, lookback: str = "speed") -> dict[str, PruneConfig]:
    """Configs of the budget sweep (config ``budgets``): at each fine budget B, rows
    ``specprune@budget=B`` (coarse budget round(2B/3), the default ratio 32/48) and
    ``fastv@budget=B`` / ``random@budget=B`` (B in both modes, as in the main rows), with
    SpecPrune's look-back ``lookback``."""
    if not isinstance(budgets, (list, tuple)) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in budgets
    ):
        raise ValueError(f"budgets must be a list of integers, got {budgets!r}")
    bad = [b for b in budgets if not 1 <= b <= n_visual]
    if bad:
        raise ValueError(f"budgets {bad} are outside 1..{n_visual} (visual tokens per inference)")
    configs = {}
    for b in dict.fromkeys(budgets):
        for m in SWEEP_METHODS:
            coarse = max(1, round(2 * b / 3)) if m == "specprune" else b
            configs[sweep_label(m, b)] = PruneConfig(
                budget_coarse=coarse, budget_fine=b, lookback=lookback
            )
    return configs


BLANK_VALUE = 128  # the uniform gray of a blanked camera view


def ablation_label(view: str) -> str:
    """The row name of the unpruned policy with camera ``view`` blanked."""
    return f"unpruned@blank={view}"


def blanked_view(label: str) -> str | None:
    """``unpruned@blank=wrist`` -> ``wrist``; None for a row that blanks nothing."""
    _, _, view = label.partition("@blank=")
    return view or None


def candidate_label(index: int) -> str:
    """The row name of SpecPrune candidate ``index`` (config ``candidates``)."""
    return f"specprune@candidate={index}"


def candidate_configs(candidates: Any, prune: PruneConfig) -> dict[str, PruneConfig]:
    """Rows of the candidate comparison (config ``candidates``): each entry is a dict of
    PruneConfig fields that replace the defaults, e.g. ``{"budget_coarse": 40,
    "budget_fine": 56}``."""
    from dataclasses import fields, replace

    if not isinstance(candidates, (list, tuple)) or not all(
        isinstance(c, Mapping) for c in candidates
    ):
        raise ValueError(
            f"candidates must be a list of objects of PruneConfig fields, got {candidates!r}"
        )
    names = [f.name for f in fields(PruneConfig)]
    configs = {}
    for i, fields_i in enumerate(candidates):
        bad = sorted(set(fields_i) - set(names))
        if bad:
            raise ValueError(f"candidate {i}: {bad} are not PruneConfig fields; valid: {names}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in fields_i.items()}
        try:
            configs[candidate_label(i)] = replace(prune, **values)
        except ValueError as err:
            raise ValueError(f"candidate {i}: {err}") from None
    return configs


def main_configs(
    cfg: Mapping[str, Any], n_visual: int
) -> tuple[PruneConfig, int, dict[str, PruneConfig]]:
    """SpecPrune's config (its look-back from config ``lookback``), the baselines' budget and
    the PruneConfig of each main row."""
    from dataclasses import replace

    from neuroedge.models.specprune.bench_checks import check_baseline_budget

    prune = PruneConfig(lookback=str(cfg.get("lookback", PruneConfig.lookback)))
    budget = check_baseline_budget(cfg.get("baseline_budget", prune.budget_fine), n_visual)
    same = replace(prune, budget_coarse=budget, budget_fine=budget)
    return prune, budget, {"unpruned": prune, "specprune": prune, "fastv": same, "random": same}


def layout_seed0(value: Any, demo_episodes: int) -> int:
    """The layout seed of the first evaluation episode (config ``seed0``): EVAL_SEED0 for the
    evaluation, TUNE_SEED0 for the held-out set that choices are made on. The demonstrations
    used layouts 0..n-1; evaluating on them is refused."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"seed0 must be an integer layout seed, got {value!r}")
    if value < demo_episodes:
        raise ValueError(
            f"seed0 {value} overlaps the training layouts 0..{demo_episodes - 1}; "
            f"use {EVAL_SEED0} (evaluation) or {TUNE_SEED0} (held-out selection)"
        )
    return value


def ablation_configs(views: Any, prune: PruneConfig) -> dict[str, PruneConfig]:
    """Rows of the view ablation (config ``blank_views``): one per camera name."""
    if not isinstance(views, (list, tuple)) or not all(isinstance(v, str) for v in views):
        raise ValueError(f"blank_views must be a list of camera names, got {views!r}")
    bad = [v for v in views if v not in CAMERAS]
    if bad:
        raise ValueError(f"blank_views {bad} are not cameras; valid: {list(CAMERAS)}")
    return {ablation_label(v): prune for v in dict.fromkeys(views)}


def blank(obs: Mapping[str, Any], view: str | None) -> Mapping[str, Any]:
    """The observation with camera ``view`` replaced by a uniform gray frame (None: as is).
    Steps between re-plans carry no frames (the environment renders only for a re-plan): those
    observations pass unchanged."""
    if view is None or view not in obs:
        return obs
    return {**obs, view: np.full_like(np.asarray(obs[view]), BLANK_VALUE)}
