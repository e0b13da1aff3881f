"""Data-parallel training under torchrun (neuroedge.distributed.DataParallel): the averaging
primitives against one process's full-batch gradient, snn.unisparse's phases on two ranks (the
same parameters, multiplier and measurements everywhere) and the CIFAR-10 recipe's report."""

from __future__ import annotations

import json
import pathlib
import textwrap


PRIMITIVES = textwrap.dedent(
    """
    import json, sys
    import torch
    from neuroedge.distributed import DistributedError, data_parallel, world
    from neuroedge.models.unisparse import train

    w, out = world(), {}
    with data_parallel(w, "cpu") as dp:
        torch.manual_seed(0)  # the same net and batch on both ranks
        net = train.make_net({**train.DEFAULTS, "arch": "mini"}).double().eval()
        x = torch.rand(4, 6, 1, 8, 8, dtype=torch.float64)
        y = torch.tensor([0, 3, 5, 7, 1, 2])

        def grads(idx):
            net.zero_grad()
            logits, _ = net.forward_sequence(x[:, idx])
            torch.nn.functional.cross_entropy(logits, y[idx]).backward()
            return [p.grad.clone() for p in net.parameters() if p.grad is not None]

        full = grads(list(range(6)))  # one process, the global batch (eval: no batch stats)
        grads(list(dp.shard(__import__("numpy").arange(6))))
        dp.average_gradients(net.parameters())
        got = [p.grad for p in net.parameters() if p.grad is not None]
        out["grad_err"] = max(float((a - b).abs().max()) for a, b in zip(got, full))
        out["mean"] = dp.mean(10.0 * (w.rank + 1))
        with torch.no_grad():
            for p in net.parameters():
                p.add_(w.rank)  # rank 1 drifts
        try:
            dp.check_agreement(net, "the drift")
        except DistributedError as err:
            out["agreement"] = str(err)
        dp.broadcast(net)
        dp.check_agreement(net, "the broadcast")  # raises if rank 0's did not reach rank 1
        out["skips"] = [dp.skips(__import__("numpy").arange(n)) for n in (1, 2)]
    with open(f"{sys.argv[1]}/rank{w.rank}.json", "w") as f:
        json.dump(out, f)
    """
)

PHASES = textwrap.dedent(
    """
    import json, sys
    from neuroedge.distributed import data_parallel, world
    from neuroedge.models.unisparse import pipeline, train

    from neuroedge.distributed import DataParallel

    seen = []  # the first sample of every share this rank trained on
    plain_shard = DataParallel.shard
    DataParallel.shard = lambda self, idx: seen.append(int(plain_shard(self, idx)[0])) or (
        plain_shard(self, idx)
    )
    w = world()
    cfg = {**train.DEFAULTS, "train_subset": 256, "batch": 32, "steps": 2,
           "dense_epochs": 2, "sparse_epochs": 2, "finetune_epochs": 1}
    with data_parallel(w, "cpu"):
        results, target = pipeline.run_variants(cfg, ("dense", "unisparse"), progress=False)
    out = {"target": target, "shares": len(seen), "first": seen[:4]}
    for name, r in results.items():
        out[name] = {k: m.value for k, m in r.metrics.items() if not k.startswith("train_s")}
        out[name + "/lambda"] = [log.get("lambda") for log in r.logs]
        out[name + "/loss"] = [log["loss"] for log in r.logs]
        out[name + "/params"] = float(sum(p.double().sum() for p in r.net.parameters()))
    with open(f"{sys.argv[1]}/rank{w.rank}.json", "w") as f:
        json.dump(out, f)
    """
)


def run_script(code: str, tmp_path: pathlib.Path, torchrun) -> list[dict]:
    (tmp_path / "job.py").write_text(code)
    torchrun([str(tmp_path / "job.py"), str(tmp_path)], tmp_path)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_averaged_shard_gradients_equal_the_full_batch_gradient(tmp_path, torchrun) -> None:
    for got in run_script(PRIMITIVES, tmp_path, torchrun):
        assert got["grad_err"] < 1e-12  # float64, eval-mode BN: exact up to rounding
        assert got["mean"] == 15.0
        assert "ranks [1] hold other parameters than rank 0" in got["agreement"]
        assert got["skips"] == [True, False]  # a global batch of 1 cannot feed 2 ranks


def test_unisparse_phases_on_two_ranks_agree_everywhere(tmp_path, torchrun) -> None:
    rank0, rank1 = run_script(PHASES, tmp_path, torchrun)
    # 8 batches of 32 per epoch, 5 epochs; each rank trained on its own half of every batch
    assert rank0.pop("shares") == rank1.pop("shares") == 40
    assert all(a != b for a, b in zip(rank0.pop("first"), rank1.pop("first")))
    assert rank0 == rank1  # yet the same parameters, multiplier, losses and measurements
    lam = rank0["unisparse/lambda"]
    assert len(lam) == 3 and all(v is not None for v in lam[:2]) and lam[0] != lam[1]
    assert rank0["target"] > 0 and lam[2] > lam[0]  # a budget below dense: the multiplier rose


def test_recipe_under_torchrun_writes_one_report(tmp_path, write_cifar, torchrun) -> None:
    data = write_cifar(tmp_path / "cifar", 8)
    args = ["-m", "neuroedge.models.unisparse.recipe", "--data", str(data)]
    args += ["--out", str(tmp_path / "out"), "--config", "device=cpu", "steps=1", "batch=8"]
    args += ["dense_epochs=1", "variants=dense"]
    done = torchrun(args, tmp_path)
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["data_parallel_ranks"] == 2 and [r["variant"] for r in doc["rows"]] == ["dense"]
    assert done.stdout.count("variant") == 1  # one table: rank 0's


def test_neuroedge_train_under_torchrun_writes_one_checkpoint(tmp_path, torchrun) -> None:
    import torch

    args = ["-m", "neuroedge.cli", "train", "snn.unisparse", "--out", str(tmp_path / "u.pt")]
    args += ["--config", "train_subset=128", "dense_epochs=1", "sparse_epochs=1"]
    args += ["finetune_epochs=1", "budget_ratio=1.0"]
    done = torchrun(args, tmp_path)
    assert done.stdout.count('"data_parallel_ranks": 2') == 1  # rank 0's summary only
    ckpt = torch.load(tmp_path / "u.pt", weights_only=True)
    assert ckpt["config"]["train_subset"] == 128 and "state_dict" in ckpt


def test_data_parallel_bench_runs_both_and_writes_the_ratio(tmp_path: pathlib.Path) -> None:
    from neuroedge.bench.data_parallel import main

    config = ["train_subset=128", "dense_epochs=1", "sparse_epochs=1", "finetune_epochs=1"]
    assert main(["--nproc", "2", "--out", str(tmp_path), "--config", *config]) == 0
    doc = json.loads((tmp_path / "report.json").read_text())
    assert set(doc["rows"]) == {"one_process", "ranks_2"} and doc["speedup_wall"] > 0
    one_row, two_row = doc["rows"]["one_process"], doc["rows"]["ranks_2"]
    assert set(one_row) == set(two_row) and None not in two_row.values()
    for variant in ("dense", "unisparse"):
        assert one_row[f"{variant}_train_s_per_epoch"] > 0 < two_row[f"{variant}_train_s_per_epoch"]
        # the same nets but for per-rank batch-norm statistics (the module's docstring: compared,
        # not required equal), on the same 10-class held-out digits: at most one class's share
        # of them apart (at this size both nets are near chance; a larger run is slow)
        gap = abs(one_row[f"{variant}_accuracy"] - two_row[f"{variant}_accuracy"])
        assert gap <= 0.1, (variant, one_row, two_row)
    one, two = doc["rows"]["one_process"]["wall_s"], doc["rows"]["ranks_2"]["wall_s"]
    assert doc["speedup_wall"] == one / two
    assert main(["--nproc", "1"]) == 2  # one process is not data-parallel
