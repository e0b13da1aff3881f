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
    ]
    for extra, message in cases:
        assert main(["run", NAME, "--config", "smoke=true", *extra]) == 2, extra
        assert message in capsys.readouterr().err, extra
    assert main(["run", "snn.lif_convnet", "--events", str(path)]) == 2
    assert "takes no event recordings" in capsys.readouterr().err
    from neuroedge.events.core import make_events

    right = make_events(np.arange(50) * 1000, np.full(50, 90), np.arange(50), np.ones(50))
    corner = write_events(tmp_path / "right.aedat4", right, "aedat4", sensor=SensorSize(96, 64))
    with pytest.raises(InputError, match="none of its 50 events lies in the crop x 0..31"):
        recording_inputs(corner, {"smoke": True}, crop=(0, 0, 32))


def test_the_nets_own_side_and_representation_are_used(tmp_path: Path) -> None:
    inputs, line = recording_inputs(
        _recording(tmp_path), {"smoke": True, "size": 16, "variant": "lif_histogram"}
    )
    assert inputs["x"].shape == (5, 3, 2, 16, 16)
    assert "-> 16x16" in line and "(histogram)" in line


def test_prophesee_headers_without_a_size_give_the_plugins_sensor() -> None:
    from neuroedge.events.io import recording_sensor

    if not SHARED.is_dir():
        pytest.skip(f"{SHARED}: the shared recordings are not beside this checkout")
    # the shared README: Gen3 640x480 (x max 599), Gen4.1 1280x720; neither header says so
    assert recording_sensor(SHARED / "evt2_sample.raw") == SensorSize(640, 480)
    assert recording_sensor(SHARED / "evt3_sample.raw") == SensorSize(1280, 720)
    assert recording_sensor(SHARED / "nmnist_sample.bin") is None  # ATIS: no header at all


def test_info_says_which_models_take_recordings(capsys) -> None:
    assert main(["info", NAME]) == 0
    out = capsys.readouterr().out
    assert "recordings: run --events FILE" in out and "(ICML 2026)" in out
    assert main(["info", "snn.lif_convnet"]) == 0
    assert "recordings:" not in capsys.readouterr().out
