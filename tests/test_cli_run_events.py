"""`neuroedge run event.bivision --events FILE`: an event-camera recording (any supported
format) cropped to a square, scaled to the net's side, cut into 100 ms windows and run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroedge.cli import main
from neuroedge.errors import InputError
from neuroedge.events.core import SensorSize
from neuroedge.events.io import write_events
from neuroedge.models.bivision.data import represent_windows
from neuroedge.models.bivision.recording import crop_and_scale, recording_inputs

NAME = "event.bivision"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "events"


def _recording(tmp_path: Path, fmt: str = "aedat4", width: int = 96, height: int = 64) -> Path:
    """A generated 250 ms recording of a moving car on a width x height sensor."""
    from neuroedge.events.generate import random_object
    from neuroedge.events.simulator import DVSParams, simulate

    sensor, rng = SensorSize(width, height), np.random.default_rng(3)
    car = random_object("car", sensor, 250_000, rng)
    events = simulate([car], sensor, 250_000, DVSParams(noise_rate_hz=5.0), 3)
    suffix = {"aedat4": ".aedat4", "evt3": ".raw", "dat": ".dat"}[fmt]
    return write_events(tmp_path / f"rec{suffix}", events, fmt, sensor=sensor)


def test_scaling_is_plain_binning_when_the_side_is_a_multiple() -> None:
    from neuroedge.events.core import make_events

    rng = np.random.default_rng(0)
    x, y = rng.integers(16, 16 + 64, 500), rng.integers(8, 8 + 64, 500)
    ev = make_events(np.arange(500), x, y, rng.integers(0, 2, 500))
    out = crop_and_scale(ev, (16, 8, 64), 32)
    np.testing.assert_array_equal(out["x"], (x - 16) // 2)
    np.testing.assert_array_equal(out["y"], (y - 8) // 2)
    assert len(crop_and_scale(ev, (0, 0, 16), 32)) == 0  # nothing in that corner


@pytest.mark.parametrize("fmt", ["aedat4", "evt3"])
def test_recording_becomes_the_windows_of_its_centred_square(tmp_path: Path, fmt: str) -> None:
    from neuroedge.events.io import read_events

    path = _recording(tmp_path, fmt)
    inputs, line = recording_inputs(path, {"smoke": True})
    events = read_events(path)
    keep = (events["x"] >= 16) & (events["x"] < 80)  # 96x64: the centred 64-pixel square
    cut = events[keep].copy()
    cut["x"], cut["y"] = (cut["x"] - 16) // 2, cut["y"] // 2  # 64 -> 32: binning by 2
    want = represent_windows(cut, SensorSize(32, 32))
    assert inputs["x"].shape == want.shape == (5, 3, 2, 32, 32)  # 250 ms: three windows
    np.testing.assert_array_equal(inputs["x"], want)
    assert "sensor 96x64 (from the header)" in line and "crop x0=16 y0=0 side=64" in line
    assert "3 windows of 100 ms" in line


def test_max_windows_stops_reading_and_keeps_the_first(tmp_path: Path) -> None:
    path = _recording(tmp_path)
    whole = recording_inputs(path, {"smoke": True})[0]["x"]
    first, line = recording_inputs(path, {"smoke": True}, max_windows=1)
    np.testing.assert_array_equal(first["x"], whole[:, :1])
    assert "1 window of 100 ms" in line and "the recording goes on past them" in line
    assert "goes on" not in recording_inputs(path, {"smoke": True}, max_windows=3)[1]
    assert "goes on" not in recording_inputs(path, {"smoke": True}, max_windows=None)[1]


def test_cli_runs_a_recording_and_writes_one_logit_row_per_window(tmp_path: Path, capsys) -> None:
    path, out = _recording(tmp_path, "evt3"), tmp_path / "y.npz"
    args = ["run", NAME, "--config", "smoke=true", "--events", str(path), "--crop", "20,10,48"]
    assert main([*args, "--max-windows", "2", "--output", str(out), "--repeats", "2"]) == 0
    printed = capsys.readouterr().out
    assert "crop x0=20 y0=10 side=48 -> 32x32" in printed and "2 windows" in printed
    with np.load(out) as got:
        assert got["logits"].shape == (5, 2, 2) and np.isfinite(got["logits"]).all()


def test_the_shared_aedat4_recording_runs_on_onnxrt_like_the_host(capsys) -> None:
    pytest.importorskip("onnxruntime")
    path = SHARED / "sample.aedat4"
    if not path.is_file():
        pytest.skip(f"{path}: the shared recordings are not beside this checkout")
    args = ["run", NAME, "--events", str(path), "--max-windows", "3", "--repeats", "2"]
    assert main([*args, "--backend", "onnxrt", "--config", "smoke=true"]) == 0
    printed = capsys.readouterr().out
    assert "sensor 320x240 (from the header)" in printed and "3 windows" in printed
    assert "within_tolerance 1" in printed


def test_bad_requests_are_refused_before_any_run(tmp_path: Path, capsys) -> None:
    path = _recording(tmp_path)
    cases = [
        (["--events", str(path), "--crop", "60,0,64"], "leaves the 96x64 sensor"),
        (["--events", str(path), "--crop", "1,2"], "expected X0,Y0,SIDE"),
        (["--events", str(path), "--max-windows", "0"], "expected an integer >= 1"),
        (["--crop", "0,0,8"], "add --events FILE"),
        (["--events", str(path), "--input", str(path)], "give one"),
        (["--events", str(path), "--seed", "1"], "with --events it has no use"),
        (["--events", str(tmp_path / "none.raw")], "no such event file"),
        (["--events", "", "--input", str(path)], "give one"),
        (["--events", "", "--seed", "3"], "with --events it has no use"),
    ]
    for extra, message in cases:
        assert main(["run", NAME, "--config", "smoke=true", *extra]) == 2, extra
        assert message in capsys.readouterr().err, extra
    assert main(["run", "snn.lif_convnet", "--events", str(path)]) == 2
    assert "takes no event recordings" in capsys.readouterr().err
    with pytest.raises(InputError, match="--max-windows 2.5: expected an integer"):
        recording_inputs(path, {"smoke": True}, max_windows=2.5)
    from neuroedge.events.core import make_events

    right = make_events(np.arange(50) * 1000, np.full(50, 90), np.arange(50), np.ones(50))
    corner = write_events(tmp_path / "right.aedat4", right, "aedat4", sensor=SensorSize(96, 64))
    with pytest.raises(InputError, match="none of the 50 events read lies in the crop x 0..31"):
        recording_inputs(corner, {"smoke": True}, crop=(0, 0, 32))


def test_lava_refuses_event_bivision_before_the_recording_is_read(
    tmp_path: Path, capsys, require
) -> None:
    require("lava")  # its probe is read first: without lava, "lava is not available"
    path = _recording(tmp_path)
    assert main(["run", NAME, "--events", str(path), "--backend", "lava"]) == 2
    captured = capsys.readouterr()
    assert "does not take event.bivision" in captured.err and "events " not in captured.out


def test_the_nets_own_side_and_representation_are_used(tmp_path: Path) -> None:
    inputs, line = recording_inputs(
        _recording(tmp_path), {"smoke": True, "size": 16, "variant": "lif_histogram"}
    )
    assert inputs["x"].shape == (5, 3, 2, 16, 16)
    assert "-> 16x16" in line and "(histogram)" in line


def test_prophesee_headers_without_a_size_imply_the_plugins_sensor(capsys) -> None:
    from neuroedge.events.io import plugin_sensor, recording_sensor

    if not SHARED.is_dir():
        pytest.skip(f"{SHARED}: the shared recordings are not beside this checkout")
    # the shared README: Gen3 640x480 (x max 599), Gen4.1 1280x720; neither header says so
    assert recording_sensor(SHARED / "evt2_sample.raw") is None  # readers validate against none
    assert plugin_sensor(SHARED / "evt2_sample.raw") == (
        SensorSize(640, 480),
        "hal_plugin_gen3_fx3",
    )
    assert plugin_sensor(SHARED / "evt3_sample.raw")[0] == SensorSize(1280, 720)
    assert plugin_sensor(SHARED / "nmnist_sample.bin") is None  # ATIS: no header at all
    line = recording_inputs(SHARED / "evt2_sample.raw", {"smoke": True})[1]
    assert (
        "(implied by its camera plugin hal_plugin_gen3_fx3)" in line
        and "x0=80 y0=0 side=480" in line
    )


def test_windows_start_with_the_recording_whatever_the_crop(tmp_path: Path) -> None:
    from neuroedge.events.core import make_events

    # x = 2 (outside the crop x 16..79) from 0 to 150 ms; inside the crop from 123 ms on
    outside = make_events(
        np.arange(0, 150_000, 500), np.full(300, 2), np.full(300, 5), np.ones(300)
    )
    t_in = np.arange(123_000, 400_000, 250)
    inside = make_events(t_in, 20 + t_in % 40, 10 + t_in % 30, t_in % 2)
    both = np.concatenate([outside, inside])
    both = both[np.argsort(both["t"], kind="stable")]
    path = write_events(tmp_path / "a.aedat4", both, "aedat4", sensor=SensorSize(96, 64))
    whole, line = recording_inputs(path, {"smoke": True})
    two, line2 = recording_inputs(path, {"smoke": True}, max_windows=2)
    assert whole["x"].shape[1] == 4 and "from t=0 us" in line
    assert two["x"].shape[1] == 2 and "goes on past them" in line2
    np.testing.assert_array_equal(two["x"], whole["x"][:, :2])  # the same first two windows
    assert whole["x"][:, 0].sum() == 0 < whole["x"][:, 1].sum()  # the crop sees 123 ms on


def test_a_sensor_smaller_than_the_net_sits_in_the_middle_unscaled(tmp_path: Path) -> None:
    from neuroedge.events.core import make_events

    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 20, 300), rng.integers(0, 20, 300)
    ev = make_events(np.arange(300) * 100, x, y, rng.integers(0, 2, 300))
    path = write_events(tmp_path / "small.bin", ev, "atis")  # ATIS: no sensor in the file
    inputs, line = recording_inputs(path, {"smoke": True, "variant": "lif_histogram"})
    assert "sensor 20x20 (the extent of the events read" in line and "x0=-6 y0=-6 side=32" in line
    counts = np.zeros((32, 32))
    np.add.at(counts, (y + 6, x + 6), 1)  # 1:1, offset by 6 pixels
    got = np.expm1(inputs["x"][:, 0]).sum(axis=(0, 1))  # log1p histogram -> counts, all steps
    np.testing.assert_allclose(got, counts, atol=1e-3)
    with pytest.raises(InputError, match="crop side 8 is smaller than the net's 32 pixels"):
        recording_inputs(path, {"smoke": True}, crop=(0, 0, 8))


def test_default_windows_keep_the_batch_a_net_can_take() -> None:
    from neuroedge.models.bivision.recording import default_windows

    assert default_windows(32) == 600 and default_windows(256) == 25 and default_windows(4096) == 1
