"""Trainings and bench hooks called from Python leave the caller's process-wide torch state as
they found it: its random generator (they seed their own draws inside ``seeding.seeded``, not
``torch.manual_seed`` on the caller's) and its intra-op thread count (``seeding.torch_threads``
and ``one_thread`` restore it), also when the work stops with an error. Each call here is tiny
(a few steps on a few samples) or stops at its first piece of work."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

CALLER_THREADS = 3  # neither the 1 the trainings use nor torch's default on a 2-core box


class Stop(Exception):
    """Raised by a stand-in for a bench's first piece of work."""


@pytest.fixture
def caller() -> Iterator[Callable[[str], None]]:
    """The caller's torch state (3 threads, seed 1234); ``check(what)`` asserts it is intact."""
    before = torch.get_num_threads()
    torch.set_num_threads(CALLER_THREADS)
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()

    def check(what: str) -> None:
        threads = torch.get_num_threads()
        assert threads == CALLER_THREADS, f"{what} left torch on {threads} threads"
        assert torch.equal(torch.random.get_rng_state(), state), f"{what} reseeded torch"

    yield check
    torch.set_num_threads(before)


def stop_with_threads(seen: list[int]) -> Callable[..., Any]:
    """A stand-in that records the thread count it runs on, then stops the bench."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.get_num_threads())
        raise Stop

    return stand_in


def test_unisparse_training_phases(caller: Callable[[str], None]) -> None:
    from neuroedge.models.unisparse import train
    from neuroedge.models.unisparse.pipeline import load_data

    cfg = {**train.DEFAULTS, "train_subset": 64, "batch": 64}
    cfg.update(dense_epochs=1, sparse_epochs=1, finetune_epochs=1)
    data = load_data(cfg)
    caller("load_data")
    net, _ = train.train_dense(data, cfg, progress=False)
    caller("train_dense")
    train.sparsify(net.state_dict(), "spike_only", 1.0, data, cfg, progress=False)
    caller("sparsify")


def test_unisparse_seed_and_bench(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.unisparse import bench, seeds

    seen: list[int] = []
    monkeypatch.setattr(seeds, "run_variants", lambda *a, **k: seen.append(torch.get_num_threads()))
    seeds.run_seed({"seed": 0})
    caller("unisparse seeds.run_seed")
    monkeypatch.setattr(bench, "_host_part", stop_with_threads(seen))
    with pytest.raises(Stop):
        bench.run_bench(str(tmp_path), ("host",), {"threads": 2})
    caller("unisparse run_bench")
    assert seen == [1, 2]  # on the seed's one thread, on the bench's `threads`


def test_specprune_training(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.specprune import data, train

    n, rng = 6, np.random.default_rng(0)
    images = rng.integers(0, 256, (2, n, 64, 64, 3), dtype=np.uint8)
    demos = data.Demos(
        images[0],
        images[1],
        rng.standard_normal((n, 4)).astype(np.float32),
        np.zeros((n, data.TEXT_LEN), np.int64),
        rng.standard_normal((n, data.CHUNK, 4)).astype(np.float32),
    )
    monkeypatch.setattr(data, "load_or_generate", lambda *args: demos)
    tc = {"tasks": ["reach"], "episodes": 1, "steps": 2, "finetune_steps": 1, "batch": 4}
    tc.update(dim=16, heads=1, depth=1, ffn=16)
    train.train(tc, out=tmp_path / "policy.ckpt")
    caller("specprune train")


def test_ttt_training_and_bench(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.ttt import throughput, train

    cfg = train.check_config({**train.DEFAULTS, "steps": 2, "batch": 4, "eval_batch": 8})
    train.train_one(cfg, "baseline", progress=False)
    caller("ttt train_one")
    seen: list[int] = []
    monkeypatch.setattr(throughput, "matmul_rates", stop_with_threads(seen))
    with pytest.raises(Stop):
        throughput.bench(tmp_path, ("host",), {"threads": 2})
    caller("ttt bench")
    assert seen == [2]


def test_ttt_ladder_probes_run_on_the_training_threads(
    caller: Callable[[str], None], monkeypatch
) -> None:
    from neuroedge.models.ttt import train

    seen: list[int] = []

    def evaluate(*args: Any, **kwargs: Any) -> dict[str, float]:
        seen.append(torch.get_num_threads())
        return {"loss": 0.0, "accuracy": 0.0}

    monkeypatch.setattr(train, "train_one", lambda cfg, name, **k: (None, {"variant": str(name)}))
    monkeypatch.setattr(train, "evaluate", evaluate)
    train.ladder({"threads": 2, "inner_steps": [1]}, progress=False)
    caller("ttt ladder")
    assert seen == [2]


def test_bivision_training(caller: Callable[[str], None]) -> None:
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import EventSet

    rng = np.random.default_rng(0)
    x = (rng.random((4, 5, 2, 32, 32)) < 0.05).astype(np.float32)
    events = EventSet(x, np.array([0, 1, 0, 1]), [np.array([[6.0, 6, 8, 8]])] * 4)
    cfg = {**train.DEFAULTS, "task": "classification", "epochs": 1, "batch": 4, "size": 32}
    net = train.make_net(cfg)
    caller("bivision make_net")
    train.fit(net, events, "classification", cfg, progress=False)
    caller("bivision fit")


def test_cadre_bench_seed(caller: Callable[[str], None]) -> None:
    from neuroedge.models.cadre import bench

    bench.run_seed({**bench.DEFAULTS, "steps": 2, "batch": 8, "jac_batch": 4, "n": 16})
    caller("cadre run_seed")


def test_cadre_series_bench(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.cadre import bench

    seen: list[int] = []
    monkeypatch.setattr(bench, "_user_series", stop_with_threads(seen))
    series = tmp_path / "series.csv"
    series.write_text("a,b\n1,2\n")
    with pytest.raises(Stop):
        bench.bench(str(tmp_path), ["host"], {"series": str(series)})
    caller("cadre series bench")
    assert seen == [1]


def test_meshft_bench(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.meshft import bench

    seen: list[int] = []
    monkeypatch.setattr(bench, "_train_models", stop_with_threads(seen))
    with pytest.raises(Stop):
        bench.bench(str(tmp_path), ["host"], {})
    caller("meshft bench")
    assert seen == [1]


def test_seeded_initialisations(caller: Callable[[str], None]) -> None:
    """The model-level helpers the builds call, each on its own (the builds: test_registry)."""
    from neuroedge.models.grad_transformer import experiment as gt
    from neuroedge.models.hair_trigger import functional as hair
    from neuroedge.models.prefix_rft import experiment as rft
    from neuroedge.models.prm_pbe import prm
    from neuroedge.models.uq_last_layer import functional as uq

    first = hair.make_mlp(8, 0)
    caller("hair_trigger make_mlp")
    torch.manual_seed(99)  # another caller state: the same weights
    assert torch.equal(hair.make_mlp(8, 0)[0].weight, first[0].weight)
    torch.manual_seed(1234)
    uq.make_mlp(3, 4, 1, 0)
    caller("uq_last_layer make_mlp")
    rft.train_base({"seed": 0, "hidden": 8, "base_lr": 0.1, "base_steps": 0, "batch": 2}, None)
    caller("prefix_rft train_base")
    cfg = {"hidden": 8, "prm_lr": 0.1, "prm_steps": 0, "prm_batch": 2}
    prm.train_prm(None, np.zeros(0, np.int64), cfg, 0)
    caller("prm_pbe train_prm")
    small, large = np.ones((4, 9)), np.ones((4, 65))
    gt.train_gt(small, large, {"d_model": 8, "lr": 0.1, "steps": 0, "batch": 2}, 0)
    caller("grad_transformer train_gt")


def test_bivision_sweep_seed_runs_on_the_training_threads(
    caller: Callable[[str], None], monkeypatch, tmp_path
) -> None:
    """A seed's tests run on ``threads``, as its nets were trained (before the trainings kept
    the caller's count, every test after the first training ran on it); the caller's count
    comes back after the seed."""
    from neuroedge.models.bivision import noise_sweep

    seen: list[int] = []
    monkeypatch.setattr(noise_sweep, "sweep_datasets", lambda *args: {})
    monkeypatch.setattr(
        noise_sweep, "variant_row", lambda *a, **k: seen.append(torch.get_num_threads())
    )
    noise_sweep.sweep_seed((str(tmp_path), {"seed": 0, "rates": [0, 2], "threads": 2}, False))
    caller("bivision sweep_seed")
    assert seen == [2] * 2 * len(noise_sweep.SWEEP_VARIANTS)


def test_unisparse_measure_variant(caller: Callable[[str], None]) -> None:
    """Folding draws fresh layers (then overwritten): a deploy that trains measures each
    variant, and must not draw from the caller's generator."""
    from neuroedge.models.unisparse import pipeline, train
    from neuroedge.seeding import seeded

    cfg = {**train.DEFAULTS, "steps": 1}
    with seeded(0):
        net = train.make_net(cfg).eval()
    data = pipeline.load_data(cfg)
    data = data._replace(x_test=data.x_test[:8], y_test=data.y_test[:8])
    caller("load_data")
    pipeline.measure_variant("dense", net, [], data, cfg, None)
    caller("unisparse measure_variant")


def test_specprune_checkpoint_load(caller: Callable[[str], None], tmp_path) -> None:
    """Every build from a checkpoint loads it: the policy's fresh layers must not draw from
    the caller's generator (the checkpoint's weights replace them)."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.models.specprune import train
    from neuroedge.seeding import seeded

    cfg = {**train.DEFAULTS, "dim": 16, "heads": 1, "depth": 1, "ffn": 16}
    with seeded(3):
        saved = train.make_policy(cfg)
    path = tmp_path / "policy.ckpt"
    payload = {"state_dict": saved.state_dict(), "config": cfg}
    save_checkpoint(path, {"version": train.CHECKPOINT_VERSION, **payload})
    caller("save_checkpoint")
    policy, _ = train.load_policy_checkpoint(path)
    caller("specprune load_policy_checkpoint")
    for name, value in saved.state_dict().items():
        assert torch.equal(policy.state_dict()[name], value), name


def test_cadre_training(caller: Callable[[str], None]) -> None:
    """``compare`` (both models built and trained) and ``new_cadre``, as ``neuroedge train``
    and the series bench call them, seed only their own draws."""
    from neuroedge.models.cadre import train
    from neuroedge.models.cadre.data import generate
    from neuroedge.models.cadre.spec import DOMAINS, DX, DZ, LENGTH

    data = generate(n=16, length=LENGTH, dx=DX, dz=DZ, domains=DOMAINS, seed=1)
    cfg = {**train.DEFAULTS, "steps": 2, "batch": 8, "jac_batch": 4, "hidden": 8}
    first = train.new_cadre(DX, DZ, DOMAINS, cfg)
    caller("cadre new_cadre")
    torch.manual_seed(99)  # another caller state: the same weights
    again = train.new_cadre(DX, DZ, DOMAINS, cfg)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), again.parameters()))
    torch.manual_seed(1234)
    train.compare(data, DOMAINS, cfg)
    caller("cadre compare")


def test_meshft_fit(caller: Callable[[str], None]) -> None:
    """``train.fit``, which the bench hook and ``neuroedge train`` call, seeds only its own
    draws."""
    from neuroedge.models.meshft import train
    from neuroedge.models.meshft.mesh import periodic_grid
    from neuroedge.models.meshft.module import MeshFT

    mesh = periodic_grid(4, 4)
    data = train.plane_wave_pairs(mesh, 8, 0.002, seed=0)
    train.fit(MeshFT(mesh, "scalar").float(), data, 2, 1e-3, batch_size=4)
    caller("meshft fit")


def test_prm_pbe_seed(caller: Callable[[str], None]) -> None:
    from neuroedge.models.prm_pbe import experiment

    cfg = {**experiment.DEFAULTS, "train_tasks": 200, "test_tasks": 10, "hidden": 16}
    cfg.update(sft_epochs=1, tree_tasks=40, prm_steps=2, updates=1, tasks_per_update=2)
    experiment.run_seed({**cfg, "progress": False})
    caller("prm_pbe run_seed")


def test_specprune_bench_and_cell(caller: Callable[[str], None], monkeypatch, tmp_path) -> None:
    from neuroedge.models.specprune import bench, spec

    seen: list[int] = []
    monkeypatch.setattr(spec, "load_trained", stop_with_threads(seen))
    with pytest.raises(Stop):
        bench.run_bench(str(tmp_path / "r"), ("host",), {"threads": 2})
    caller("specprune run_bench")
    monkeypatch.setattr(bench, "_evaluate_cell", stop_with_threads(seen))
    with pytest.raises(Stop):
        bench.evaluate_job(("ckpt", "host", "full", {}, "reach", 1, 0))
    caller("specprune evaluate_job")
    assert seen == [2, 1]  # the bench's threads, then one per cell


def test_bivision_deployment_rows_run_on_the_training_threads(
    caller: Callable[[str], None], monkeypatch, tmp_path
) -> None:
    """The deployment rows after the sweep ran on the count the training left (``threads``)
    before the trainings kept the caller's; they do again, and the caller's count returns."""
    from neuroedge.models.bivision import bench

    seen: list[int] = []
    monkeypatch.setattr(bench, "map_seeds", lambda *a, **k: {0: {}})
    monkeypatch.setattr(bench, "throughput_rows", lambda cfg: ([], ""))
    monkeypatch.setattr(bench, "claim_check", lambda *a: {})
    monkeypatch.setattr(bench, "mean_rows", lambda per_seed: [])
    monkeypatch.setattr(bench, "deployment_rows", stop_with_threads(seen))
    with pytest.raises(Stop):
        bench.bench(str(tmp_path), ["host", "onnxrt"], {"seed": 0, "threads": 2}, progress=False)
    caller("bivision bench")
    assert seen == [2]
