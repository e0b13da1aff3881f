"""snn.unisparse bench and CIFAR-10 recipe: report files, the claim run (slow) and bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from neuroedge.models.unisparse.bench import run_bench
from neuroedge.models.unisparse.recipe import run_recipe

QUICK = {
    "train_subset": 128,
    "dense_epochs": 1,
    "sparse_epochs": 1,
    "finetune_epochs": 1,
    "variants": ["dense", "unisparse"],
}


def test_bench_writes_rows_per_layer_tables_and_pareto_plot(tmp_path: Path) -> None:
    doc = run_bench(str(tmp_path), ["host"], QUICK)
    variants = [r["variant"] for r in doc["rows"] if r["backend"] == "host"]
    assert variants == ["dense", "unisparse"]
    sparse = next(r for r in doc["rows"] if r["variant"] == "unisparse")["metrics"]
    for name in (
        "accuracy",
        "sops_per_sample",
        "sops_per_sample_no_first",
        "energy_uj",
        "firing_rate",
        "weight_density",
        "budget_met",
        "train_s_per_epoch",
    ):
        assert name in sparse
    value = {k: m["value"] for k, m in sparse.items()}
    # sops_per_sample means what the generic bench means by it (spike-driven only: with
    # direct encoding the analog first layer adds none); the MACs count in with_first only
    assert value["sops_per_sample"] == value["sops_per_sample_no_first"] > 0
    assert value["sops_per_sample_with_first"] == pytest.approx(
        value["sops_per_sample"] + value["macs_per_sample"]
    )
    assert json.loads((tmp_path / "report.json").read_text())["rows"] == doc["rows"]
    md = (tmp_path / "report.md").read_text()
    assert "## Per-layer operations per sample" in md and "| blocks.0.conv1 |" in md
    assert "SOP counter overhead" in md and "## Claim on digits" in md
    assert (tmp_path / "pareto.png").stat().st_size > 1000
    assert (tmp_path / "unisparse.nir").is_file()
    own = ["checkpoints/dense.pt", "checkpoints/unisparse.pt", "unisparse.nir"]
    assert json.loads((tmp_path / "report.json").read_text())["files"] == own
    (tmp_path / "mine.txt").write_text("the user's")
    run_bench(str(tmp_path), ["host"], {**QUICK, "variants": ["dense"]})  # the folder reused
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert [f for f in left if f.endswith((".pt", ".nir"))] == ["checkpoints/dense.pt"]
    assert "mine.txt" in left  # what no report listed stays


def test_recipe_names_the_missing_cifar_files_before_training(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="data_batch_1, .*test_batch"):
        run_recipe(str(tmp_path / "cifar-10-batches-py"), str(tmp_path / "out"))


def test_recipe_runs_resnet18_end_to_end_on_a_cifar_folder(tmp_path: Path, write_cifar) -> None:
    write_cifar(tmp_path, 16)
    doc = run_recipe(
        str(tmp_path),
        str(tmp_path / "out"),
        {
            "device": "cpu",
            "steps": 1,
            "batch": 16,
            "train_subset": 16,
            "dense_epochs": 1,
            "sparse_epochs": 1,
            "finetune_epochs": 1,
            "variants": ["dense", "unisparse"],
        },
    )
    assert [r["variant"] for r in doc["rows"]] == ["dense", "unisparse"]
    assert "Against the paper" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="issue #3 not met on digits: seed 0 drops 2.5 points (ten seeds: 2.17 +- 0.43, "
    "a tie with weight_only; models/unisparse/train.py)",
)
def test_claim_on_digits_holds(tmp_path: Path) -> None:
    """The default digits run, seed 0 (a few minutes on a 2-core CPU): the issue's claim."""
    doc = run_bench(str(tmp_path), ["host"], {})
    claim = doc["claim"]
    assert claim["sop_reduction"] >= 5.0
    assert claim["accuracy_drop_pts"] <= 1.5
    assert all(claim["beats"].values()), claim


def _results(accs: dict[str, float], sops: dict[str, float]) -> dict:
    from neuroedge.models.unisparse.pipeline import VariantResult
    from neuroedge.types import Measurement

    return {
        n: VariantResult(
            n,
            None,
            [],
            {
                "accuracy": Measurement(a, "fraction"),
                "sops_per_sample_no_first": Measurement(sops[n], "SOPs"),
            },
            [],
        )
        for n, a in accs.items()
    }


def test_claim_over_seeds_reads_mean_drop_every_seed_reduction_and_paired_se() -> None:
    from neuroedge.models.unisparse.seeds import claim_over_seeds

    sops = {"dense": 600.0, "unisparse": 100.0, "spike_only": 100.0, "weight_only": 100.0}
    per_seed = {
        s: _results(
            {"dense": 0.96, "unisparse": 0.95 + d, "spike_only": 0.70, "weight_only": 0.95}, sops
        )
        for s, d in zip(range(4), (0.002, 0.004, 0.006, 0.008))
    }
    claim = claim_over_seeds(per_seed)
    assert claim["sop_reduction_min"] == pytest.approx(6.0) and claim["reduction_holds"]
    assert claim["accuracy_drop_pts"] == pytest.approx(0.5) and claim["drop_holds"]
    wo = claim["rivals"]["weight_only"]
    assert wo["diff_pts"] == pytest.approx(0.5) and wo["wins"] == 4
    assert wo["se_pts"] == pytest.approx(np.std([0.2, 0.4, 0.6, 0.8], ddof=1) / 2)
    assert wo["beats"] and claim["holds"]
    # one seed under 5x fails the reduction; a margin inside 2 SE is no win
    per_seed[3]["unisparse"].metrics["sops_per_sample_no_first"] = (
        per_seed[0]["dense"].metrics["sops_per_sample_no_first"].__class__(130.0, "SOPs")
    )
    per_seed[0]["unisparse"].metrics["accuracy"] = (
        per_seed[0]["dense"].metrics["accuracy"].__class__(0.93, "fraction")
    )
    claim = claim_over_seeds(per_seed)
    assert not claim["reduction_holds"] and claim["sop_reduction_min"] == pytest.approx(600 / 130)
    assert not claim["rivals"]["weight_only"]["beats"] and not claim["holds"]


def test_bench_over_two_seeds_in_two_workers_writes_mean_and_per_seed_rows(tmp_path: Path) -> None:
    doc = run_bench(str(tmp_path), ["host"], {**QUICK, "seeds": [0, 1], "workers": 2})
    variants = [r["variant"] for r in doc["rows"] if r["backend"] == "host"]
    assert variants == [
        "dense",
        "unisparse",
        "dense@seed=0",
        "unisparse@seed=0",
        "dense@seed=1",
        "unisparse@seed=1",
    ]
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    mean = np.mean([rows[f"unisparse@seed={s}"]["accuracy"]["value"] for s in (0, 1)])
    assert rows["unisparse"]["accuracy"]["value"] == pytest.approx(mean)
    assert "accuracy_sd" in rows["unisparse"]
    assert doc["claim"]["seeds"] == [0, 1] and len(doc["claim"]["drop_pts_per_seed"]) == 2
    md = (tmp_path / "report.md").read_text()
    assert "## Claim on digits over 2 seeds (0..1)" in md and "(seed 0 alone)" in md


def test_bench_over_seeds_refuses_bad_workers_and_averages_a_run_without_unisparse(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        run_bench(str(tmp_path), ["host"], {**QUICK, "seeds": [0, 1], "workers": 0})
    doc = run_bench(str(tmp_path), ["host"], {**QUICK, "seeds": [0, 1], "variants": ["dense"]})
    rows = {r["variant"]: r["metrics"] for r in doc["rows"] if r["backend"] == "host"}
    assert list(rows) == ["dense", "dense@seed=0", "dense@seed=1"]
    mean = np.mean([rows[f"dense@seed={s}"]["accuracy"]["value"] for s in (0, 1)])
    assert rows["dense"]["accuracy"]["value"] == pytest.approx(mean)
    assert doc["claim"] == {
        "holds": False,
        "seeds": [0, 1],
        "reason": "no unisparse variant in the run",
    }
    assert "No claim: the run has no unisparse variant" in (tmp_path / "report.md").read_text()


def host_spike_density(out: Path, variant: str, cfg: dict) -> tuple[np.ndarray, list[int]]:
    """Host firing rate of each LIF layer of the saved ``variant`` on the digits the Lava rows
    ran (the first ``lava_samples`` test digits), in the rows' layer order."""
    from neuroedge.backends.host import run_torch_program
    from neuroedge.models.unisparse import spec
    from neuroedge.models.unisparse.data import direct_encoding, load_digits

    program = spec.build({"checkpoint": str(out / "checkpoints" / f"{variant}.pt")})
    x = load_digits(int(cfg["seed"])).x_test[: int(cfg["lava_samples"])]
    spikes = run_torch_program(program, {"x": direct_encoding(x, int(cfg["steps"]))})["spikes"]
    sizes = [int(np.prod(shape)) for shape in program.module.arch.neuron_shapes()]
    assert sum(sizes) == spikes.shape[-1]
    return np.array([part.mean() for part in np.split(spikes, np.cumsum(sizes)[:-1], -1)]), sizes


def skill(agreement: float, density: float) -> float:
    """How much of the gap between the best constant output (no spikes, or all: whichever
    agrees more with host) and full agreement a Lava run closes: 0 for a silent net."""
    constant = max(density, 1 - density)
    return (agreement - constant) / (1 - constant)


KT = "variant / mode (kappa)"  # the report.md Lava section's kappa table


def md_layer_agreement(md: str, label: str, table: str = "variant / mode") -> dict[str, float]:
    """The report.md Lava section's per-LIF-layer agreement on the row ``label`` (kappa with
    ``table="variant / mode (kappa)"``)."""
    lines = md.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith(f"| {table} |")))
    header = lines[at]
    row = next(ln for ln in lines[at:] if ln.startswith(f"| {label} |"))
    names, values = header.strip("| ").split(" | ")[1:], row.strip("| ").split(" | ")[1:]
    return dict(zip(names, map(float, values)))


@pytest.mark.loihi
def test_bench_lava_rows_agree_with_host(tmp_path: Path, require) -> None:
    require("lava")
    firing = {**QUICK, "train_subset": 300, "dense_epochs": 3}  # nets that fire (~4%)
    doc = run_bench(str(tmp_path), ["host", "lava"], {**firing, "lava_samples": 12})
    lava = {r["variant"]: r["metrics"] for r in doc["rows"] if r["backend"] == "lava"}
    host = {r["variant"]: r["metrics"] for r in doc["rows"] if r["backend"] == "host"}
    assert min(host[v]["firing_rate"]["value"] for v in ("dense", "unisparse")) > 0.01
    assert set(lava) == {
        f"{v}/{m}" for v in ("dense", "unisparse") for m in ("floating_pt", "fixed_pt")
    }
    md = (tmp_path / "report.md").read_text()
    assert "## Lava (Loihi 2 simulator): spike agreement with host per LIF layer" in md
    for variant in ("dense", "unisparse"):
        exact = lava[f"{variant}/floating_pt"]
        assert exact["spike_agreement"]["value"] == 1.0
        assert exact["max_abs_err"]["value"] < 1e-4
        assert exact["accuracy_change_pts"]["value"] == 0.0
        assert exact["spike_kappa"]["value"] == exact["min_layer_spike_kappa"]["value"] == 1.0
        # fixed_pt: most LIF neurons stay silent, so agreement alone is near 1 for a silent
        # net; judged against the best constant output on the same digits instead
        density, sizes = host_spike_density(tmp_path, variant, doc["config"])
        fixed = lava[f"{variant}/fixed_pt"]
        overall = float(np.dot(density, sizes) / sum(sizes))
        assert skill(fixed["spike_agreement"]["value"], overall) > 0.3, (variant, overall)
        per_layer = md_layer_agreement(md, f"{variant} / fixed_pt")
        assert fixed["min_layer_spike_agreement"]["value"] == pytest.approx(
            min(per_layer.values()), abs=1e-4
        )
        # the stem's error is its own 8-bit rounding only (deeper layers add their inputs'
        # flips): it must close most of the gap, as a single layer does in test_lava_parity
        stem = next(iter(per_layer))
        assert skill(per_layer[stem], density[0]) >= 0.75, (variant, stem, density[0])
        # Cohen's kappa: agreement beyond chance at the two firing rates, below the raw
        # agreement wherever they differ; the stem's own rounding keeps it near 1
        kappa, kappas = fixed["spike_kappa"], md_layer_agreement(md, f"{variant} / fixed_pt", KT)
        assert kappa["unit"] == fixed["min_layer_spike_kappa"]["unit"] == "kappa"
        assert kappa["value"] < fixed["spike_agreement"]["value"], variant
        assert fixed["min_layer_spike_kappa"]["value"] == pytest.approx(
            min(kappas.values()), abs=1e-4
        )
        assert all(kappas[k] < per_layer[k] for k in kappas if per_layer[k] < 1), kappas
        assert kappas[stem] > 0.9, (variant, kappas)


@pytest.mark.parametrize("seeds", [[5], [3, 4]])
def test_exported_rows_overhead_and_checkpoints_use_the_trained_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seeds: list[int]
) -> None:
    """``seeds=[5]`` trained seed 0, and the ONNX rows, the SOP counter's overhead and the
    saved checkpoints' config read ``seed`` (0 by default), not the seed of the reported nets
    (seed 0's test digits are 81% seed 3's training digits). No epochs: nothing trains."""
    import torch
    from neuroedge.models.unisparse import data, measure, pipeline

    trained: list[tuple[int, str]] = []
    deployed: list[tuple[int, str]] = []
    load = data.load_digits

    def spy(into: list[tuple[int, str]]):
        def load_digits(seed: int = 0):
            into.append((seed, sys._getframe(1).f_code.co_name))
            return load(seed)

        return load_digits

    monkeypatch.setattr(pipeline, "load_digits", spy(trained))
    monkeypatch.setattr(data, "load_digits", spy(deployed))  # export_parity, bench overhead
    monkeypatch.setattr(measure, "counter_overhead", lambda *args: {})  # its timing: 5 s
    none = {"dense_epochs": 0, "sparse_epochs": 0, "finetune_epochs": 0, "variants": ["dense"]}
    none["energy_target_uj"] = 1.0  # an untrained net is silent: no dense energy to scale
    run_bench(str(tmp_path), ["host", "onnxrt"], {**none, "seeds": seeds})
    assert [seed for seed, _ in trained] == seeds
    scored = {(seed, caller) for seed, caller in deployed if caller != "example"}
    assert scored == {(seeds[0], "onnx_rows"), (seeds[0], "_extra_blocks")}  # not seed 0's
    saved = torch.load(tmp_path / "checkpoints" / "dense.pt", weights_only=True)
    assert saved["config"]["seed"] == seeds[0]
