"""The UniSparse claim over several seeds: ``neuroedge bench snn.unisparse --config 'seeds=[...]'``.

On digits one seed's test split has 360 images (0.28 points each) and every seed trains its own
dense net, so the accuracy drop scatters by several points from seed to seed (-0.8 to 4.4 at
the default budget, two ten-seed runs). The claim is therefore read over seeds, by rules fixed
before the ten-seed runs of stop 17 and unchanged since:

* SOP reduction: at least 5x against the seed's own dense net **in every seed**;
* accuracy drop: the **mean** over seeds of (dense - unisparse) is at most 1.5 points;
* "more accurate than R" (spike_only, weight_only), at that SOP budget: the mean paired
  difference unisparse - R (same seed: same split, same dense start) is > 0 **and** > 2
  standard errors. A rival that missed the budget (under 5x fewer SOPs than its seed's dense
  net in any seed) spent more SOPs: unless unisparse beats it anyway, that comparison is not
  decided (``beats`` None, with a ``reason``), neither won nor lost; a run without both rivals
  does not hold.

``holds``: False when a part fails (or a rival is missing), else None when a rival comparison
is undecided, else True (``bench.seeds.verdict``); None with a ``reason`` whatever the parts say
when a seed's dense net stays under CLAIM_DENSE_MIN_ACCURACY (it did not learn).

Each seed runs in its own process (``workers``, default 1; 2 on a 2-core machine halves the
wall time); each process uses one torch thread, so a seed gives the same figures whether it
runs alone, beside another, or in a sweep of other seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from neuroedge.bench.seeds import map_seeds, paired_difference, verdict
from neuroedge.models.unisparse.pipeline import ORDER, VariantResult, run_variants

CLAIM_REDUCTION, CLAIM_DROP_PTS, CLAIM_SE = 5.0, 1.5, 2.0
# The dense SNN's accuracy below which the claim is not measured: its drop and the rivals'
# comparisons are read against a dense net that learned; near chance (0.1 on the 10 classes
# of digits and CIFAR-10; lr=10 left every variant there, silent nets "meeting" any SOP budget)
# they say nothing. The default dense net reaches 0.97 on digits.
CLAIM_DENSE_MIN_ACCURACY = 0.5
RIVALS = ("spike_only", "weight_only")
SOPS = "sops_per_sample_no_first"  # the claim's SOP count (spike-driven, first layer excluded)
SPREAD = ("accuracy", "sop_reduction")

VERDICT = {True: "HOLDS", False: "DOES NOT HOLD", None: "NOT ALL MEASURED, NONE FAILED"}
PerSeed = dict[int, tuple[dict[str, VariantResult], float]]


def run_seed(cfg: Mapping[str, Any]) -> tuple[dict[str, VariantResult], float]:
    """One seed's variants (``cfg["variants"]``) on one torch thread (the caller's count back
    after it); picklable for workers."""
    from neuroedge.seeding import one_thread

    with one_thread():
        return run_variants(cfg, tuple(cfg.get("variants", ORDER)), progress=False)


def run_seeds(
    cfg: Mapping[str, Any], seeds: Sequence[int], workers: int = 1, progress: bool = True
) -> PerSeed:
    """``run_seed`` for every seed, ``workers`` processes at a time (spawned: no forked torch)."""
    return map_seeds(
        run_seed, {s: {**cfg, "seed": s} for s in seeds}, workers, "unisparse seeds", progress
    )


def claim_over_seeds(per_seed: Mapping[int, Mapping[str, VariantResult]]) -> dict[str, Any]:
    """The claim read over seeds by the module docstring's rules, with every per-seed figure."""
    seeds = list(per_seed)

    def values(variant: str, metric: str) -> list[float]:
        return [per_seed[s][variant].metrics[metric].value for s in seeds]

    dense_acc = values("dense", "accuracy")
    uni_acc = values("unisparse", "accuracy")
    dense_sops = values("dense", SOPS)

    def reduction(variant: str) -> list[float]:
        return [d / max(u, 1e-9) for d, u in zip(dense_sops, values(variant, SOPS))]

    reductions = reduction("unisparse")
    drops = [100 * (d - u) for d, u in zip(dense_acc, uni_acc)]
    out: dict[str, Any] = {
        "seeds": seeds,
        "sop_reduction_per_seed": reductions,
        "drop_pts_per_seed": drops,
        "sop_reduction_min": min(reductions),
        "sop_reduction_max": max(reductions),
        "accuracy_drop_pts": float(np.mean(drops)),
        "accuracy_drop_se": paired_difference(dense_acc, uni_acc)[1] * 100,
        "reduction_holds": min(reductions) >= CLAIM_REDUCTION,
        "rivals": {},
    }
    out["drop_holds"] = out["accuracy_drop_pts"] <= CLAIM_DROP_PTS
    for rival in (r for r in RIVALS if r in per_seed[seeds[0]]):
        out["rivals"][rival] = _rival(uni_acc, values(rival, "accuracy"), reduction(rival), seeds)
    out["holds"] = verdict(
        [
            out["reduction_holds"],
            out["drop_holds"],
            len(out["rivals"]) == len(RIVALS),
            *(r["beats"] for r in out["rivals"].values()),
        ]
    )
    return dense_learned(out, dict(zip(seeds, dense_acc)))


def dense_learned(claim: dict[str, Any], dense_acc: Mapping[Any, float]) -> dict[str, Any]:
    """``claim`` with ``holds`` None, a ``reason`` and the verdict's words ``said`` (not
    "none failed": parts may have failed) when a seed's dense accuracy is under
    CLAIM_DENSE_MIN_ACCURACY (or NaN): its parts are kept, but read against a net that did
    not learn."""
    short = {s: a for s, a in dense_acc.items() if not a >= CLAIM_DENSE_MIN_ACCURACY}
    if short:
        claim["holds"], claim["said"] = None, "not measured (the dense net did not learn)"
        claim["reason"] = (
            f"not measured: the dense net did not learn (accuracy {short} under "
            f"{CLAIM_DENSE_MIN_ACCURACY:g}), so the drop and the rivals' comparisons say nothing"
        )
    return claim


def _rival(
    uni_acc: list[float], theirs: list[float], reductions: list[float], seeds: list[int]
) -> dict[str, Any]:
    """unisparse against one rival, paired by seed; ``beats`` None (with a ``reason``) when
    the rival spent more SOPs than the claim's budget in some seed."""
    mean, sem = paired_difference(uni_acc, theirs)
    diffs = np.subtract(uni_acc, theirs)
    out: dict[str, Any] = {
        "diff_pts": 100 * mean,
        "se_pts": 100 * sem,
        "wins": int((diffs > 0).sum()),
        "ties": int((diffs == 0).sum()),
        "losses": int((diffs < 0).sum()),
        "rival_accuracy": float(np.mean(theirs)),
        "sop_reduction_min": min(reductions),
        "beats": bool(mean > 0 and mean > CLAIM_SE * sem),
    }
    over = [s for s, r in zip(seeds, reductions) if r < CLAIM_REDUCTION]
    if over and not out["beats"]:  # beaten though it spent more SOPs: beaten
        out["beats"] = None
        out["reason"] = (
            f"not at the claim's budget: under {CLAIM_REDUCTION:g}x fewer SOPs than dense in "
            f"seed(s) {over} (min {min(reductions):.2f}x)"
        )
    return out


def claim_section(claim: Mapping[str, Any]) -> list[str]:
    """report.md lines for the claim over seeds."""
    said = claim.get("said", VERDICT[claim["holds"]])
    seeds = claim["seeds"]
    lines = [
        f"## Claim on digits over {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}): {said}",
        "",
        *([f"- {claim['reason']}"] if "reason" in claim else []),
        (
            f"- SOP reduction (no first layer) vs each seed's dense net: "
            f"{claim['sop_reduction_min']:.2f}x to {claim['sop_reduction_max']:.2f}x (need "
            f">= {CLAIM_REDUCTION:g}x in every seed): {claim['reduction_holds']}"
        ),
        (
            f"- accuracy drop, mean over seeds: {claim['accuracy_drop_pts']:.2f} +- "
            f"{claim['accuracy_drop_se']:.2f} points (SE; need <= {CLAIM_DROP_PTS:g}): "
            f"{claim['drop_holds']}"
        ),
    ]
    for name, r in claim["rivals"].items():
        lines.append(
            f"- more accurate than {name} (mean {100 * r['rival_accuracy']:.2f}%): "
            f"unisparse - {name} = {r['diff_pts']:+.2f} +- {r['se_pts']:.2f} points "
            f"(paired SE; {r['wins']} wins, {r['ties']} ties, {r['losses']} losses; "
            f"need > 0 and > {CLAIM_SE:g} SE): {r['beats']}"
            + (f" ({r['reason']})" if "reason" in r else "")
        )
    lines += ["", "| seed | SOP reduction | drop (points) |", "|---|---|---|"]
    lines += [
        f"| {s} | {red:.2f}x | {drop:+.2f} |"
        for s, red, drop in zip(seeds, claim["sop_reduction_per_seed"], claim["drop_pts_per_seed"])
    ]
    return lines + [""]
