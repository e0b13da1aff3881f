"""Input validation of the event record, box files, N-CARS layout and the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from neuroedge.events.core import EventFormatError, SensorSize, check_events, make_events
from neuroedge.events.datasets import BOX_DTYPE, ncars_files, read_boxes, write_boxes
from neuroedge.events.simulator import DVSParams, MovingObject, simulate

ONE = np.array([1])


def _ev(t=ONE, x=ONE, y=ONE, p=ONE):
    return make_events(np.asarray(t), np.asarray(x), np.asarray(y), np.asarray(p))


@pytest.mark.parametrize("x", [40000, 70000, -40000])
def test_make_events_refuses_coordinates_beyond_int16(x):
    with pytest.raises(ValueError, match=rf"event 0: x={x} does not fit .*-32768\.\.32767"):
        _ev(x=[x])


@pytest.mark.parametrize(("field", "value"), [("x", 1.9), ("t", 0.3), ("y", math.nan)])
def test_make_events_refuses_fractional_values(field, value):
    with pytest.raises(ValueError, match=rf"event 0: {field}=.* is not an integer"):
        _ev(**{field: [value]})


def test_make_events_keeps_whole_floats_and_bools():
    ev = _ev(t=[2.0], x=[3.0], p=np.array([True]))
    assert ev.tolist() == [(2, 3, 1, 1)]


def _structured(x, p, xdtype="<i4", pdtype="i1"):
    dt = np.dtype([("t", "<i8"), ("x", xdtype), ("y", "<i2"), ("p", pdtype)])
    arr = np.zeros(1, dt)
    arr["x"], arr["p"] = x, p
    return arr


def test_check_events_validates_values_before_casting():
    with pytest.raises(ValueError, match=r"event 0 \(0, 70000, 0, 0\) .*x off the sensor"):
        check_events(_structured(70000, 0), SensorSize(5000, 100))
    with pytest.raises(ValueError, match=r"event 0 \(0, 3, 0, -1\) .*polarity not 0/1"):
        check_events(_structured(3, -1), SensorSize(8, 8))
    with pytest.raises(ValueError, match="beyond the int16 range"):
        check_events(_structured(70000, 0))
    kept = check_events(_structured(70000, 0), SensorSize(5000, 100), on_invalid="drop")
    assert kept.dropped == 1 and len(kept.events) == 0


def test_check_events_refuses_fractional_fields_with_source():
    arr = _structured(0, 0, xdtype="<f8")
    arr["x"] = 1.5
    with pytest.raises(ValueError, match=r"f\.dat: event 7: x=1\.5 is not an integer"):
        check_events(arr, first_index=7, source="f.dat: ")


@pytest.mark.parametrize("size", [math.nan, 3.5, 32768, 0, "64", True])
def test_sensor_size_must_be_an_int16_positive_integer(size):
    with pytest.raises(ValueError, match="sensor width"):
        SensorSize(size, 10)


def test_sensor_size_accepts_numpy_integers_and_max():
    assert SensorSize(np.int64(32767), 4) == SensorSize(32767, 4)


def _boxes(n=2):
    boxes = np.zeros(n, BOX_DTYPE)
    boxes["ts"], boxes["w"], boxes["h"], boxes["class_id"] = 10, 5, 4, 1
    return boxes


def _raw(dtype, **values):
    arr = np.zeros(2, dtype)
    for k, v in values.items():
        arr[k] = v
    return arr


RAW = [("ts", "<i8"), ("x", "<f8"), ("y", "<f8"), ("w", "<f8"), ("h", "<f8"), ("class_id", "<i4")]


@pytest.mark.parametrize(
    ("values", "what"),
    [
        ({"class_id": [1, 300]}, r"class_id=300 is not an integer in 0\.\.255"),
        ({"class_id": [1, -1]}, "class_id=-1"),
        ({"ts": [1, -5]}, "ts=-5"),
        ({"w": [1, math.nan]}, "w=nan"),
        ({"x": [1, math.inf]}, "x=inf"),
        ({"w": [1, -2]}, "w=-2.0 is not a finite number"),
    ],
)
def test_read_boxes_refuses_values_that_do_not_fit(tmp_path, values, what):
    path = tmp_path / "b_bbox.npy"
    np.save(path, _raw(RAW, **values))
    with pytest.raises(EventFormatError, match=rf"b_bbox\.npy: byte offset \d+: box row 1: {what}"):
        read_boxes(path)


@pytest.mark.parametrize(
    "array",
    [
        np.zeros((2, 2), RAW),
        np.zeros(2, [*RAW[:-1], ("class_id", "<i4", (2,))]),
        np.zeros((), RAW),
        np.zeros(2, [("ts", "U4"), *RAW[1:]]),
    ],
)
def test_read_boxes_refuses_malformed_tables_naming_the_file(tmp_path, array):
    path = tmp_path / "m_bbox.npy"
    np.save(path, array)
    with pytest.raises(EventFormatError, match=r"m_bbox\.npy: byte offset \d+: box "):
        read_boxes(path)


def test_write_boxes_refuses_what_read_boxes_refuses(tmp_path):
    boxes = _boxes()
    boxes["w"][1] = -1
    with pytest.raises(ValueError, match=r"w_bbox\.npy: box row 1: w=-1\.0"):
        write_boxes(tmp_path / "w_bbox.npy", boxes)
    assert not (tmp_path / "w_bbox.npy").exists()
    with pytest.raises(TypeError, match="numpy array of dtype"):
        write_boxes(tmp_path / "w_bbox.npy", [1])
    good = _boxes()
    np.testing.assert_array_equal(read_boxes(write_boxes(tmp_path / "g_bbox.npy", good)), good)


def _ncars(root, layout):
    for rel in layout:
        path = root / "train" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(exist_ok=True)
        else:
            path.write_bytes(b"")
    return root


def test_ncars_files_requires_both_class_folders(tmp_path):
    root = _ncars(tmp_path, ["cars/obj_1_td.dat"])
    with pytest.raises(FileNotFoundError, match="missing N-CARS class folder 'background'"):
        ncars_files(root, "train")
    _ncars(tmp_path, ["background/x.dat/"])
    with pytest.raises(FileNotFoundError, match="background: N-CARS class folder has no .dat"):
        ncars_files(root, "train")


def test_ncars_files_reads_upper_case_suffix_and_labels(tmp_path):
    root = _ncars(tmp_path, ["cars/b.DAT", "cars/a.dat", "background/c.dat", "cars/notes.txt"])
    got = [(p.name, label) for p, label in ncars_files(root, "train")]
    assert got == [("c.dat", 0), ("a.dat", 1), ("b.DAT", 1)]


SENSOR = SensorSize(32, 24)
CAR = MovingObject("car", 4, 6, 12, 8, 200, 0, 0.4)


def test_simulate_renders_the_end_when_frame_does_not_divide_duration():
    events = simulate([CAR], SENSOR, 20_000, DVSParams(), seed=1, frame_us=50_000)
    assert len(events) > 0 and events["t"].max() < 20_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": math.nan},
        {"sigma_threshold": math.nan},
        {"refractory_us": math.nan},
        {"noise_rate_hz": math.inf},
        {"noise_rate_hz": math.nan},
        {"hot_rate_hz": math.nan},
        {"hot_pixels": 2.5},
        {"threshold": 0},
    ],
)
def test_dvs_params_refuse_non_finite_values(kwargs):
    (name,) = kwargs
    with pytest.raises(ValueError, match=f"DVSParams {name} must be"):
        DVSParams(**kwargs)


@pytest.mark.parametrize(
    ("field", "value"), [("x", math.nan), ("contrast", math.nan), ("vx", math.inf), ("w", -3.0)]
)
def test_moving_object_refuses_bad_geometry(field, value):
    args = {"kind": "car", "x": 1, "y": 1, "w": 4, "h": 4, "vx": 0, "vy": 0, "contrast": 0.3}
    with pytest.raises(ValueError, match=f"MovingObject {field} must be"):
        MovingObject(**{**args, field: value})


@pytest.mark.parametrize(
    ("kwargs", "error", "what"),
    [
        ({"duration_us": math.nan}, ValueError, "duration_us"),
        ({"seed": -1}, ValueError, "seed"),
        ({"frame_us": 0}, ValueError, "frame_us"),
        ({"sensor": (32, 24)}, TypeError, "sensor must be a SensorSize"),
    ],
)
def test_simulate_refuses_bad_arguments(kwargs, error, what):
    args = {"sensor": SENSOR, "duration_us": 10_000, "params": DVSParams(), "seed": 1}
    with pytest.raises(error, match=what):
        simulate([CAR], **{**args, **kwargs})
