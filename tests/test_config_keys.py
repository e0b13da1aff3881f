"""Every model declares the config keys it reads; a misspelt key fails before any work."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from neuroedge.cli import main
from neuroedge.registry import get_model, model_names

# Training defaults written out in specs that must not import their (torch) training module.
TRAIN_DEFAULTS = {
    "snn.unisparse": "neuroedge.models.unisparse.train",
    "snn.lif_convnet": "neuroedge.models.lif_convnet.train",
    "event.bivision": "neuroedge.models.bivision.train",
    "causal.cadre": "neuroedge.models.cadre.train",
    "vla.specprune": "neuroedge.models.specprune.train",
    "ttt.linear_attention": "neuroedge.models.ttt.train",
}
NOT_READ_BY_TRAIN = {"causal.cadre": {"threshold"}}  # in DEFAULTS, read by the bench only


@pytest.mark.parametrize("name", model_names())
def test_every_model_declares_its_build_keys(name: str) -> None:
    spec = get_model(name)
    assert spec.valid_config_keys("build") is not None
    if spec.bench is not None:
        assert spec.valid_config_keys("bench"), f"{name} has a bench hook but no bench keys"
    if spec.train is not None:
        assert spec.valid_config_keys("train"), f"{name} has a train hook but no train keys"


@pytest.mark.parametrize("name", sorted(TRAIN_DEFAULTS))
def test_written_out_train_keys_cover_the_training_defaults(name: str) -> None:
    defaults = set(importlib.import_module(TRAIN_DEFAULTS[name]).DEFAULTS)
    spec = get_model(name)
    missing = defaults - spec.valid_config_keys("train")
    assert missing == NOT_READ_BY_TRAIN.get(name, set())


def test_a_misspelt_bench_key_fails_before_the_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "bench",
                "snn.unisparse",
                "--backend",
                "host",
                "--out",
                str(out),
                "--config",
                'variant=["dense"]',
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "snn.unisparse's benchmark does not read the config key 'variant'" in err
    assert "(did you mean 'variants'?)" in err and not out.exists()
    assert main(["run", "snn.lif_convnet", "--config", "untrained=true", "epoch=3"]) == 2
    assert "build does not read the config key 'epoch'" in capsys.readouterr().err
    assert main(["train", "snn.lif_convnet", "--config", "epoch=3"]) == 2
    assert "(did you mean 'epochs'?)" in capsys.readouterr().err


def test_hooks_called_from_python_refuse_a_misspelt_key(tmp_path: Path) -> None:
    from neuroedge.errors import ConfigError

    bench = get_model("snn.unisparse").hook("bench")
    with pytest.raises(ConfigError, match=r"did you mean 'variants'"):
        bench(out_dir=tmp_path / "out", backends=["host"], config={"variant": ["dense"]})
    assert not (tmp_path / "out").exists()
    train = get_model("snn.lif_convnet").hook("train")
    with pytest.raises(ConfigError, match=r"did you mean 'epochs'"):
        train({"epoch": 3}, tmp_path / "ckpt")
