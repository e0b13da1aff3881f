"""Inputs as users hold them: views with negative strides (OpenCV's ``img[..., ::-1]``),
torch tensors (requires_grad too), masked arrays, big-endian event fields, float timestamps at
the int64 edge. Each gives the canonical array's outputs or a typed error naming the input;
nothing is read as other values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import neuroedge as ne
from neuroedge.errors import InputError
from neuroedge.registry import get_backend, get_model, model_names


def _flipped(a: np.ndarray) -> np.ndarray:
    """The same values as a view with a negative stride on the last axis."""
    return np.ascontiguousarray(a[..., ::-1])[..., ::-1] if a.ndim else a


def _tensor(a: np.ndarray) -> Any:
    t = torch.from_numpy(a.copy())
    return t.requires_grad_(True) if t.is_floating_point() else t


LAYOUTS = {
    "negative_stride": _flipped,
    "tensor": _tensor,
    "masked_none": lambda a: np.ma.masked_array(a.copy(), mask=False),
}


def _same(got: dict[str, Any], ref: dict[str, Any], label: str) -> None:
    assert set(got) == set(ref), label
    for key, want in ref.items():
        a, b = np.asarray(got[key]), np.asarray(want)
        assert a.shape == b.shape, (label, key)
        if b.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"{label}: {key}")
        else:
            assert np.array_equal(a, b), (label, key)


@pytest.mark.parametrize("name", model_names())
def test_every_model_on_host_reads_views_tensors_and_masked_arrays(name: str) -> None:
    spec = get_model(name)
    program = spec.build({**spec.default_config, "smoke": True})
    example = {k: np.asarray(v) for k, v in spec.example(0).items()}
    host = get_backend("host")
    art = host.compile(program, spec)
    ref = host.run(art, example)
    for layout, make in LAYOUTS.items():
        for key in example:
            given = make(example[key])
            got = host.run(art, {**example, key: given})
            _same(got, ref, f"{layout} {key}")


def test_a_masked_value_is_refused_naming_the_input_and_index() -> None:
    spec = get_model("physics.meshft")
    art = get_backend("host").compile(spec.build({**spec.default_config, "smoke": True}), spec)
    q = np.asarray(spec.example(0)["q"]).copy()
    q[1, 7] = np.nan
    inputs = {**spec.example(0), "q": np.ma.masked_invalid(q)}
    with pytest.raises(
        InputError,
        match=r"input 'q': a masked array with 1 masked values, the first at index \(1, 7\)",
    ):
        get_backend("host").run(art, inputs)
    with pytest.raises(
        InputError, match=r"input 'x': .* 1 masked values, the first at index \(1, 0, 3\)"
    ):
        ne.deploy("ttt.linear_attention", inputs={"x": np.ma.masked_greater(_ttt_x(), 2.0)})


def _ttt_x() -> np.ndarray:
    x = np.zeros((4, 2, 32), np.float32)
    x[1, 0, 3] = 3.0
    return x


def test_a_flipped_view_deploys_on_onnxrt_with_host_parity() -> None:
    x = np.random.default_rng(0).standard_normal((16, 2, 32)).astype(np.float32)
    _, report = ne.deploy("ttt.linear_attention", "onnxrt", inputs={"x": _flipped(x)}, repeats=2)
    assert report.metrics["max_abs_err"].value < 1e-4


def test_big_endian_event_fields_bin_as_native_ones() -> None:
    from neuroedge.events.core import SensorSize, make_events
    from neuroedge.models.bivision.data import represent
    from neuroedge.models.bivision.e2s import event_histogram

    ev = make_events(100 + np.arange(10) * 1000, np.full(10, 3), np.full(10, 2), np.ones(10, int))
    swapped = ev.astype([("t", ">i8"), ("x", ">i2"), ("y", "<i2"), ("p", "u1")])
    hist = event_histogram(ev, 8, 8, 5, 2000)
    assert hist.sum() == 10
    assert np.array_equal(event_histogram(swapped, 8, 8, 5, 2000), hist)
    for kind in ("e2s", "histogram"):
        want = represent(ev, SensorSize(8, 8), kind)
        assert want.sum() > 0
        assert np.array_equal(represent(swapped, SensorSize(8, 8), kind), want), kind


def test_a_float_timestamp_of_2_pow_63_does_not_wrap() -> None:
    from neuroedge.events.core import make_events

    one = np.array([1])
    with pytest.raises(ValueError, match=r"event 0: t=9.223372036854776e\+18 does not fit"):
        make_events(np.array([2.0**63]), one, one, one)
    below = np.nextafter(2.0**63, 0)  # the largest float under 2**63 fits
    assert make_events(np.array([below]), one, one, one)["t"][0] == int(below)


def test_load_inputs_checks_the_arrays_against_the_spec(tmp_path) -> None:
    from neuroedge.arrays import load_inputs

    spec = get_model("ttt.linear_attention")
    path = tmp_path / "x.npz"
    np.savez(path, x=np.zeros((4, 2, 32), np.float64))
    with pytest.raises(InputError, match=r"x.npz: model 'ttt.linear_attention' input 'x'.*float64"):
        load_inputs(path, spec)
    np.savez(path, x=np.zeros((4, 2, 32), np.float32))
    assert load_inputs(path, spec)["x"].shape == (4, 2, 32)
