"""Experiments repeated over seeds: the seed list of a config, rows averaged over seeds and the
paired difference of two methods with its standard error.

A claim read on one seed reads its training scatter. A bench with ``seeds=[...]`` runs once
per seed, keeps every seed's row and adds the mean; two methods are compared paired by seed
(the same split and the same dense start), so the scatter they share cancels.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from neuroedge.config_values import check_seed_keys
from neuroedge.types import Measurement, Report


def seed_list(cfg: Mapping[str, Any], default: Sequence[int] | None = None) -> list[int]:
    """The seeds of a run: ``seeds`` (a list of distinct integers, numpy's too, never bools) if
    given, else ``[seed]``; as Python ints.

    ``default``: a bench's own seed list, used when ``cfg`` (the user's config, not merged with
    the bench's defaults) names neither ``seeds`` nor ``seed``; ``seed=S`` then runs that seed.
    """
    seeds = cfg.get("seeds")
    if isinstance(seeds, (list, tuple)) and not seeds:
        raise ValueError("seeds=[]: expected a non-empty list of integers")
    if seeds is None:  # only absent: an empty --config seeds= is an error, not the default
        seeds = list(default) if default is not None and "seed" not in cfg else [cfg["seed"]]
    if not isinstance(seeds, (list, tuple)) or any(
        isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in seeds
    ):
        raise ValueError(f"seeds must be a list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds!r}")
    return [int(s) for s in seeds]


def check_workers(workers: Any) -> int:
    """``workers`` of a config: a positive integer, else ValueError naming the value."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    return int(workers)  # numpy's integers too, as a Python int


def map_seeds(
    fn: Callable[[Any], Any],
    cfgs: Mapping[int, Any],
    workers: int = 1,
    desc: str = "seeds",
    progress: bool = True,
) -> dict[int, Any]:
    """``{seed: fn(cfgs[seed])}``, ``workers`` processes at a time (spawned, so no forked torch
    state; ``fn`` must be a module-level function and its argument and result picklable). The
    result is in the order of ``cfgs``. The workers end with the run: when a seed fails, and
    when the run is stopped (Ctrl-C, or SIGTERM as ``timeout`` and ``kill`` send, which would
    otherwise leave them computing on their own). Started by torchrun, each rank runs its
    share of the seeds and every rank returns all results (``bench.distributed``)."""
    from neuroedge.bench import distributed
    from neuroedge.distributed import world

    check_workers(workers)
    w = world()
    if w.active:  # under torchrun: this rank's share, then every rank's results

        def local(share: dict[int, Any]) -> dict[int, Any]:
            label = f"{desc} (rank {w.rank} of {w.size})"
            return map_local(fn, share, workers, label, progress and w.lead)

        return distributed.map_sharded(local, cfgs, w)
    return map_local(fn, cfgs, workers, desc, progress)


def map_local(
    fn: Callable[[Any], Any],
    cfgs: Mapping[Any, Any],
    workers: int,
    desc: str,
    progress: bool,
    noun: str = "seed",
) -> dict[Any, Any]:
    """``{key: fn(cfgs[key])}`` in the order of ``cfgs``: here when ``workers`` is 1, else in
    ``workers`` spawned processes (``map_seeds`` without torchrun). A worker that dies raises
    WorkerDied naming the ``noun`` it ran; the workers end with the call, however it ends."""
    from tqdm import tqdm

    from neuroedge.bench.pool import map_pool

    out: dict[Any, Any] = {}
    # closed however the call ends: a bar left open is redrawn at exit, after the command's
    # last line (a stop signal's)
    with tqdm(total=len(cfgs), desc=desc, disable=not progress) as bar:
        if not cfgs:  # a rank with no share of the seeds
            pass
        elif workers == 1 or len(cfgs) == 1:
            for seed, cfg in cfgs.items():
                out[seed] = fn(cfg)
                bar.update()
        else:
            out = map_pool(fn, cfgs, min(workers, len(cfgs)), bar, desc, noun)
    return out


def run_over_seeds(
    name: str,
    user: Mapping[str, Any],
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any]], dict[str, Any]],
    fn: Callable[[Any], Any],
) -> tuple[dict[str, Any], list[int], dict[int, Any]]:
    """The frame of a bench repeated over seeds: the ``user`` config over ``defaults``, checked
    by ``check`` before any work; the seeds (``seed_list``, ``defaults["seeds"]`` by default);
    each seed checked as ``seed`` is; ``fn({**cfg, "seed": s, "progress": one seed only})`` per
    seed, ``workers`` at a time.
    Returns the config to record (``recorded_config``), the seeds and ``{seed: result}``."""
    check_seed_keys(user)
    cfg = check({**defaults, **user})
    seeds = seed_list(user, defaults.get("seeds"))
    for s in seeds:
        check({**defaults, **user, "seed": s})  # each seed under the same rule as ``seed``
    workers = check_workers(cfg["workers"])
    jobs = {s: {**cfg, "seed": s, "progress": len(seeds) == 1} for s in seeds}
    per_seed = map_seeds(fn, jobs, workers, f"{name} seeds", progress=len(seeds) > 1)
    return recorded_config(cfg, user, seeds), seeds, per_seed


def recorded_config(
    cfg: Mapping[str, Any], user: Mapping[str, Any], seeds: Sequence[int]
) -> dict[str, Any]:
    """The config a bench over ``seeds`` records: ``cfg`` with its ``seeds``, and ``seed`` only
    when the ``user`` gave it (``seed=S`` runs that seed): a default ``seed`` that ``seeds``
    (the user's or the bench's default list) overrode was taken for the run's seed."""
    out = {k: v for k, v in cfg.items() if k != "seed" or "seed" in user}
    return {**out, "seeds": list(seeds)}


def row_value(rows: Sequence[Report], variant: str, name: str) -> float:
    """The value of metric ``name`` in the row of ``variant``; ValueError naming a missing row."""
    for r in rows:
        if r.variant == variant:
            return r.metrics[name].value
    raise ValueError(f"no row {variant!r} among {[r.variant for r in rows]}")


def seed_label(variant: str, seed: int | str) -> str:
    """The per-seed row label ``<variant>@seed=S``."""
    return f"{variant}@seed={seed}"


def mean_report(
    reps: Sequence[Report], variant: str, spread: Sequence[str] = (), note: str = ""
) -> Report:
    """One row with each metric's mean over ``reps`` (the same variant on several seeds), plus
    ``<metric>_sd`` (sample standard deviation) for the metrics named in ``spread``."""
    if not reps:
        raise ValueError(f"no per-seed rows to average for {variant!r}")
    metrics: dict[str, Measurement] = {}
    for name, first in reps[0].metrics.items():
        values = [r.metrics[name].value for r in reps if name in r.metrics]
        metrics[name] = Measurement(float(np.mean(values)), first.unit, first.how)
        if name in spread and len(values) > 1:
            metrics[f"{name}_sd"] = Measurement(float(np.std(values, ddof=1)), first.unit)
    notes = (f"mean of {len(reps)} seeds" + (f"; {note}" if note else ""),)
    devices = sorted({r.device for r in reps})  # the seeds' devices and fallbacks carry over
    fallbacks = tuple(dict.fromkeys(f for r in reps for f in r.fallbacks))
    return Report(
        reps[0].model,
        reps[0].backend,
        variant,
        device=devices[0] if len(devices) == 1 else "+".join(devices),
        metrics=metrics,
        fallbacks=fallbacks,
        notes=notes,
    )


def paired_difference(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Mean of ``a - b`` over seeds and its standard error (nan for a single seed)."""
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diffs.ndim != 1 or diffs.size == 0 or len(a) != len(b):
        raise ValueError(f"paired values need two equal-length lists, got {len(a)} and {len(b)}")
    sem = float(diffs.std(ddof=1) / np.sqrt(diffs.size)) if diffs.size > 1 else float("nan")
    return float(diffs.mean()), sem


def seed_rows(per_seed: Mapping[int, Sequence[Report]], spread: Sequence[str] = ()) -> list[Report]:
    """Mean rows ``<variant>`` (with ``<metric>_sd`` for the metrics in ``spread``), then every
    seed's rows as ``<variant>@seed=S``, from each seed's rows (the same variants per seed)."""
    by_variant: dict[str, list[Report]] = {}
    for rows in per_seed.values():
        for row in rows:
            by_variant.setdefault(row.variant, []).append(row)
    means = [
        mean_report(reps, name, spread, f"per seed in rows {seed_label(name, 'S')}")
        for name, reps in by_variant.items()
    ]
    each = [
        Report(
            r.model,
            r.backend,
            seed_label(r.variant, s),
            r.device,
            r.metrics,
            r.fallbacks,
            r.rejections,
            r.notes,
        )
        for s, rows in per_seed.items()
        for r in rows
    ]
    return means + each


# "All: ..." in report.md for each ``verdict``
VERDICT_WORDS = {True: "hold", False: "NOT met", None: "not all measured, none failed"}


def verdict(parts: Sequence[bool | None]) -> bool | None:
    """A claim's verdict from its parts: False when any part fails, else None when any is
    unmeasured (None), else True."""
    if False in parts:
        return False
    return None if None in parts else True


def claim_lines(claim: Mapping[str, Any], notes: Sequence[str] = ()) -> list[str]:
    """report.md lines of a claim read over seeds: the verdict, each part, ``notes``, and a
    table with one row per seed of every per-seed list in ``claim`` (``claim["seeds"]``,
    ``claim["parts"]`` and ``claim["holds"]`` as ``claim_over_seeds`` functions return them)."""
    holds = claim["holds"]
    said = "holds" if holds else VERDICT_WORDS[None] if holds is None else "not met"  # as the CLI
    lines = [f"## Claim over seeds {claim['seeds']}: {said}", ""]
    lines += [f"- {part}: {ok}" for part, ok in claim["parts"].items()]
    lines += list(notes)
    keys = [k for k in claim if isinstance(claim[k], list) and k != "seeds"]
    lines += ["", "| seed | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for i, seed in enumerate(claim["seeds"]):
        lines.append(f"| {seed} | " + " | ".join(f"{claim[k][i]:.4g}" for k in keys) + " |")
    return lines


def write_seed_report(
    out_dir: str,
    name: str,
    per_seed: Mapping[int, Sequence[Report]],
    cfg: Mapping[str, Any],
    claim: Mapping[str, Any],
    columns: Sequence[str],
    sections: Sequence[str],
    plots: Sequence[Callable[[dict[str, Any], Any], Any]] = (),
    history: str | None = None,
    extra_rows: Sequence[Report] = (),
    **extra: Any,
) -> dict[str, Any]:
    """report.json/report.md/plots of a bench repeated over seeds: one seed's rows as they are,
    else mean rows plus every seed's (``seed_rows``), then ``extra_rows`` (measured once, not
    per seed); the claim and each seed's rows in the document (``extra`` keys too). Returns
    the document."""
    from neuroedge.bench.report import build_document, write_report

    rows = next(iter(per_seed.values())) if len(per_seed) == 1 else seed_rows(per_seed)
    rows = [*rows, *extra_rows]
    doc = build_document(
        name,
        rows,
        config=dict(cfg),
        columns=list(columns),
        claim=claim,
        **extra,
        per_seed={str(s): [r.to_json() for r in rs] for s, rs in per_seed.items()},
    )
    write_report(doc, out_dir, columns=columns, sections=sections, plots=plots, history=history)
    return doc
