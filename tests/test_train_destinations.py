"""`neuroedge train`: bad values and unwritable destinations refused before any training,
and one seed giving one checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from neuroedge.cli import main


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lr=-1", "lr=-1: expected a finite number in (0, 10]"),
        ("batch=0", "batch=0: expected an integer >= 1"),
        ("heads=3", "dim=128 heads=3: each head needs an even width"),
        ("threads=0", "threads=0: expected an integer in 1..4096"),
        ("init=/no/such.pt", "init='/no/such.pt': no such checkpoint file"),
    ],
)
def test_specprune_training_values_are_refused_before_the_demos(value, message, capsys) -> None:
    """They failed after 11-20 minutes of expert demos, some as raw tracebacks."""
    assert main(["train", "vla.specprune", "--config", value]) == 2
    assert message in capsys.readouterr().err


def test_an_unwritable_checkpoint_destination_is_refused_before_training(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    monkeypatch.setenv("NEUROEDGE_HOME", str(blocker))
    assert main(["train", "snn.lif_convnet", "--config", "epochs=1"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    args = ["train", "causal.cadre", "--config", f"checkpoint={blocker}/x.pt", "steps=1"]
    assert main(args) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    ttt = ["train", "ttt.linear_attention", "--out", str(blocker), "--config", "steps=1"]
    assert main(ttt) == 2  # its --out is a results folder: a file there is refused at once
    assert "give a folder" in capsys.readouterr().err


def test_cadre_training_is_one_checkpoint_per_seed(tmp_path: Path) -> None:
    import torch
    from neuroedge.models.cadre.spec import train

    config = {"steps": 2, "n": 100, "hidden": 8, "seed": 0}
    states = []
    for i in range(2):
        train(config, str(tmp_path / f"c{i}.pt"))
        states.append(torch.load(tmp_path / f"c{i}.pt", weights_only=True)["state_dict"])
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_train_checks_named_and_default_destinations_as_run_does(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """checkpoint=5 crashed in the path check and checkpoint= trained into the default; the
    TTT ladder's default folder was not checked (a file there failed after the training)."""
    for value, message in (
        ("checkpoint=5", "expected the path of a checkpoint file"),
        ("checkpoint=", "an empty path"),
    ):
        assert main(["train", "causal.cadre", "--config", value, "steps=1"]) == 2
        assert message in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ttt_ladder").write_text("")
    assert main(["train", "ttt.linear_attention", "--config", "steps=1"]) == 2
    assert "ttt_ladder: is a file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "verb"),
    [
        ("snn.lif_convnet", ["run", "--repeats", "1"]),
        ("snn.lif_convnet", ["export", "--out", "{tmp}/m.onnx"]),
        ("vla.specprune", ["run", "--repeats", "1"]),
    ],
)
def test_a_build_that_trains_checks_the_checkpoint_folder_first(
    model: str, verb: list[str], tmp_path: Path, monkeypatch, capsys
) -> None:
    """run/export train a missing checkpoint (train_if_missing): an unwritable destination
    failed after the training (20 epochs; vla.specprune's about 75 minutes)."""
    import importlib

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started before the destination was checked")

    train = importlib.import_module(f"neuroedge.models.{model.split('.')[1]}.train")
    monkeypatch.setattr(train, "train", never)
    home = "/proc/neuroedge-audit-nope"  # /proc takes no new file, not even from root
    monkeypatch.setenv("NEUROEDGE_HOME", home)
    argv = [verb[0], model, *(a.format(tmp=tmp_path) for a in verb[1:])]
    assert main(argv) == 2
    assert f"cannot write {home}/checkpoints/{model}.pt: /proc takes" in capsys.readouterr().err
