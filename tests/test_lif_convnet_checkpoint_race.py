"""snn.lif_convnet read its checkpoint once: a bench's example and evaluate follow the net the
build loaded (its ``meta["config"]``), not the checkpoint file read again, which another
process (``neuroedge train`` saving to the same path) may have replaced meanwhile: the
seed-0 net was scored on seed 3's test split, 80% of it seed 0's training digits.

The checkpoints are saved as the train hook saves them, with untrained weights: no training
runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from neuroedge.bench.runner import bench_model
from neuroedge.checkpoints import save_checkpoint
from neuroedge.models.lif_convnet import spec as lif_spec
from neuroedge.models.lif_convnet import train
from neuroedge.models.lif_convnet.data import load_digits_split


def _save(path: Path, seed: int, steps: int = 8) -> Path:
    cfg = train.check_config({"seed": seed, "steps": steps, "channels1": 4, "channels2": 4})
    net = train.make_net(cfg)
    return save_checkpoint(path, {"state_dict": net.state_dict(), "config": cfg})


def _rows(images: np.ndarray) -> set[bytes]:
    return {a.tobytes() for a in images}


def test_a_checkpoint_replaced_after_the_build_does_not_change_the_split(tmp_path) -> None:
    path = _save(tmp_path / "lif.pt", seed=0)
    other = _save(tmp_path / "other.pt", seed=3).read_bytes()
    seen: list[np.ndarray] = []

    def build_then_replaced(config):
        program = lif_spec.build(config)
        path.write_bytes(other)  # what another shell's `neuroedge train --config seed=3` does
        return program

    def recorded(run, config):
        def recording_run(inputs):
            seen.append(inputs["x"][0])
            return run(inputs)

        return lif_spec.evaluate(recording_run, config)

    def example(seed=0, config=None):
        x = lif_spec.example(seed, config)
        seen.append(x["x"][0])
        return x

    spec = dataclasses.replace(
        lif_spec.SPEC, build=build_then_replaced, evaluate=recorded, example=example
    )
    rows = bench_model(spec, ["host"], config={"checkpoint": str(path)}, repeats=1, progress=False)
    assert "accuracy" in rows[0].metrics
    images = np.concatenate(seen)
    assert len(images) == len(load_digits_split(0).x_test) + 1  # the example, then evaluate
    assert _rows(images) <= _rows(load_digits_split(0).x_test)
    assert not _rows(images) & _rows(load_digits_split(0).x_train)


def test_the_built_example_follows_the_built_net_not_the_file(tmp_path) -> None:
    path = _save(tmp_path / "lif.pt", seed=0)
    program = lif_spec.build({"checkpoint": str(path)})
    _save(path, seed=3)  # replaced: ONNX export and calibration build their inputs after this
    x = lif_spec.SPEC.built_example(0, program)["x"]
    assert x[0, 0].tobytes() in _rows(load_digits_split(0).x_test)
    assert lif_spec.net_config(program.meta["config"])["seed"] == 0


def _racing_spec(path: Path, other: bytes, before: bool, seen: list[np.ndarray]):
    """snn.lif_convnet whose build finds the checkpoint at ``path`` replaced by ``other`` (a
    train in another shell) just ``before`` it reads it, else just after; ``seen`` records each
    example made."""

    def build_racing(config):
        if before:
            path.write_bytes(other)
        program = lif_spec.build(config)
        if not before:
            path.write_bytes(other)
        return program

    def example(seed=0, config=None):
        x = lif_spec.example(seed, config)
        seen.append(x["x"])
        return x

    return dataclasses.replace(lif_spec.SPEC, build=build_racing, example=example)


def _example_of(checkpoint: Path, seed: int, steps: int) -> np.ndarray:
    """The example ``seed`` of the net saved at ``checkpoint`` (its split, for its steps)."""
    x = lif_spec.example(seed, {"checkpoint": str(checkpoint)})["x"]
    assert x.shape[0] == steps
    return x


def test_deploy_profiles_the_example_of_the_net_it_built(tmp_path, monkeypatch) -> None:
    import neuroedge as ne
    from neuroedge import api

    path = _save(tmp_path / "lif.pt", seed=0)
    built = _example_of(_save(tmp_path / "s0.pt", seed=0), 0, 8)
    other = _save(tmp_path / "s3.pt", seed=3, steps=16)
    seen: list[np.ndarray] = []
    spec = _racing_spec(path, other.read_bytes(), before=False, seen=seen)
    monkeypatch.setattr(api, "get_model", lambda name: spec)
    artifact, report = ne.deploy("snn.lif_convnet", "host", {"checkpoint": str(path)}, repeats=1)
    assert report.metrics["latency_p50_ms"].value > 0
    ne.profile(artifact, repeats=1)  # its default example follows the built net too
    assert len(seen) == 2 and all(np.array_equal(x, built) for x in seen)


def test_cli_run_runs_the_example_of_the_net_it_built(tmp_path, monkeypatch, capsys) -> None:
    from neuroedge import api, registry
    from neuroedge.cli import main

    path = _save(tmp_path / "lif.pt", seed=0)
    other = _save(tmp_path / "s3.pt", seed=3, steps=16)
    built = _example_of(other, 5, 16)  # replaced before the build read it: the seed-3 net
    seen: list[np.ndarray] = []
    spec = _racing_spec(path, other.read_bytes(), before=True, seen=seen)
    monkeypatch.setattr(api, "get_model", lambda name: spec)
    monkeypatch.setattr(registry, "get_model", lambda name: spec)
    argv = ["run", "snn.lif_convnet", "--seed", "5", "--repeats", "1", "--config"]
    assert main([*argv, f"checkpoint={path}"]) == 0, capsys.readouterr().err
    assert len(seen) == 1 and np.array_equal(seen[0], built)
    assert "logits         shape [16, 1, 10]" in capsys.readouterr().out
