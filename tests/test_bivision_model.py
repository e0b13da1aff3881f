"""event.bivision model: the STATNF step, BiSNet state, the detection head, mAP through
pycocotools, NIR / Lava export refusals and training augmentation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.bivision.detection import coco_map, decode, make_targets
from neuroedge.models.bivision.functional import STATNFParams, STATNFState, statnf_step
from neuroedge.models.bivision.module import BiSNet


def test_statnf_neighbour_support_and_adaptive_threshold():
    lateral = torch.ones(1, 1, 3, 3) * 0.6
    p = STATNFParams(torch.zeros(1), torch.zeros(1), lateral)  # lam 0.5, a = ln 2
    zeros = torch.zeros(1, 1, 3, 3)
    prev = zeros.clone()
    prev[0, 0, 0, 0] = 1.0  # a neighbour of the centre fired
    support = torch.nn.functional.conv2d(
        prev, lateral * torch.tensor([[1.0, 1, 1], [1, 0, 1], [1, 1, 1]]), padding=1
    )
    drive = torch.full((1, 1, 3, 3), 0.5)
    s, state = statnf_step(drive, STATNFState(zeros, prev, zeros), p, support)
    assert s[0, 0, 1, 1] == 1 and s[0, 0, 2, 2] == 0  # only the supported neurons fire
    assert state.h[0, 0, 0, 0] == 1  # trace of the earlier spike
    # the neuron that fired has threshold 1 + ln2 * 1: the same drive no longer suffices
    s2, _ = statnf_step(
        torch.full((1, 1, 3, 3), 1.2),
        STATNFState(zeros, prev, prev * 1.0),
        p,
        torch.zeros(1, 1, 3, 3),
    )
    assert s2[0, 0, 0, 0] == 0 and s2[0, 0, 2, 2] == 1


def test_statnf_membrane_resets_where_the_neuron_spiked_and_leaks_elsewhere():
    """v[t] = lam v[t-1] (1 - s[t-1]) + I: a neuron that spiked starts from its input alone
    (a kept lam * v passed every test before, 2026-12-07 audit); one that did not keeps lam v."""
    p = STATNFParams(torch.zeros(1), torch.full((1,), -20.0), torch.zeros(1, 1, 3, 3))  # lam 1/2
    v = torch.tensor([[[[5.0, 0.8]]]])
    s_prev = torch.tensor([[[[1.0, 0.0]]]])  # the first neuron spiked last step
    drive = torch.full((1, 1, 1, 2), 0.3)
    s, state = statnf_step(drive, STATNFState(v, s_prev, torch.zeros(1, 1, 1, 2)), p, 0 * v)
    assert state.v[0, 0, 0].tolist() == pytest.approx([0.3, 0.5 * 0.8 + 0.3])
    # kept (not reset), 0.5 * 5 + 0.3 = 2.8 would fire again at threshold 1 + a h = 1 + ~0
    assert s[0, 0, 0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("neuron", ["statnf", "lif"])
def test_bisnet_state_is_explicit_and_outputs_have_their_shapes(neuron):
    torch.manual_seed(0)
    net = BiSNet(neuron, 32).eval()
    state = net.init_state(2)
    assert len(state) == len(net.state_names())
    x = (torch.rand(2, 2, 32, 32) < 0.3).float() * 3
    with torch.no_grad():
        first = net(x, *state)
        again = net(x, *state)
        second = net(x, *first[2:])
    assert first[0].shape == (2, 2) and first[1].shape == (2, 5, 8, 8)
    for a, b in zip(first, again):
        assert torch.equal(a, b)  # no hidden state
    assert not torch.equal(first[1], second[1])  # the state carries the past


def test_map_is_one_for_exact_boxes_and_zero_for_misplaced_ones():
    truth = [np.array([[4.0, 4, 10, 8]]), np.array([[16.0, 2, 12, 10], [1, 20, 8, 8]])]
    exact = [np.hstack([t, np.full((len(t), 1), 0.9)]) for t in truth]
    assert coco_map(truth, exact) == {"map50": 1.0, "map": 1.0}
    moved = [np.hstack([t + [30, 0, 0, 0], np.full((len(t), 1), 0.9)]) for t in truth]
    assert coco_map(truth, moved)["map50"] == 0.0


def test_head_targets_decode_back_to_their_boxes():
    truth = [np.array([[4.0, 4, 10, 8]]), np.array([[16.0, 2, 12, 10]])]
    target = make_targets(truth, grid=8, stride=4)
    assert target[:, 5].sum() == 2 and torch.equal(
        target[:, 0][target[:, 5] > 0], torch.ones(2)
    )  # heatmap peaks at centres
    logits = torch.where(target[:, 5:] > 0, 8.0, -8.0)
    offsets = torch.logit(target[:, 1:3].clamp(1e-4, 1 - 1e-4))
    pred = torch.cat([logits, offsets, target[:, 3:5]], 1).numpy()
    found = decode(pred, stride=4)
    assert coco_map(truth, found)["map"] > 0.99


def test_lif_backbone_exports_to_nir_and_statnf_is_refused_with_its_reason():
    pytest.importorskip("nir")
    from neuroedge.models.bivision.neuromorphic import NOT_MAPPED, backbone_to_nir
    from neuroedge.models.bivision.spec import example

    torch.manual_seed(0)
    graph = backbone_to_nir(BiSNet("lif", 32).eval(), example(0))
    kinds = [
        type(graph.nodes[n]).__name__ for n in ("conv1", "lif1", "conv2", "lif2", "conv3", "lif3")
    ]
    assert kinds == ["Conv2d", "LIF"] * 3 and ("lif3", "spikes3") in graph.edges
    with pytest.raises(ValueError, match="no adaptive-threshold"):
        backbone_to_nir(BiSNet("statnf", 32), example(0))
    assert "E2S front end" in NOT_MAPPED


def test_full_detector_refuses_nir_and_lava_naming_the_parts_that_do_not_map():
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.errors import ExportRefused
    from neuroedge.export.nir import to_nir
    from neuroedge.models.bivision.spec import SPEC

    with pytest.raises(ExportRefused, match="STATNF adaptive threshold .*upsampling"):
        to_nir(SPEC.build({"smoke": True}), SPEC)
    support = LavaBackend().supports(SPEC)
    assert not support.ok and "backbone_to_nir" in support.reason


def test_training_augmentation_mirrors_inputs_and_boxes_together():
    from neuroedge.models.bivision.train import _augment, _mirrored

    x = np.zeros((2, 3, 2, 8, 8), np.float32)
    x[:, :, 0, 1, 2] = 1.0  # an ON event at row 1, column 2 in both samples
    out = _augment(x, np.array([True, False]), np.array([False, True]))
    assert out[0, :, 0, 1, 5].all() and out[0].sum() == 3  # mirrored: column 7 - 2
    assert out[1, :, 1, 1, 2].all() and out[1].sum() == 3  # polarity swapped
    assert x[:, :, 0, 1, 2].all()  # the training set itself is untouched
    box = np.array([[2.0, 3.0, 4.0, 5.0]])
    (mirrored,) = _mirrored([box], 32)
    assert mirrored.tolist() == [[26.0, 3.0, 4.0, 5.0]]


def test_centre_heatmap_loss_prefers_the_box_centre():
    from neuroedge.models.bivision.detection import detection_loss

    truth = [np.array([[12.0, 6, 12, 8]])]  # centre (18, 10): mid-cell (2, 4) of the stride-4 grid
    target = make_targets(truth, grid=8, stride=4)
    assert target[0, 5, 2, 4] == 1 and 0 < target[0, 0, 2, 5] < 1  # a Gaussian around it
    right, wrong = torch.full((1, 5, 8, 8), -6.0), torch.full((1, 5, 8, 8), -6.0)
    right[0, 0, 2, 4] = wrong[0, 0, 6, 1] = 6.0
    for pred in (right, wrong):
        pred[:, 1:3] = 0.0
        pred[:, 3:5] = target[:, 3:5]
    assert detection_loss(right, target) < 0.1 < detection_loss(wrong, target)


def test_augmentation_names_parse_and_reject_unknown_ones():
    from neuroedge.models.bivision.train import augmentations

    assert augmentations("flip+swap").tolist() == [True, True]
    assert augmentations("none").tolist() == [False, False]
    assert augmentations(True).tolist() == [True, False]
    with pytest.raises(ValueError, match="augment 'rotate'"):
        augmentations("rotate")


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (2.5, r"size=2.5: expected an integer in 8..1024"),  # was cut to 2, then named "2"
        (1032, r"size=1032: expected an integer in 8..1024"),  # training's cap (was 4096)
        (True, "size=True"),
        (0, "size=0"),
        (12, "input size 12 must be a multiple of 8"),
    ],
)
def test_a_bad_net_size_is_refused_as_given(size, message):
    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision.train import make_net

    with pytest.raises((ConfigError, ValueError), match=message):
        make_net({"variant": "statnf_e2s", "size": size, "seed": 0})
    with pytest.raises((ConfigError, ValueError), match="seed=1.5"):
        make_net({"variant": "statnf_e2s", "size": 32, "seed": 1.5})
    assert make_net({"variant": "statnf_e2s", "size": 32}).size == 32


def test_a_net_of_another_sensor_size_builds_runs_and_exports_at_that_size(tmp_path) -> None:
    """A checkpoint trained at 48x48 (your own recordings) is built, given examples, run on host
    and ONNX Runtime at 48x48; an input of the default 32x32 is refused naming the size."""
    from neuroedge.api import deploy
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.errors import InputError
    from neuroedge.models.bivision.spec import SPEC, sensor_size
    from neuroedge.models.bivision.train import make_net
    from neuroedge.registry import get_backend

    cfg = {"variant": "statnf_e2s", "size": 48, "seed": 3}
    net = make_net(cfg)
    path = save_checkpoint(tmp_path / "b48.pt", {"state_dict": net.state_dict(), "config": cfg})
    config = {"checkpoint": str(path)}
    assert sensor_size(config) == 48 and sensor_size({"smoke": True}) == 32
    x = SPEC.example_for(0, config)["x"]
    assert x.shape == (5, 1, 2, 48, 48) and x.any()
    host = get_backend("host")
    art = host.compile(SPEC.build(config), SPEC)
    out = host.run(art, {"x": x})
    assert out["detection"].shape == (5, 1, 5, 12, 12) and out["logits"].shape == (5, 1, 2)
    with torch.inference_mode():  # the checkpoint's weights, not a fresh net's
        assert torch.equal(next(art.handle.module.parameters()), next(net.parameters()))
    small = SPEC.example_for(0, {"smoke": True})["x"]
    with pytest.raises(
        InputError, match=r"axis 3 \(size\) is 32 but the built model fixed size=48"
    ):
        host.run(art, {"x": small})
    pytest.importorskip("onnxruntime")
    ort_art, report = deploy("event.bivision", "onnxrt", config)
    assert report.metrics["within_tolerance"].value == 1.0
    assert np.allclose(
        get_backend("onnxrt").run(ort_art, {"x": x})["logits"], out["logits"], atol=1e-4
    )
    with pytest.raises(InputError, match=r"the built model fixed size=48"):
        get_backend("onnxrt").run(ort_art, {"x": small})


@pytest.mark.parametrize(
    ("saved", "config", "message"),
    [
        ({"size": None}, {}, r"checkpoint config size=None: expected a multiple of 8 in 8\.\.1024"),
        ({"size": 2048}, {}, r"checkpoint config size=2048: expected a multiple of 8 in 8\.\.1024"),
        ({"size": 12}, {}, r"checkpoint config size=12: expected a multiple of 8"),
        ({"variant": "bogus"}, {}, r"checkpoint config variant='bogus': expected one of"),
        ({}, {"size": 32}, r"size=32 contradicts the checkpoint .* \(trained with size=16\)"),
        ({}, {"variant": "lif_histogram"}, r"variant='lif_histogram' contradicts the checkpoint"),
        ({}, {"smoke": True}, r"smoke=true builds an untrained net, so checkpoint="),
        ({"seed": 0}, {"seed": 9}, r"seed=9 contradicts the checkpoint .* \(trained with seed=0\)"),
        ({"task": "detection"}, {"task": "classification"}, r"task='classification' contradicts"),
    ],
)
def test_a_checkpoint_config_that_cannot_be_built_or_is_contradicted_is_named(
    tmp_path, saved, config, message
) -> None:
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.errors import NeuroedgeError
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.models.bivision.train import make_net

    cfg = {"variant": "statnf_e2s", "size": 16}
    path = save_checkpoint(
        tmp_path / "c.pt", {"state_dict": make_net(cfg).state_dict(), "config": {**cfg, **saved}}
    )
    with pytest.raises(NeuroedgeError, match=message):
        SPEC.build({"checkpoint": str(path), **config})
    with pytest.raises(NeuroedgeError, match=message):
        SPEC.example_for(0, {"checkpoint": str(path), **config})


@pytest.mark.parametrize(("width", "height"), [(16, 32), (12, 12)])
def test_training_on_a_folder_whose_sensor_the_net_cannot_take_names_the_folder(
    tmp_path, width, height
) -> None:
    import json

    from neuroedge.errors import ConfigError
    from neuroedge.models.bivision.spec import SPEC

    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "config.json").write_text(json.dumps({"width": width, "height": height}))
    with pytest.raises(ConfigError, match=rf"config.json: a {width}x{height} sensor; the net "):
        SPEC.train({"data": str(tmp_path / "ds")})


@pytest.mark.parametrize("variant", ["statnf_e2s", "lif_histogram"])
def test_evaluation_feeds_the_representation_of_the_nets_variant(variant) -> None:
    # a lif_histogram net was scored on E2S spikes (0/1) until 2026-12-06
    from neuroedge.registry import get_model

    seen = {}

    def run(inputs):
        seen["x"] = inputs["x"]
        t, n = inputs["x"].shape[:2]
        return {"logits": np.zeros((t, n, 2), np.float32)}

    get_model("event.bivision").evaluate(
        run, {"smoke": True, "variant": variant, "eval_samples": 4}
    )
    values = set(np.unique(seen["x"]).tolist())
    if variant == "statnf_e2s":
        assert values <= {0.0, 1.0}
    else:  # log1p of event counts
        assert max(values) > 1.0 and any(v != int(v) for v in values)


def test_a_seed_that_contradicts_the_checkpoint_is_refused_by_the_cli(tmp_path, capsys) -> None:
    """``seed`` drew only the weights the checkpoint then overwrote: seed=9 ran the seed-0 net
    (size and variant were refused, seed not). A checkpoint that saved no seed or task (from
    before those keys) contradicts neither."""
    from neuroedge.checkpoints import save_checkpoint
    from neuroedge.cli import main
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.models.bivision.train import DEFAULTS, make_net

    cfg = {**DEFAULTS, "size": 16, "seed": 0}
    path = save_checkpoint(
        tmp_path / "c.pt", {"state_dict": make_net(cfg).state_dict(), "config": cfg}
    )
    run = ["run", "event.bivision", "--backend", "null", "--repeats", "1", "--config"]
    assert main([*run, f"checkpoint={path}", "seed=9"]) == 2
    assert f"seed=9 contradicts the checkpoint {path} (trained with seed=0)" in (
        capsys.readouterr().err
    )
    assert main([*run, f"checkpoint={path}", "seed=0"]) == 0
    assert main([*run, f"checkpoint={path}", "seed=true"]) == 2  # True == 1: not a seed
    assert "seed=True: expected an integer in 0..4294967295" in capsys.readouterr().err
    old = {k: v for k, v in cfg.items() if k not in ("seed", "task")}  # saved before those keys
    old_path = save_checkpoint(
        tmp_path / "old.pt", {"state_dict": make_net(cfg).state_dict(), "config": old}
    )
    program = SPEC.build({"checkpoint": str(old_path), "seed": 9, "task": "detection"})
    assert program.meta["trained"]  # unknown, not contradicted: was a KeyError without the guard


def test_a_detection_net_trained_by_the_cli_is_the_one_task_detection_builds(
    tmp_path, monkeypatch, capsys
) -> None:
    """`neuroedge train event.bivision --config task=detection` saves event.bivision.detection;
    every build read event.bivision.classification (task was no build key). Trained for real,
    tiny (about 2 s), through the CLI: the path training writes is the one a build reads."""
    import json

    from neuroedge.cli import main
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.paths import checkpoint_path

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    tiny = ["size=16", "train_samples=8", "test_samples=8", "epochs=1", "batch=8"]
    assert main(["train", "event.bivision", "--config", "task=detection", *tiny]) == 0
    path = json.loads(capsys.readouterr().out)["path"]
    assert path == str(checkpoint_path("event.bivision.detection"))
    program = SPEC.build({"task": "detection"})
    assert program.meta["trained"] and program.meta["task"] == "detection"
    assert program.meta["checkpoint"] == path and program.meta["axes"]["size"] == 16
    assert not SPEC.build({}).meta["trained"]  # no classification net there
    run = ["run", "event.bivision", "--backend", "null", "--repeats", "1", "--config"]
    assert main([*run, "task=detection"]) == 0, capsys.readouterr().err
    assert main([*run, f"checkpoint={path}", "task=classification"]) == 2
    assert "task='classification' contradicts the checkpoint" in capsys.readouterr().err
