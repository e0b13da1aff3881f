"""Core records validate themselves and name the bad value: they refuse what would misbehave
later (a str iterated into letters, a truthy "no", a bare number among the metrics) and
normalise what is meant (lists, numpy scalars)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from neuroedge.errors import ConfigError
from neuroedge.shapes import bind_inputs, resolve_shape
from neuroedge.types import (
    Availability,
    Efficiency,
    IOSpec,
    Measurement,
    ModelSpec,
    NIRProgram,
    Report,
    Support,
    TorchProgram,
)


def make_spec(**overrides: object) -> ModelSpec:
    fields = dict(
        name="snn.toy",
        family="snn",
        summary="toy",
        inputs=(IOSpec("x", ("T", "batch", 4)),),
        outputs=(IOSpec("y", ("T", "batch", 2)),),
        build=lambda cfg: None,
        example=lambda seed: {},
    )
    fields.update(overrides)
    return ModelSpec(**fields)


def test_unknown_family_is_rejected_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="family 'quantum' is not one of ann, snn"):
        make_spec(family="quantum")


def test_model_name_needs_a_family_prefix() -> None:
    with pytest.raises(ValueError, match="family.method"):
        make_spec(name="toy")


def test_duplicate_io_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate IO names"):
        make_spec(outputs=(IOSpec("x", ("batch",)),))


def test_refusals_must_carry_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        Availability(False)
    with pytest.raises(ValueError, match="reason"):
        Support(False, "")
    assert Support(True).ok


def test_measurement_how_is_checked() -> None:
    with pytest.raises(ValueError, match="measured, counted, estimated"):
        Measurement(1.0, "ms", "guessed")  # type: ignore[arg-type]


def test_efficiency_sparsity_bounds() -> None:
    with pytest.raises(ValueError, match="outside"):
        Efficiency("SOP", sparsity=1.5)


def test_nir_program_needs_positive_dt() -> None:
    with pytest.raises(ValueError, match="dt"):
        NIRProgram(graph=None, dt=0.0)


def test_report_json_has_the_schema_fields() -> None:
    report = Report("snn.toy", "host", metrics={"latency_p50_ms": Measurement(1.5, "ms")})
    doc = report.to_json()
    assert doc["metrics"]["latency_p50_ms"] == {"value": 1.5, "unit": "ms", "how": "measured"}
    assert doc["variant"] == "default" and doc["backend"] == "host"


def test_bind_inputs_binds_symbols_and_names_the_expected_shape() -> None:
    spec = make_spec()
    assert bind_inputs(spec, {"x": np.zeros((5, 3, 4), np.float32)}) == {"T": 5, "batch": 3}
    with pytest.raises(ValueError, match=r"expected shape x\[T, batch, 4\]:float32, got shape"):
        bind_inputs(spec, {"x": np.zeros((5, 3, 7), np.float32)})
    with pytest.raises(ValueError, match="got dtype float64"):
        bind_inputs(spec, {"x": np.zeros((5, 3, 4))})
    with pytest.raises(ValueError, match="missing"):
        bind_inputs(spec, {})


def test_bind_inputs_refuses_what_is_no_array_empty_axes_and_non_finite_values() -> None:
    import torch
    from neuroedge.errors import InputError, NeuroedgeError

    spec, x = make_spec(), np.zeros((5, 3, 4), np.float32)
    with pytest.raises(InputError, match=r"inputs are a mapping \{name: array\} of \['x'\], got"):
        bind_inputs(spec, x)
    with pytest.raises(InputError, match=r"as a numpy array or torch tensor, got a list"):
        bind_inputs(spec, {"x": x.tolist()})
    with pytest.raises(InputError, match=r"got shape \[0, 3, 4\]: axis 0 \(T\) is empty"):
        bind_inputs(spec, {"x": x[:0]})
    with pytest.raises(InputError, match=r"axis 1 \(batch\) is empty"):
        bind_inputs(spec, {"x": x[:, :0]})
    y = x.copy()
    y[2, 1, 3] = np.inf
    assert bind_inputs(spec, {"x": y}) == {"T": 5, "batch": 3}  # host functions check their own
    for value in (y, torch.as_tensor(y).requires_grad_()):
        with pytest.raises(InputError, match=r"1 values are NaN or inf, the first at index "):
            bind_inputs(spec, {"x": value}, finite=True)
    assert issubclass(InputError, ValueError) and issubclass(InputError, NeuroedgeError)


def test_bind_inputs_refuses_values_outside_declared_bounds() -> None:
    import torch
    from neuroedge.errors import InputError

    spec = make_spec(inputs=(IOSpec("ids", ("batch", 3), "int64", bounds=(0, 9)),))
    ids = np.array([[0, 9, 4], [1, 2, 3]], np.int64)
    assert bind_inputs(spec, {"ids": ids}) == {"batch": 2}
    ids[1, 2] = 10
    for value in (ids, torch.as_tensor(ids)):
        with pytest.raises(
            InputError,
            match=r"'ids': 1 values lie outside \[0, 9\], the first "
            r"at index \(1, 2\) \(10\)",
        ):
            bind_inputs(spec, {"ids": value})
    with pytest.raises(ValueError, match=r"bounds \(3, 1\) are not \(low, high\)"):
        IOSpec("ids", ("batch",), "int64", bounds=(3, 1))


def test_specprune_text_ids_outside_the_vocabulary_are_named() -> None:
    from neuroedge.errors import InputError
    from neuroedge.models.specprune.data import vocabulary
    from neuroedge.registry import get_backend, get_model

    spec, host = get_model("vla.specprune"), get_backend("host")
    artifact = host.compile(spec.build({"smoke": True}), spec, None)
    inputs = dict(spec.example(0))
    host.run(artifact, inputs)  # the example itself is inside the vocabulary
    inputs["text"] = inputs["text"].copy()
    inputs["text"][0, 1] = len(vocabulary())
    top = len(vocabulary()) - 1
    with pytest.raises(InputError, match=rf"'text': 1 values lie outside \[0, {top}\]"):
        host.run(artifact, inputs)


def test_a_width_the_built_model_fixes_is_named_before_torch_runs() -> None:
    from neuroedge.errors import InputError
    from neuroedge.registry import get_backend, get_model

    spec, host = get_model("ttt.linear_attention"), get_backend("host")
    artifact = host.compile(spec.build({"d_model": 16, "heads": 1, "head_dim": 8}), spec, None)
    assert host.run(artifact, {"x": np.zeros((3, 2, 16), np.float32)})["y"].shape == (3, 2, 16)
    with pytest.raises(
        InputError,
        match=r"axis 2 \(d_model\) is 32 but the built model fixed "
        r"d_model=16",
    ):
        host.run(artifact, {"x": np.zeros((3, 2, 32), np.float32)})


def test_resolve_shape_uses_bound_symbols() -> None:
    assert resolve_shape(IOSpec("y", ("T", "batch", 2)), {"T": 5, "batch": 3}) == (5, 3, 2)
    with pytest.raises(ValueError, match="no input binds"):
        resolve_shape(IOSpec("y", ("tokens",)), {"T": 5})


def test_hooks_given_as_strings_load_lazily() -> None:
    spec = make_spec(bench="neuroedge.bench.report:build_document", train=None)
    from neuroedge.bench.report import build_document

    assert spec.hook("bench").__wrapped__ is build_document
    assert spec.hook("train") is None
    with pytest.raises(ValueError, match="unknown hook 'deploy'"):
        spec.hook("deploy")
    with pytest.raises(ValueError, match="module:attribute"):
        make_spec(bench="no_colon_here").hook("bench")


def test_check_config_refuses_keys_the_use_does_not_read() -> None:
    from neuroedge.errors import ConfigError

    spec = make_spec(
        default_config={"steps": 8},
        config_keys={"build": ("width",), "bench": ("seeds", "workers")},
    )
    spec.check_config({"steps": 4, "width": 2}, "build")  # default_config keys count for build
    spec.check_config({"seeds": [0, 1]}, "bench")
    spec.check_config({"anything": 1}, "train")  # train is not declared: not checked
    with pytest.raises(
        ConfigError,
        match=r"'seed' \(did you mean 'seeds'\?\); its keys: "
        r"seeds, workers",
    ):
        spec.check_config({"seed": 3}, "bench")
    with pytest.raises(
        ConfigError, match=r"build does not read the config keys 'seeds'.*, 'x'; its "
    ):
        spec.check_config({"seeds": [1], "x": 0}, "build")
    with pytest.raises(ValueError, match="config_keys use 'deploy' is not one of build"):
        make_spec(config_keys={"deploy": ()})


def test_iospec_shape_is_a_tuple_of_sizes_and_axis_names() -> None:
    with pytest.raises(TypeError, match=r"IOSpec 'x' shape must be a tuple .* got 'batch'"):
        IOSpec("x", "batch")  # was 5 one-letter axes
    io = IOSpec("x", ["batch", np.int64(3)], bounds=[0, 9])
    assert io.shape == ("batch", 3) and type(io.shape[1]) is int and io.bounds == (0, 9)
    assert hash(io) == hash(IOSpec("x", ("batch", 3), bounds=(0, 9)))  # frozen: hashable
    with pytest.raises(ValueError, match="bad dimension True"):
        IOSpec("x", ("batch", True))
    with pytest.raises(ValueError, match="IOSpec name 3 must be an identifier"):
        IOSpec(3, ("batch",))  # type: ignore[arg-type]


def test_report_sequences_are_tuples_and_metrics_are_measurements() -> None:
    with pytest.raises(TypeError, match=r"fallbacks must be a tuple of str values, got 'cpu'"):
        Report("snn.toy", "host", fallbacks="cpu")  # type: ignore[arg-type]
    assert Report("snn.toy", "host", notes=["a", "b"]).notes == ("a", "b")
    with pytest.raises(TypeError, match=r"metrics must map names to Measurement.*'x': 1\.0"):
        Report("snn.toy", "host", metrics={"x": 1.0})  # type: ignore[dict-item]
    report = Report("snn.toy", "host").with_metrics(x=Measurement(2.0, "ms"))
    assert report.to_json()["metrics"]["x"]["value"] == 2.0


def test_verdicts_are_real_bools() -> None:
    with pytest.raises(TypeError, match="Availability ok must be True or False, got str 'no'"):
        Availability("no", "why")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Support ok must be True or False, got int 1"):
        Support(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed_sweep must be True or False"):
        make_spec(seed_sweep="yes")


def test_measurement_takes_real_numbers_numpy_scalars_included_but_no_bool() -> None:
    value = Measurement(np.float32(1.5), "ms").value
    assert value == 1.5 and type(value) is float
    assert type(Measurement(np.int64(3), "edges", "counted").value) is int
    assert math.isnan(Measurement(float("nan"), "ms").value)  # NaN still marks a failed number
    for bad in (True, "1.0", None):
        with pytest.raises(TypeError, match="Measurement value .* must be a real number"):
            Measurement(bad, "ms")  # type: ignore[arg-type]


def test_numeric_fields_are_type_checked() -> None:
    with pytest.raises(TypeError, match="Efficiency sparsity must be a real number, got str"):
        Efficiency("SOP", sparsity="0.5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="NIRProgram dt .* must be a real number, got str"):
        NIRProgram(None, "1e-3")  # type: ignore[arg-type]
    assert NIRProgram(None, np.float32(1e-3)).dt == pytest.approx(1e-3)


def test_model_spec_names_and_name_lists() -> None:
    for bad in (None, "", ".", "snn.", ".toy", " snn.toy", "snn/x.y", "snn.x\\y", "snntoy"):
        with pytest.raises(ValueError, match="must be 'family.method'"):
            make_spec(name=bad)
    for good in ("snn.lif_convnet", "nir:my braille.nir", "a.b"):  # nir_check names files
        assert make_spec(name=good).name == good
    with pytest.raises(TypeError, match=r"config_keys\['build'\] must be a tuple"):
        make_spec(config_keys={"build": "abc"})  # was the keys 'a', 'b', 'c'
    spec = make_spec(
        config_keys={"build": ["width"]},
        bench_backends=["host"],
        exportable=["onnx"],
        inputs=[IOSpec("x", ("batch",))],
    )
    assert spec.config_keys["build"] == ("width",) and spec.valid_config_keys("build") == {"width"}
    assert spec.bench_backends == ("host",) and spec.exportable == ("onnx",)
    assert isinstance(spec.inputs, tuple)
    with pytest.raises(TypeError, match="exportable must be a tuple of str values, got 'onnx'"):
        make_spec(exportable="onnx")
    with pytest.raises(TypeError, match="inputs must be a tuple of IOSpec values"):
        make_spec(inputs=("x",))


def test_torch_program_name_lists_become_tuples() -> None:
    program = TorchProgram(None, ["x"], ["y"])
    assert program.input_names == ("x",) and program.output_names == ("y",)
    with pytest.raises(TypeError, match="TorchProgram input_names must be a tuple"):
        TorchProgram(None, "x", ("y",))


def test_config_keys_that_are_no_strings_are_a_config_error() -> None:
    spec = make_spec(config_keys={"build": ("width",)})
    with pytest.raises(ConfigError, match=r"config key 1 \(int\) is not a string"):
        spec.check_config({1: 2}, "build")
    with pytest.raises(ConfigError, match=r"config key 1 \(int\) is not a string"):
        make_spec().check_config({1: 2}, "build")  # a use that declares no keys too


def test_a_set_of_names_is_a_sorted_tuple() -> None:
    spec = make_spec(exportable={"onnx", "nir"}, bench_backends=frozenset({"onnxrt", "host"}))
    assert spec.exportable == ("nir", "onnx") and spec.bench_backends == ("host", "onnxrt")
    with pytest.raises(TypeError, match="exportable must be a tuple of str values"):
        make_spec(exportable={"onnx": 1})  # a mapping is not a list of names
