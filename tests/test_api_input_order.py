"""deploy (and ``neuroedge run``) refuse bad ``inputs`` and ``options`` before the build, which
for snn.lif_convnet without a checkpoint trains for minutes; what only the built net knows (a
model width) is still checked after it. Options that are no mapping or of the wrong type are
ConfigErrors naming the option; export's ``out`` must be a path."""

from __future__ import annotations

import numpy as np
import pytest

import neuroedge as ne
from neuroedge.errors import ConfigError, ExportRefused, InputError

LIF = "snn.lif_convnet"
X64 = np.zeros((8, 1, 1, 8, 8), np.float64)


class TrainingStarted(Exception):
    pass


def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Training would run 20 epochs (the test home has no checkpoint): make it fail at once."""
    import neuroedge.models.lif_convnet.train as train

    def refuse(*args: object, **kwargs: object) -> None:
        raise TrainingStarted("the build started training before the refusal")

    monkeypatch.setattr(train, "train", refuse)


@pytest.fixture(name="no_training")
def _no_training_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    no_training(monkeypatch)


def _nan() -> np.ndarray:
    x = np.zeros((8, 1, 1, 8, 8), np.float32)
    x[3, 0, 0, 2, 5] = np.nan
    return x


CASES = [
    ({"inputs": {"x": X64}}, InputError, r"input 'x': expected shape .*, got dtype float64"),
    ({"inputs": {"X": X64.astype(np.float32)}}, InputError, r"missing \['x'\], unexpected"),
    ({"inputs": X64}, InputError, r"inputs are a mapping \{name: array\}.*got a ndarray"),
    (
        {"inputs": {"x": X64[0].astype(np.float32)}},
        InputError,
        r"got shape \[1, 1, 8, 8\] \(4 dims, not 5\)",
    ),
    (
        {"backend": "onnxrt", "inputs": {"x": _nan()}},
        InputError,
        r"input 'x': 1 values are NaN or inf, the first at index \(3, 0, 0, 2, 5\)",
    ),
    ({"backend": "onnxrt", "options": {"from": "step"}}, ConfigError, r"no option 'from'"),
    ({"options": {"threads": "2"}}, ConfigError, r"backend 'host' has no option 'threads'"),
    ({"options": "form=step"}, ConfigError, r"options='form=step' \(str\): expected a mapping"),
    (
        {"backend": "onnxrt", "options": {"providers": ["CPUExecutionProvider"]}},
        ConfigError,
        r"option providers=\['CPUExecutionProvider'\] \(list\): expected a string or a number",
    ),
    (
        {"backend": "onnxrt", "options": {"path": 5}},
        ConfigError,
        r"option path=5 \(int\): expected a file path",
    ),
    ({"backend": "onnxrt", "options": {1: "x"}}, ConfigError, r"option name 1 is not a string"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), CASES)
def test_bad_inputs_and_options_are_refused_before_the_build(
    no_training: None, kwargs: dict, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        ne.deploy(LIF, repeats=1, **kwargs)


def test_the_cli_refuses_a_misspelt_option_before_the_build(no_training: None, capsys) -> None:
    from neuroedge.cli import main

    assert main(["run", LIF, "--backend", "onnxrt", "--option", "from=step"]) == 2
    err = capsys.readouterr().err
    assert "backend 'onnxrt' has no option 'from'; its options: form, path" in err
    assert "Traceback" not in err


def test_an_axis_the_built_net_fixes_is_still_checked_after_the_build() -> None:
    x = np.zeros((4, 2, 32), np.float32)  # the default width, not the built 16
    with pytest.raises(InputError, match=r"axis 2 \(d_model\) is 32 but the built model fixed"):
        ne.deploy("ttt.linear_attention", config={"d_model": 16}, inputs={"x": x}, repeats=1)
    _, report = ne.deploy("ttt.linear_attention", inputs={"x": x}, repeats=1)
    assert report.backend == "host"


@pytest.mark.parametrize("out", [3, ["m.onnx"]])
def test_export_out_must_be_a_path(out: object) -> None:
    with pytest.raises(ExportRefused, match=r"out=.*: expected a file path"):
        ne.export(LIF, out=out)  # type: ignore[arg-type]


def test_a_none_option_is_not_set_and_a_plugins_values_are_its_own(monkeypatch) -> None:
    """The check before the build refused what compile accepts: None (not set) for any
    backend, and values of any type for a plugin backend, whose compile checks its own."""
    from neuroedge.backends.base import check_options_before_build
    from neuroedge.registry import get_backend

    art, report = ne.deploy(
        LIF, "onnxrt", config={"untrained": True}, options={"providers": None}, repeats=2
    )
    assert report.metrics["max_abs_err"].value < 1e-4
    plugin = type("PluginBackend", (), {"name": "plug", "__module__": "my_robot.backends"})()
    check_options_before_build(plugin, {"debug": True, "layers": ["a", "b"], "cache": None})
    with pytest.raises(ConfigError, match="option name 3 is not a string"):
        check_options_before_build(plugin, {3: "x"})
    with pytest.raises(ConfigError, match=r"option debug=True \(bool\)"):
        check_options_before_build(get_backend("onnxrt"), {"debug": True})


@pytest.mark.parametrize("backend", ["onnxrt", "lava", "host", "null"])
def test_a_backends_finite_inputs_says_what_its_run_refuses(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NaN is refused before the build exactly where the backend's ``finite_inputs`` is set,
    and there its run refuses it too (host decides per built program, null never looks)."""
    from neuroedge.registry import get_backend

    be = get_backend(backend)
    if not be.probe().ok:
        pytest.skip(be.probe().reason)
    art, _ = ne.deploy(LIF, backend, config={"untrained": True}, repeats=1)
    no_training(monkeypatch)
    if be.finite_inputs:
        with pytest.raises(InputError, match=r"1 values are NaN or inf"):
            be.run(art, {"x": _nan()})
        with pytest.raises(InputError, match=r"1 values are NaN or inf"):
            ne.deploy(LIF, backend, inputs={"x": _nan()}, repeats=1)
    else:
        assert backend in ("host", "null")
        with pytest.raises(TrainingStarted):
            ne.deploy(LIF, backend, inputs={"x": _nan()}, repeats=1)
