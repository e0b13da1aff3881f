"""The CIFAR-10 spiking ResNet-18 recipe, one command for a machine with a GPU::

    python -m neuroedge.models.unisparse.recipe --data PATH/cifar-10-batches-py --out DIR

PATH is the standard python-pickle batch folder (nothing is downloaded). It trains the dense
ResNet-18 SNN (T = 4, crop + flip), then the sparsified variants under ``E_dense / budget``,
and writes report.json / report.md (per-layer tables) / pareto.png to DIR, next to the
paper's headline (7.04M SOPs at 92.38% top-1). Every ``--config KEY=VALUE`` overrides a
training default (see ``train.DEFAULTS`` and ``RECIPE``; ``variants=dense`` is a one-element
list). An unknown key, a bad value, a device torch cannot use or an --out that cannot be a
folder is refused before any training, as ``recipe: error: ...`` with exit status 2.

On several GPUs or machines, start the same command with ``torchrun`` (``torchrun
--nproc-per-node 4 -m neuroedge.models.unisparse.recipe ...``): each process takes its share
of every batch on its own GPU (NCCL) and rank 0 writes the report (``neuroedge.distributed``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from neuroedge.errors import ConfigError, NeuroedgeError

PAPER = {"sops": 7.04e6, "accuracy": 0.9238}  # the abstract's sparsified ResNet-18, CIFAR-10
RECIPE: dict[str, Any] = {
    "arch": "resnet18",
    "steps": 4,
    "batch": 128,
    "lr": 1e-3,
    "weight_decay": 5e-4,
    "dense_epochs": 150,
    "sparse_epochs": 60,
    "finetune_epochs": 30,
    "augment": True,
    "device": "cuda",
    "variants": ["dense", "unisparse", "spike_only", "weight_only", "random_mask"],
}


def recipe_keys() -> tuple[str, ...]:
    """The --config keys the recipe reads: the training keys (``data`` comes from --data)."""
    from neuroedge.models.unisparse.spec import SPEC

    return (*(k for k in SPEC.config_keys["train"] if k != "data"), "variants")


def check_keys(overrides: dict[str, Any]) -> None:
    """ConfigError naming each key the recipe does not read, with the nearest valid one."""
    import dataclasses

    from neuroedge.models.unisparse.spec import SPEC

    if "data" in overrides:
        raise ConfigError(
            f"--config data={overrides['data']!r}: the recipe reads the CIFAR-10 folder "
            "from --data; drop data from --config"
        )
    # ModelSpec.check_config (its "did you mean" included) against the recipe's own keys
    dataclasses.replace(SPEC, config_keys={"train": recipe_keys()}).check_config(overrides, "train")


def prepare(
    data: str, out: str, overrides: dict[str, Any] | None = None, history: str | None = None
) -> dict[str, Any]:
    """The checked config of a recipe run; every refusal comes here, before any training.
    Under torchrun, ``device=cuda`` becomes this process's ``cuda:LOCAL_RANK``, and only rank
    0 checks the report paths (it alone writes them)."""
    from neuroedge.distributed import local_device, world

    from neuroedge.atomic import check_writable
    from neuroedge.bench.history import check as check_history
    from neuroedge.models.unisparse import train
    from neuroedge.models.unisparse.data import load_cifar10
    from neuroedge.models.unisparse.pipeline import check_arch_fits, check_config, check_device

    overrides = dict(overrides or {})
    check_keys(overrides)
    cfg = {**train.DEFAULTS, **RECIPE, **overrides, "data": data}
    cfg = check_config(cfg, overrides, device=False)
    w = world()
    if w.lead:
        check_writable(out, folder=True)
        check_history(history)  # as `neuroedge bench`: a neuroedge SQLite history, writable
    check_arch_fits(cfg, load_cifar10(data))  # fail fast: the files, then their shape
    cfg["device"] = local_device(cfg["device"], w)  # under torchrun: one GPU per process
    check_device(cfg["device"])  # after the files: their message first on a CPU-only machine
    return cfg


def run_recipe(
    data: str, out: str, overrides: dict[str, Any] | None = None, history: str | None = None
) -> dict[str, Any]:
    """Train and measure every variant on CIFAR-10; returns the report.json document."""
    from neuroedge.bench.report import build_document, write_report
    from neuroedge.models.unisparse.bench import (
        COLUMNS,
        host_rows,
        layer_sections,
        pareto_plot,
    )
    from neuroedge.models.unisparse.pipeline import run_variants

    from neuroedge.distributed import data_parallel, world

    cfg, w = prepare(data, out, overrides, history), world()
    with data_parallel(w, cfg["device"]):  # under torchrun: every rank, its share of a batch
        results, target = run_variants(cfg, tuple(cfg["variants"]), progress=w.lead)
    rows = host_rows("snn.unisparse", results)
    best = results.get("unisparse", results["dense"]).metrics
    paper_row = [
        "## Against the paper (CIFAR-10, ResNet-18)",
        "",
        "| | SOPs per sample | top-1 |",
        "|---|---|---|",
        f"| paper (abstract) | {PAPER['sops']:.3g} | {100 * PAPER['accuracy']:.2f}% |",
        (
            f"| ours (measured) | {best['sops_per_sample_no_first'].value:.3g} | "
            f"{100 * best['accuracy'].value:.2f}% |"
        ),
        "",
    ]
    doc = build_document(
        "snn.unisparse",
        rows,
        config=cfg,
        columns=list(COLUMNS),
        energy_target_uj=target,
        paper=PAPER,
        data_parallel_ranks=w.size,
    )
    if not w.lead:  # rank 0 writes the report
        return doc
    write_report(
        doc,
        out,
        columns=COLUMNS,
        sections=[*paper_row, *layer_sections(results)],
        plots=[pareto_plot],
        history=history,
    )
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m neuroedge.models.unisparse.recipe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="the cifar-10-batches-py folder")
    p.add_argument("--out", required=True, help="report folder")
    p.add_argument("--history", default=None, help="SQLite history file")
    from neuroedge.cli_args import add_config_option, config_items

    add_config_option(p, "training config (repeatable)")
    args = p.parse_args(argv)

    try:
        doc = run_recipe(args.data, args.out, config_items(args.config), args.history)
    except (NeuroedgeError, ValueError, OSError) as err:  # as neuroedge's CLI: no traceback
        print(f"recipe: error: {err}", file=sys.stderr)
        return 2
    from neuroedge.bench.report import text_table
    from neuroedge.distributed import world

    if world().lead:  # under torchrun, one table: rank 0's report
        print(text_table(doc, doc["columns"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
