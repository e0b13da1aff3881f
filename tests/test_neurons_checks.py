"""LIF/LI neuron core against an independent numpy Euler reference (both resets, non-default
parameters), per-channel parameters on conv populations (host vs NIR), the SuperSpike surrogate,
the strict Heaviside on ties, and the parity guard against all-zero final states."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.bench.parity import require_nonzero_state
from neuroedge.errors import ParityError
from neuroedge.models.neurons.functional import (
    LIFParams,
    LIFState,
    heaviside,
    li_step,
    lif_step,
    per_channel,
)

T = 50
NON_DEFAULT = {"tau_mem": 5e-3, "v_th": 0.7, "v_leak": 0.2, "v_reset": -0.3, "r": 1.3}
DT = 2e-3  # not the default 1e-3: dt / tau = 0.4


def reference(currents: np.ndarray, q: dict, reset: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Numpy forward Euler of ``tau dv/dt = (v_leak - v) + r i`` (NIR's LIF; LI when ``reset``
    is None). ``q`` holds arrays already broadcastable to the state. Returns (outputs, final v)."""
    v = np.zeros(currents.shape[1:])
    outs = []
    for i in currents:
        v_pre = v + DT / q["tau_mem"] * ((q["v_leak"] - v) + q["r"] * i)
        if reset is None:
            v = v_pre
            outs.append(v_pre)
            continue
        z = (v_pre > q["v_th"]).astype(np.float64)
        v = np.where(z > 0, q["v_reset"], v_pre) if reset == "zero" else v_pre - q["v_th"] * z
        outs.append(z)
    return np.stack(outs), v


def run_torch(currents: np.ndarray, p: LIFParams, spiking: bool) -> tuple[np.ndarray, np.ndarray]:
    state = LIFState(torch.zeros(currents.shape[1:], dtype=torch.float64))
    outs = []
    with torch.no_grad():
        for i in torch.from_numpy(currents):
            out, state = (lif_step if spiking else li_step)(i, state, p)
            outs.append(out.numpy())
    return np.stack(outs), state.v.numpy()


def per_channel_params(channels: int) -> dict:
    """Distinct values per channel for every neuron parameter, around NON_DEFAULT."""
    ramp = np.linspace(0.6, 1.4, channels)
    return {k: v * ramp[::-1] if k == "r" else v * ramp for k, v in NON_DEFAULT.items()}


@pytest.mark.parametrize("reset", ["zero", "subtract", None])
@pytest.mark.parametrize("layout", ["scalar", "per_channel_conv"])
def test_lif_and_li_match_numpy_euler_reference(reset, layout):
    rng = np.random.default_rng(0)
    if layout == "scalar":
        currents = rng.normal(1.5, 2.0, (T, 4, 50))
        q = dict(NON_DEFAULT)
        p = LIFParams(**q, dt=DT, reset=reset or "zero")
    else:  # (C,) parameters on a (B, C, H, W) population, C != W
        currents = rng.normal(1.5, 2.0, (T, 2, 3, 4, 5))
        arrays = per_channel_params(3)
        q = {k: v[:, None, None] for k, v in arrays.items()}
        tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
        p = LIFParams(**tensors, dt=DT, reset=reset or "zero")
    ref_out, ref_v = reference(currents, q, reset)
    out, v = run_torch(currents, p, spiking=reset is not None)
    if reset is not None:
        rate = ref_out.mean()
        assert 0.1 < rate < 0.9  # spikes and silences both occur
        assert ((ref_out[:-1] > 0) & (ref_out[1:] > 0)).any()  # the reset affects later steps
        np.testing.assert_array_equal(out, ref_out)
    else:
        np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, ref_v, rtol=0, atol=1e-12)


@pytest.mark.parametrize("width", [3, 5])  # C == W (silently per column before) and C != W
def test_one_dim_parameter_on_conv_state_is_per_channel(width):
    """A (C,) parameter on (B, C, H, W) equals running each channel with its scalar value."""
    rng = np.random.default_rng(1)
    i = torch.from_numpy(rng.normal(1.0, 2.0, (2, 3, 4, width)))
    v0 = torch.from_numpy(rng.normal(0.0, 0.5, (2, 3, 4, width)))
    arrays = per_channel_params(3)
    for reset in ("zero", "subtract"):
        p = LIFParams(**{k: torch.from_numpy(v) for k, v in arrays.items()}, dt=DT, reset=reset)
        z, state = lif_step(i, LIFState(v0), p)
        y, li_state = li_step(i, LIFState(v0), p)
        for c in range(3):
            pc = LIFParams(**{k: float(v[c]) for k, v in arrays.items()}, dt=DT, reset=reset)
            zc, state_c = lif_step(i[:, c], LIFState(v0[:, c]), pc)
            yc, _ = li_step(i[:, c], LIFState(v0[:, c]), pc)
            torch.testing.assert_close(z[:, c], zc, rtol=0, atol=0)
            torch.testing.assert_close(state.v[:, c], state_c.v, rtol=0, atol=1e-12)
            torch.testing.assert_close(y[:, c], yc, rtol=0, atol=1e-12)
            torch.testing.assert_close(li_state.v[:, c], yc, rtol=0, atol=1e-12)
    th = torch.tensor([0.2, 0.4, 3.0])  # channel 2 cannot reach v_pre = 0.75
    z, _ = lif_step(torch.full((1, 3, 2, width), 1.5), LIFState(torch.zeros(1, 3, 2, width)))
    assert z.sum() == 0  # default v_th = 1.0
    z, _ = lif_step(
        torch.full((1, 3, 2, width), 1.5), LIFState(torch.zeros(1, 3, 2, width)), LIFParams(v_th=th)
    )
    assert z[0].sum(dim=(1, 2)).tolist() == [2 * width, 2 * width, 0]


def test_per_channel_parameter_of_the_wrong_length_is_refused():
    p = LIFParams(v_th=torch.ones(4))
    with pytest.raises(ValueError, match=r"per-channel v_th has 4 values .* 3 channels"):
        lif_step(torch.ones(1, 3, 2, 4), LIFState(torch.zeros(1, 3, 2, 4)), p)


def test_per_channel_threshold_host_matches_nir_on_lif_convnet():
    from neuroedge.backends.host import run_torch_program
    from neuroedge.export.nir import to_nir
    from neuroedge.export.nir_run import run_nir
    from neuroedge.registry import get_model

    spec = get_model("snn.lif_convnet")
    cfg = {"untrained": True, "channels1": 8}  # 8 channels == image width 8
    torch.manual_seed(0)
    program = spec.build(cfg)
    net = program.module
    with torch.no_grad():
        net.conv2.weight.mul_(4.0)
    net.lif1.params = LIFParams(v_th=torch.linspace(0.3, 3.0, 8))
    net.lif2.params = LIFParams(v_th=torch.linspace(0.2, 1.0, 32), reset="subtract")
    x = np.concatenate([spec.example(s, {"channels1": 8})["x"] for s in range(2)], axis=1)
    inputs = {"x": (x * 4.0).astype(np.float32)}
    host = run_torch_program(program, inputs)
    graph = to_nir(program, spec)
    np.testing.assert_allclose(graph.nodes["lif1"].v_threshold[:, 0, 0], np.linspace(0.3, 3, 8))
    assert np.ptp(graph.nodes["lif1"].v_threshold, axis=(1, 2)).max() == 0  # constant per channel
    out = run_nir(graph, inputs)
    for name in ("spikes1", "spikes2"):
        np.testing.assert_array_equal(out[name], host[name])
    np.testing.assert_allclose(out["logits"], host["logits"], atol=1e-4)
    assert host["spikes1"].sum() > 0 and host["spikes2"].sum() > 0
    per_channel = host["spikes1"].sum(axis=(0, 1, 3, 4))
    assert per_channel[0] > per_channel[-1]  # the lowest threshold fires most


@pytest.mark.parametrize("alpha", [10.0, 3.0])
def test_surrogate_gradient_is_superspike(alpha):
    x = torch.linspace(-1.0, 1.0, 21, dtype=torch.float64, requires_grad=True)
    heaviside(x, alpha).sum().backward()
    expected = 1.0 / (alpha * x.detach().abs() + 1.0) ** 2
    torch.testing.assert_close(x.grad, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("grad", [False, True])
def test_potential_exactly_at_threshold_does_not_spike(grad):
    """Strict ``v_pre > v_th`` (module docstring, NIR import): dt/tau = 0.5, i = 2: v_pre = 1."""
    i = torch.tensor([2.0, 2.0 + 1e-6], requires_grad=grad)
    with torch.set_grad_enabled(grad):
        z, state = lif_step(i, LIFState(torch.zeros(2)), LIFParams(v_th=1.0))
    assert z.tolist() == [0.0, 1.0]
    assert state.v[0].item() == 1.0  # not reset


def test_require_nonzero_state_refuses_all_zero_final_states():
    reference = {
        "logits": np.ones((3, 2, 10)),  # nonzero outputs do not count
        "v1_final": np.zeros((2, 4)),
        "v2_final": np.zeros((2, 3)),
    }
    with pytest.raises(ParityError, match=r"every final state is zero \(\['v1_final', 'v2_fin"):
        require_nonzero_state(reference)
    require_nonzero_state({**reference, "v2_final": np.array([[0.0, 0.0, -1e-3]] * 2)})
    require_nonzero_state({"logits": np.zeros(3)})  # stateless: nothing to require


@pytest.mark.parametrize("length", [3, 5])
def test_nir_reads_a_per_channel_parameter_of_a_1d_population_as_the_host(length: int) -> None:
    from neuroedge.export.nir import _full

    th = np.array([0.5, 1.0, 2.0], np.float32)  # (C,) on a (C, L) population
    host = per_channel(torch.as_tensor(th), torch.zeros(1, 3, length), "v_th")
    expect = host.expand(3, length).numpy()
    np.testing.assert_array_equal(_full(th, (3, length)), expect)  # was along L, or a crash
    np.testing.assert_array_equal(_full(th, (3,)), th)  # a flat population: one per neuron
