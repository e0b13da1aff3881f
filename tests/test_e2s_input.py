"""E2S / event-histogram input checks: argument and event validation, events before t0, the
window of ``represent`` and detection targets of boxes off the grid or non-finite."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from neuroedge.events.core import SensorSize, make_events
from neuroedge.models.bivision import data
from neuroedge.models.bivision.detection import make_targets
from neuroedge.models.bivision.e2s import E2SParams, e2s, event_histogram


def _events(t, x=None, y=None, p=None):
    n = len(t)
    zeros = np.zeros(n, np.int64)
    return make_events(
        np.asarray(t),
        zeros + 1 if x is None else x,
        zeros + 1 if y is None else y,
        zeros if p is None else p,
    )


def test_zero_or_negative_steps_raise_instead_of_hanging():
    """Run in a subprocess: before the fix step_us=0 looped forever (and so did an event
    far past the window with step_us=1)."""
    code = (
        "import numpy as np, pytest\n"
        "from neuroedge.events.core import make_events\n"
        "from neuroedge.models.bivision.e2s import event_histogram\n"
        "ev = make_events(np.array([0, 5]), np.ones(2), np.ones(2), np.zeros(2))\n"
        "bad = [(8, 8, 5, 0), (8, 8, 5, -3), (8, 8, 0, 10), (0, 8, 5, 10), (8, 8, 2.5, 10)]\n"
        "for args in bad:\n"
        "    with pytest.raises(ValueError, match='must be an integer >= 1'):\n"
        "        event_histogram(ev, *args)\n"
        "far = make_events(np.array([0, 10**15]), np.ones(2), np.ones(2), np.zeros(2))\n"
        "assert event_histogram(far, 8, 8, 5, 1).sum() == 1\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_events_before_t0_are_skipped_not_called_unsorted():
    ev = _events([-7, -2, 3, 25])
    hist = event_histogram(ev, 4, 4, 2, 20)
    assert hist.sum() == 2 and hist[0, 0, 1, 1] == 1 and hist[1, 0, 1, 1] == 1
    assert event_histogram(ev, 4, 4, 2, 20, t0=5).sum() == 1
    assert e2s(ev, 4, 4, t0=100).sum() == 0
    late = _events([50, 60, 60, 61], x=np.array([1, 1, 2, 1]))
    np.testing.assert_array_equal(e2s(late, 4, 4, t0=55), e2s(late[1:], 4, 4, t0=55))
    with pytest.raises(ValueError, match="event 1 .* earlier than event 0"):
        event_histogram(_events([-2, -7, 3]), 4, 4, 2, 20)
    with pytest.raises(ValueError, match="event 2 .* earlier than event 1"):
        e2s(_events([1, 30, 20]), 4, 4, t0=0)


def test_negative_polarity_is_refused():
    ev = np.zeros(2, [("t", "<i8"), ("x", "<i2"), ("y", "<i2"), ("p", "i1")])
    ev["t"], ev["x"], ev["y"], ev["p"] = [1, 2], [1, 1], [1, 1], [0, -1]
    with pytest.raises(ValueError, match="event 1 .*polarity other than 0 or 1"):
        event_histogram(ev, 4, 4, 2, 10)
    with pytest.raises(ValueError, match="event 1 .*polarity other than 0 or 1"):
        e2s(ev, 4, 4)
    ev["p"] = [0, 1]  # other integer structured dtypes are fine
    assert event_histogram(ev, 4, 4, 2, 10).sum() == 2


@pytest.mark.parametrize("field", ["t", "x", "y", "p"])
def test_float_event_fields_are_refused(field):
    dtype = [(f, "<f8" if f == field else "<i8") for f in ("t", "x", "y", "p")]
    ev = np.zeros(2, dtype)
    ev["t"] = [1, 2]
    with pytest.raises(ValueError, match=f"field '{field}' must have an integer dtype"):
        event_histogram(ev, 8, 8, 2, 10)
    with pytest.raises(ValueError, match=f"field '{field}' must have an integer dtype"):
        e2s(ev, 8, 8)


def test_plain_arrays_and_missing_fields_are_refused():
    with pytest.raises(ValueError, match="1-D numpy structured array"):
        e2s(np.zeros((3, 4), np.int64), 8, 8)
    with pytest.raises(ValueError, match="1-D numpy structured array"):
        event_histogram([(1, 1, 1, 0)], 8, 8, 2, 10)
    with pytest.raises(ValueError, match="lack field 'p'"):
        e2s(np.zeros(2, [("t", "<i8"), ("x", "<i2"), ("y", "<i2")]), 8, 8)
    with pytest.raises(ValueError, match="t0 must be an integer"):
        e2s(_events([1]), 8, 8, t0=0.5)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"threshold": float("nan")}, "threshold"),
        ({"threshold": float("inf")}, "threshold"),
        ({"support_weight": float("nan")}, "support_weight"),
        ({"support_weight": -1.0}, "support_weight"),
        ({"leak": float("nan")}, "leak"),
        ({"false_support": float("nan")}, "false_support"),
        ({"steps": 2.5}, "steps"),
        ({"step_us": 1000.0}, "step_us"),
        ({"steps": True}, "steps"),
        ({"min_support": 2.0}, "min_support"),
        ({"min_support": 9}, "min_support"),
    ],
)
def test_e2s_params_refuse_nan_negative_and_non_integer_values(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        E2SParams(**kwargs)


def test_e2s_params_accept_numpy_scalars_and_defaults():
    p = E2SParams(steps=np.int64(3), step_us=np.int32(100), threshold=np.float32(1.5))
    assert p.steps == 3 and E2SParams().threshold == 1.5


def test_represent_windows_from_the_first_event():
    rng = np.random.default_rng(0)
    n = 3000
    t = np.sort(rng.integers(300, 100_000, n))
    ev = make_events(t, rng.integers(0, 16, n), rng.integers(0, 16, n), rng.integers(0, 2, n))
    sensor = SensorSize(16, 16)
    late = ev.copy()
    late["t"] += 1_234_560_000  # a multiple of the 20 ms step
    for rep in ("e2s", "histogram"):
        here = data.represent(ev, sensor, rep)
        assert here.sum() > 0
        np.testing.assert_array_equal(data.represent(late, sensor, rep), here)
    # recordings starting within the first step keep the window at 0 (generated datasets)
    assert data.recording_start(ev, 20_000) == 0 and data.recording_start(ev[:0], 20_000) == 0
    np.testing.assert_array_equal(
        data.represent(ev, sensor, "e2s"), e2s(ev, 16, 16).astype(np.float32)
    )


def test_make_targets_clamps_off_grid_centres_on_both_sides():
    # centre (-6, -6) px: before the fix int(-1.5) = -1 put it in the far row / column
    target = make_targets([np.array([[-10.0, -10.0, 8.0, 8.0]])], grid=8, stride=4)
    assert target[0, 5, 0, 0] == 1 and target[0, 5].sum() == 1
    assert target[0, 1, 0, 0] == 0 and target[0, 2, 0, 0] == 0
    target = make_targets([np.array([[1000.0, 10.0, 4.0, 4.0]])], grid=8, stride=4)
    assert target[0, 5, 3, 7] == 1 and target[0, 1, 3, 7] == 1  # offset clipped to the cell
    assert 0 <= target[0, 2, 3, 7] < 1
    inside = make_targets([np.array([[9.0, 5.0, 6.0, 2.0]])], grid=8, stride=4)
    assert inside[0, 5, 1, 3] == 1
    np.testing.assert_allclose(inside[0, 1:3, 1, 3], [0.0, 0.5])


def test_make_targets_refuses_non_finite_boxes_naming_them():
    boxes = [np.array([[1.0, 1, 2, 2]]), np.array([[1.0, 1, 2, 2], [np.nan, 1, 2, 2]])]
    with pytest.raises(ValueError, match=r"boxes\[1\]\[1\] .* non-finite"):
        make_targets(boxes, grid=8, stride=4)
