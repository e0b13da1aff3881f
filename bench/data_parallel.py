"""Data-parallel training against one process, side by side in one run.

    python -m neuroedge.bench.data_parallel --nproc 2 [--out DIR] [--config KEY=VALUE ...]

Runs ``neuroedge train snn.unisparse`` (dense, then the energy-constrained unisparse net) twice
on the same config: once in one process, then under ``torchrun --standalone --nproc-per-node
N`` (``neuroedge.distributed``: each rank trains on its share of every batch). On a CPU the
single process gets N torch threads and each rank one, so both use the same N cores; with
``--config device=cuda`` the single process uses one GPU and the launch N. Prints the wall
time of each run, their ratio, each run's time per epoch and the accuracy and SOPs of both
nets (per-rank batch-norm statistics make the data-parallel nets differ from the one-process
ones, so accuracy is compared, not required equal); ``--out DIR`` writes the same as
report.json (atomically; an earlier report there, its report.md, plots and listed files, goes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MODEL = "snn.unisparse"
KEYS = ("accuracy", "sops_per_sample_no_first", "train_s_per_epoch")


def _train(cmd: list[str], env: dict[str, str], label: str) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{label} run failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout[done.stdout.index("{") :]), wall


def compare(nproc: int, config: Sequence[str], folder: Path) -> dict[str, Any]:
    """Both runs and their figures (``folder`` keeps the two checkpoints)."""
    if nproc < 2:
        raise ValueError(f"--nproc {nproc}: a data-parallel run needs at least 2 processes")
    args = ["-m", "neuroedge.cli", "train", MODEL, *(["--config", *config] if config else [])]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    one, one_s = _train(
        [sys.executable, *args, "--out", str(folder / "one.pt")],
        {**env, "OMP_NUM_THREADS": str(nproc)},
        "one-process",
    )
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    dp, dp_s = _train(
        [*launch, "--nproc-per-node", str(nproc), *args, "--out", str(folder / "dp.pt")],
        {**env, "OMP_NUM_THREADS": "1"},
        "data-parallel",
    )
    rows = {}
    for label, summary, wall in (("one_process", one, one_s), (f"ranks_{nproc}", dp, dp_s)):
        rows[label] = {"wall_s": wall}
        for variant in ("dense", "unisparse"):
            rows[label].update({f"{variant}_{k}": summary[variant].get(k) for k in KEYS})
    return {
        "model": MODEL,
        "nproc": nproc,
        "config": list(config),
        "rows": rows,
        "speedup_wall": one_s / dp_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m neuroedge.bench.data_parallel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nproc", type=int, default=2, help="processes of the data-parallel run")
    p.add_argument("--out", default=None, help="report folder (report.json)")
    from neuroedge.cli_args import add_config_option

    add_config_option(p, "training config (repeatable)")
    args = p.parse_args(argv)
    from neuroedge.atomic import check_writable

    if args.out:
        check_writable(args.out, folder=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            doc = compare(args.nproc, args.config or [], Path(tmp))
    except (ValueError, RuntimeError) as err:
        print(f"data_parallel: error: {err}", file=sys.stderr)
        return 2
    for label, row in doc["rows"].items():
        print(f"{label:<12} " + "  ".join(f"{k} {v:.4g}" for k, v in row.items() if v is not None))
    print(f"speedup (wall, one process / {args.nproc} ranks, same run): {doc['speedup_wall']:.2f}x")
    if args.out:  # an earlier report in a reused folder (plots, listed files) goes first
        from neuroedge.bench.report import write_report_json

        write_report_json(doc, args.out)
    return 0


if __name__ == "__main__":
    from neuroedge.cli_exit import command_status

    raise SystemExit(command_status(main))  # SIGTERM / Ctrl-C: 143 / 130, errors one line
