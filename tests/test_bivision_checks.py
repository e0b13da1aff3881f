"""event.bivision audit fixes: the deployment rows time only the net this run saved, and bad
rates, names, thread counts and tasks are refused before any work."""

from __future__ import annotations

import pytest


def _no_work(*args, **kwargs):
    pytest.fail("work started: the bad value was not refused first")


def test_a_sweep_replaces_an_earlier_runs_nets_so_deployment_uses_only_its_own(
    tmp_path, monkeypatch
):
    """A rerun into the same folder with train_noise=same saves no net: the earlier run's
    (another size) must not be timed as this run's, and the summary says why there are none."""
    import torch
    from neuroedge.models.bivision import noise_sweep
    from neuroedge.models.bivision.deployment import deployment_rows, net_path, save_nets

    stale = {("statnf_e2s", "classification"): torch.nn.Linear(1, 1)}
    save_nets(tmp_path, 0, stale, {"size": 16, "train_noise": "clean"})
    path = net_path(tmp_path, 0, "statnf_e2s")
    assert path.is_file()
    # the sweep's training is not what this checks: no datasets, no nets trained ("same")
    monkeypatch.setattr(noise_sweep, "sweep_datasets", lambda *a: {})
    monkeypatch.setattr(noise_sweep, "variant_row", lambda *a: None)
    cfg = {"rates": [0, 2, 5], "seed": 0, "size": 24, "train_noise": "same"}
    noise_sweep.sweep_seed((str(tmp_path), cfg, False))
    assert not path.exists()
    rows, line = deployment_rows(tmp_path, 0, ["host", "onnxrt"])
    assert rows == [] and "this run saved no clean-trained net of seed 0" in line


@pytest.mark.parametrize(
    ("rates", "message"),
    [
        ([0, 5, 5], r"rates=\[0, 5, 5\]: 5 given more than once"),
        ([0, 5, 5.0], "5 given more than once"),
        ([0, -0.0, 5], "0 given more than once"),
        ([0, 2, 1e9], r"rates=1000000000.0: expected a finite number in \[0, 1e\+06\]"),
    ],
)
def test_repeated_or_unbounded_rates_are_refused_before_any_work(
    tmp_path, monkeypatch, rates, message
):
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision import bench as B

    monkeypatch.setattr(B, "throughput_rows", _no_work)
    monkeypatch.setattr(B, "map_seeds", _no_work)
    with pytest.raises(ConfigError, match=message):
        B.bench(str(tmp_path / "b"), config={"rates": rates}, progress=False)
    assert not list(tmp_path.iterdir())


def test_the_claim_counts_a_repeated_rate_once():
    """Margins that grow from 0 to 5 Hz are two rates, not the three the claim needs."""
    from neuroedge.models.bivision.sweep_report import claim_check
    from neuroedge.types import Measurement, Report

    def row(acc, ops):
        metrics = {
            "accuracy": Measurement(acc, "fraction"),
            "map50": Measurement(acc / 2, "fraction"),
            "synaptic_ops_per_sample": Measurement(ops, "op", "counted"),
            "effective_ops_per_sample": Measurement(ops, "op", "counted"),
        }
        return Report("event.bivision", "host", "x", metrics=metrics)

    per_seed = {("statnf_e2s", r): [row(0.9, 1.0)] * 2 for r in (0.0, 5.0)}
    per_seed |= {("lif_histogram", 0.0): [row(0.85, 2.0)] * 2}
    per_seed |= {("lif_histogram", 5.0): [row(0.8, 2.0)] * 2}
    claim = claim_check(per_seed, [0, 5, 5])
    assert claim["rates"] == [0.0, 5.0] and not claim["holds"]


@pytest.mark.parametrize(
    ("key", "value", "message", "bench_reads_it"),
    [
        ("variant", "foo", "variant='foo': expected one of statnf_e2s, lif_histogram", False),
        ("task", "Classification", "task='Classification': expected one of classification", False),
        ("threads", 0, "threads=0: expected an integer in 1..4096", True),
        ("threads", 2.5, "threads=2.5", True),
        ("threads", True, "threads=True", True),
        ("augment", "rotate", "augment 'rotate'", True),
    ],
)
def test_training_names_and_threads_are_refused_before_any_work(
    tmp_path, monkeypatch, key, value, message, bench_reads_it
):
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision import bench as B
    from neuroedge.models.bivision import train

    monkeypatch.setattr("neuroedge.models.bivision.data.ensure_dataset", _no_work)
    with pytest.raises(ConfigError, match=message):
        train.train({key: value}, tmp_path / "t", progress=False)
    if bench_reads_it:
        monkeypatch.setattr(B, "throughput_rows", _no_work)
        monkeypatch.setattr(B, "map_seeds", _no_work)
        with pytest.raises(ConfigError, match=message):
            B.bench(str(tmp_path / "b"), config={key: value}, progress=False)
    assert not list(tmp_path.iterdir())


def test_a_dataset_of_an_unknown_task_is_refused_not_generated_as_detection(tmp_path):
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision.data import ensure_dataset

    cfg = {"train_samples": 2, "test_samples": 2, "size": 16, "noise_rate_hz": 0.0, "seed": 0}
    with pytest.raises(ConfigError, match="task='Classification': expected one of"):
        ensure_dataset(tmp_path, "Classification", cfg, progress=False)
    assert not list(tmp_path.iterdir())


def test_the_nir_refusal_names_the_class_heads_spatial_max():
    """The class head reduces its evidence map by a spatial max (``BiSNet.forward``)."""
    import torch
    from neuroedge.models.bivision.module import BiSNet
    from neuroedge.models.bivision.neuromorphic import NOT_MAPPED

    assert any("spatial max" in part for part in NOT_MAPPED)
    assert not any("mean" in f"{part} {why}" for part, why in NOT_MAPPED.items())
    net = BiSNet("lif", 16)
    seen = []
    net.cls_map.register_forward_hook(lambda m, i, out: seen.append(out.amax((2, 3))))
    net.cls_readout.register_forward_hook(lambda m, i, out: seen.append(i[0]))
    net.forward_sequence(torch.rand(1, 1, 2, 16, 16))
    assert torch.equal(seen[0], seen[1])
