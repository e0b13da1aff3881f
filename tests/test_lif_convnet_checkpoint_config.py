"""snn.lif_convnet follows the settings its checkpoint was trained with: examples and
evaluation use the checkpoint's data split (``seed``) and ``steps``, and the output shapes
its ``channels1``/``channels2`` (symbolic axes fixed by ``meta["axes"]``), on every backend.

The checkpoints here are saved as the train hook saves them, with untrained weights: no
training runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.models.lif_convnet import spec as lif_spec
from neuroedge.models.lif_convnet import train
from neuroedge.models.lif_convnet.data import load_digits_split
from neuroedge.registry import get_backend

SETTINGS = {"steps": 16, "seed": 3, "channels1": 8}  # all differ from the defaults


def _save(path: Path, config: dict, saved_config: object = None) -> Path:
    """A checkpoint as ``train.train`` saves it (weights of ``config``, untrained)."""
    cfg = train.check_config(config)
    net = train.make_net(cfg)
    payload = {
        "state_dict": net.state_dict(),
        "config": cfg if saved_config is None else saved_config,
    }
    return save_checkpoint(path, {**payload, "metrics": {"accuracy": 0.5}})


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    return _save(tmp_path / "lif_s3.pt", SETTINGS)


def _rows(images: np.ndarray) -> list[bytes]:
    return [a.tobytes() for a in images]


def test_example_uses_the_checkpoints_split_and_steps(ckpt: Path) -> None:
    config = {**lif_spec.SPEC.default_config, "checkpoint": str(ckpt)}
    train_rows = set(_rows(load_digits_split(3).x_train))
    test_rows = set(_rows(load_digits_split(3).x_test))
    for seed in range(20):
        x = lif_spec.SPEC.example_for(seed, config)["x"]
        assert x.shape == (16, 1, 1, 8, 8)
        assert x[0, 0].tobytes() in test_rows and x[0, 0].tobytes() not in train_rows


def test_evaluate_uses_the_held_out_split_of_the_checkpoints_seed(ckpt: Path) -> None:
    seen: list[np.ndarray] = []

    def run(inputs: dict) -> dict:
        seen.append(inputs["x"])
        return {"logits": np.zeros((*inputs["x"].shape[:2], 10), np.float32)}

    config = {**lif_spec.SPEC.default_config, "checkpoint": str(ckpt), "eval_batch": 100}
    lif_spec.evaluate(run, config)
    assert {x.shape[0] for x in seen} == {16}
    images = np.concatenate([x[0] for x in seen])
    expected = load_digits_split(3).x_test
    np.testing.assert_array_equal(images, expected)
    assert not set(_rows(images)) & set(_rows(load_digits_split(3).x_train))


def test_output_shapes_follow_the_checkpoints_channels_on_every_backend(ckpt: Path) -> None:
    config = {**lif_spec.SPEC.default_config, "checkpoint": str(ckpt)}
    program = lif_spec.build(config)
    assert program.meta["trained"]
    assert program.meta["axes"] == {"channels1": 8, "channels2": 32}
    assert {k: program.meta["config"][k] for k in lif_spec.NET_KEYS} == {
        **SETTINGS,
        "channels2": 32,
    }
    example = lif_spec.SPEC.example_for(0, program.meta["config"])
    shapes = {}
    for name in ("host", "null"):
        backend = get_backend(name)
        out = backend.run(backend.compile(program, lif_spec.SPEC), example)
        shapes[name] = {io.name: np.asarray(out[io.name]).shape for io in lif_spec.SPEC.outputs}
    assert shapes["host"] == shapes["null"]
    assert shapes["host"]["spikes1"] == (16, 1, 8, 8, 8)
    assert shapes["host"]["spikes2"] == (16, 1, 32, 4, 4)
    assert [io.describe().split(":")[0] for io in lif_spec.SPEC.outputs][1:] == [
        "spikes1[T, batch, channels1, 8, 8]",
        "spikes2[T, batch, channels2, 4, 4]",
    ]


def test_onnx_export_and_onnxrt_follow_the_checkpoint(ckpt: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from neuroedge.api import export

    config = {"checkpoint": str(ckpt)}
    out = export("snn.lif_convnet", "onnx", tmp_path / "lif.onnx", config)
    assert out.is_file()
    program = lif_spec.build(config)
    backend = get_backend("onnxrt")
    art = backend.compile(program, lif_spec.SPEC)
    got = backend.run(art, lif_spec.SPEC.example_for(1, config))
    assert np.asarray(got["spikes1"]).shape == (16, 1, 8, 8, 8)


def test_the_default_checkpoint_is_followed_too(tmp_path: Path, monkeypatch) -> None:
    from neuroedge.paths import checkpoint_path

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    _save(checkpoint_path("snn.lif_convnet"), {"steps": 5, "seed": 7, "channels2": 4})
    config = dict(lif_spec.SPEC.default_config)  # no checkpoint key: the default path
    assert lif_spec.SPEC.example_for(0, config)["x"].shape[0] == 5
    program = lif_spec.build(config)
    assert program.meta["axes"] == {"channels1": 16, "channels2": 4}
    assert lif_spec.net_config(config)["seed"] == 7


def test_an_untrained_build_follows_its_config() -> None:
    config = {"smoke": True, "seed": 2, "steps": 3, "channels1": 4, "channels2": 6}
    program = lif_spec.build(config)
    assert not program.meta["trained"]
    assert program.meta["axes"] == {"channels1": 4, "channels2": 6}
    x = lif_spec.SPEC.example_for(0, config)["x"]
    assert x.shape == (3, 1, 1, 8, 8)
    assert x[0, 0].tobytes() in set(_rows(load_digits_split(2).x_test))
    host = get_backend("host")
    out = host.run(host.compile(program, lif_spec.SPEC), {"x": x})
    assert np.asarray(out["spikes2"]).shape == (3, 1, 6, 4, 4)
    plain = lif_spec.build({"smoke": True})  # defaults, as before
    assert plain.meta["axes"] == {"channels1": 16, "channels2": 32}
    assert lif_spec.example(0, {"smoke": True})["x"].shape[0] == lif_spec.STEPS


def test_a_config_that_contradicts_the_checkpoint_is_refused(ckpt: Path) -> None:
    for key, value in (("seed", 0), ("steps", 8), ("channels1", 16), ("channels2", 4)):
        config = {"checkpoint": str(ckpt), key: value}
        with pytest.raises(ConfigError, match=rf"{key}={value} contradicts the checkpoint"):
            lif_spec.build(config)
        with pytest.raises(ConfigError, match=rf"{key}={value} contradicts the checkpoint"):
            lif_spec.SPEC.example_for(0, config)
    agreeing = {"checkpoint": str(ckpt), **SETTINGS}
    assert lif_spec.build(agreeing).meta["trained"]
    with pytest.raises(ConfigError, match=r"steps=0: expected an integer in 1\.\."):
        lif_spec.build({"smoke": True, "steps": 0})


@pytest.mark.parametrize(
    ("saved", "message"),
    [
        ([1, 2], r"checkpoint config is a list, expected a dict"),
        ({"steps": 0}, r"checkpoint config steps=0: expected an integer in 1\.\."),
        ({"channels1": "8"}, r"checkpoint config channels1='8': expected an integer"),
    ],
)
def test_a_bad_saved_config_names_the_file(tmp_path: Path, saved, message) -> None:
    bad = _save(tmp_path / "bad.pt", {}, saved_config=saved)
    with pytest.raises(ArtifactError, match=rf"bad\.pt: {message}"):
        lif_spec.build({"checkpoint": str(bad)})


def test_train_if_missing_trains_with_the_configs_settings(tmp_path, monkeypatch) -> None:
    calls: list[dict] = []

    def fake_train(config, out=None, progress=True):
        calls.append(dict(config))
        _save(Path(out), config)
        return {"path": str(out)}

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(train, "train", fake_train)
    with pytest.raises(ConfigError, match=r"seed=2 contradicts train_config seed=5"):
        lif_spec.build({"train_if_missing": True, "seed": 2, "train_config": {"seed": 5}})
    assert calls == []
    config = {"train_if_missing": True, "steps": 4, "train_config": {"seed": 5, "epochs": 1}}
    assert lif_spec.net_config(config)["seed"] == 5  # before the checkpoint exists
    program = lif_spec.build(config)
    assert calls == [{"steps": 4, "seed": 5, "epochs": 1}]
    assert program.meta["trained"] and program.meta["config"]["seed"] == 5
    assert lif_spec.SPEC.example_for(0, config)["x"].shape[0] == 4


def test_cli_run_with_a_checkpoint_on_null_and_host(ckpt: Path, capsys) -> None:
    from neuroedge.cli import main

    for backend in ("null", "host"):
        code = main(
            ["run", "snn.lif_convnet", "--backend", backend, "--config", f"checkpoint={ckpt}"]
        )
        assert code == 0, capsys.readouterr().err
    assert "[16, 1, 8, 8, 8]" in capsys.readouterr().out.replace("(", "[").replace(")", "]")


def test_a_train_config_that_contradicts_the_checkpoint_is_refused(
    ckpt: Path, tmp_path: Path, capsys
) -> None:
    from neuroedge.cli import main

    asked = {"checkpoint": str(ckpt), "train_config": {"epochs": 2, "seed": 1}}
    message = rf"train_config epochs=2 contradicts the checkpoint {ckpt} \(trained with epochs=20"
    with pytest.raises(ConfigError, match=message):
        lif_spec.build(asked)
    with pytest.raises(ConfigError, match=message):
        lif_spec.SPEC.example_for(0, asked)
    config = ["--config", f"checkpoint={ckpt}", 'train_config={"seed": 1}']
    out = ["--out", str(tmp_path / "bench")]
    assert main(["bench", "snn.lif_convnet", "--backend", "host", *out, *config]) == 2
    err = capsys.readouterr().err
    assert f"train_config seed=1 contradicts the checkpoint {ckpt} (trained with seed=3" in err
    agreeing = {"checkpoint": str(ckpt), "train_config": {"seed": 3, "epochs": 20}}
    assert lif_spec.build(agreeing).meta["trained"]
