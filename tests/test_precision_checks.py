"""Checks of the precision and GPU-check paths that must not pass on nothing: the GPU check's
verdict, caches keyed by what they depend on, fp16 constants, calibration seeds kept apart from
the examples parity is measured on, and the precision bench's weights (all on the CPU; TensorRT
and its ONNX Runtime provider are faked where they would run)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnxruntime as ort  # noqa: E402
from neuroedge.errors import ArtifactError, ExportRefused  # noqa: E402
from neuroedge.registry import get_backend, get_model  # noqa: E402
from neuroedge.types import Availability, Measurement, ModelSpec, Report  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIF, TTT = "snn.lif_convnet", "ttt.linear_attention"
PACKAGES = ("numpy", "onnx", "tqdm", "matplotlib", "torch (CUDA)", "onnxruntime-gpu", "tensorrt")


# ---- bench/gpu_check: "passed" only when every requested route ran and passed ----


@pytest.fixture
def gpu_check(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``main`` of bench/gpu_check with every package present and ``run_models`` answering
    ``canned`` (results, skipped) at once, so the verdict is checked without a GPU."""
    import neuroedge.bench.gpu_check as g

    check = SimpleNamespace(main=g.main, canned=({}, []))
    monkeypatch.setattr(g, "package_table", lambda: [(n, True, "fake: ok") for n in PACKAGES])
    monkeypatch.setattr(g, "run_models", lambda *args: check.canned)
    return check


def test_a_route_cut_by_the_time_budget_fails_the_check(gpu_check, tmp_path, capsys) -> None:
    spec = get_model(LIF)
    ran = Report(
        LIF,
        "host-cuda",
        metrics={
            "max_abs_err": Measurement(0.0, "abs"),
            "spike_agreement": Measurement(1.0, "fraction"),
        },
    )
    cut = Report(LIF, "tensorrt-int8", rejections=("not run: time budget spent",))
    gpu_check.canned = ({LIF: (spec, [ran, cut])}, [])
    assert gpu_check.main(["--models", LIF, "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"did not pass: routes not run: {LIF} tensorrt-int8" in out
    assert "gpu check did not pass" in out and "NOT-RUN" in out


def test_a_check_in_which_no_route_ran_does_not_pass(gpu_check, tmp_path, capsys) -> None:
    gpu_check.canned = ({}, ["caption.date: no ONNX export (exportable: none)"])
    assert gpu_check.main(["--out", str(tmp_path)]) == 1
    assert "did not pass: no route of the requested models ran" in capsys.readouterr().out


def test_a_package_only_unasked_routes_need_does_not_fail_the_check(
    gpu_check, monkeypatch, tmp_path, capsys
) -> None:
    import neuroedge.bench.gpu_check as g

    missing = [(n, n != "tensorrt", "fake") for n in PACKAGES]  # no TensorRT on this box
    monkeypatch.setattr(g, "package_table", lambda: missing)
    ran = Report(LIF, "host-cuda", metrics={"max_abs_err": Measurement(0.0, "abs")})
    gpu_check.canned = ({LIF: (get_model(LIF), [ran])}, [])
    argv = ["--models", LIF, "--routes", "host-cuda", "--out", str(tmp_path)]
    assert gpu_check.main(argv) == 0, capsys.readouterr().out
    assert gpu_check.main([*argv[:3], "host-cuda,tensorrt-fp32", *argv[4:]]) == 1
    assert "routes blocked by a missing package: tensorrt-fp32" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--routes", ","], "names no route; valid: host-cuda, onnxrt-cuda, tensorrt-fp32"),
        (["--routes", "tensorrt-bf16"], "unknown routes ['tensorrt-bf16']; valid: host-cuda"),
        (["--models", "caption.date"], "caption.date has no ONNX export"),
    ],
)
def test_arguments_that_leave_nothing_to_check_are_refused_up_front(
    gpu_check, tmp_path, capsys, argv: list[str], message: str
) -> None:
    assert gpu_check.main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_make_gpu_check_runs_no_online_install() -> None:
    # the stamp's `pip install -e .[dev]` pins the CPU onnxruntime over onnxruntime-gpu
    if shutil.which("make") is None:
        pytest.skip("make is not installed here: the Makefile cannot be dry-run")
    out = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "gpu-check"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "bash bench/gpu_check.sh" in out and "pip install" not in out, out


# ---- caches: an engine is only ever reused for what built it ----


def _trt_ep_options(monkeypatch: pytest.MonkeyPatch, path: str) -> dict[str, str]:
    """The TensorRT provider options the onnxrt backend passes ONNX Runtime for ``path``
    (the session itself is faked: this onnxruntime has no TensorRT provider)."""
    from neuroedge.backends.onnxrt import open_session

    seen: dict[str, Any] = {}

    def fake_session(model: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise RuntimeError("fake session: options recorded")

    with monkeypatch.context() as patch:
        patch.setattr(ort, "InferenceSession", fake_session)
        with pytest.raises(ArtifactError, match="options recorded"):
            open_session(path, "TensorrtExecutionProvider")
    assert seen["providers"] == ["TensorrtExecutionProvider"]
    return seen["provider_options"][0]


def test_ort_tensorrt_engine_cache_differs_when_the_weights_do(monkeypatch, tmp_path) -> None:
    # ONNX Runtime's engine id hashes names, not weights; each default export (a folder of
    # its own, named by its files' hash) keeps its engines beside it
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    spec, backend = get_model(LIF), get_backend("onnxrt")
    options, paths = [], []
    for seed in (0, 1, 1):
        program = spec.build({"smoke": True, "seed": seed})
        art = backend.compile(program, spec, {"providers": "CPUExecutionProvider"})
        paths.append(art.path)
        options.append(_trt_ep_options(monkeypatch, art.path))
    assert paths[0] != paths[1] == paths[2] and str(tmp_path) in paths[0]
    engines = [o["trt_engine_cache_path"] for o in options]
    assert engines[0] != engines[1] and engines[1] == engines[2]  # same weights: same cache
    assert all(Path(e).parent == Path(p).parent / "trt_ep_cache" for e, p in zip(engines, paths))
    assert [o["trt_timing_cache_path"] for o in options] == [str(Path(e).parent) for e in engines]
    # ORT makes each folder with a non-recursive create_directory: both must exist already
    assert all(Path(e).is_dir() for e in engines)


def test_engines_that_differ_after_the_last_dot_keep_their_own_sidecars(tmp_path) -> None:
    from neuroedge.backends.tensorrt_cache import EngineCache, EngineKey

    fp16 = EngineKey("a" * 64, '{"variant": "fp16"}', "10.8", "Orin", "8.7")
    int8 = EngineKey("a" * 64, '{"variant": "int8"}', "10.8", "Orin", "8.7")
    cache, builds = EngineCache(tmp_path), []
    user = tmp_path / "lif.json"
    user.write_text('{"labels": ["cup", "bottle"]}\n')  # the user's own file

    def load(key: EngineKey, name: str) -> str:
        build = lambda: builds.append(name) or name.encode()
        return cache.load_or_build(key, build, lambda data: data, path=tmp_path / name)[1].action

    assert [load(fp16, "lif.fp16"), load(int8, "lif.int8")] == ["built", "built"]
    assert [load(fp16, "lif.fp16"), load(int8, "lif.int8")] == ["loaded", "loaded"]
    assert builds == ["lif.fp16", "lif.int8"]
    assert user.read_text() == '{"labels": ["cup", "bottle"]}\n'


def test_a_file_in_the_sidecars_place_is_refused_before_any_build(tmp_path) -> None:
    from neuroedge.backends.tensorrt_cache import EngineCache, EngineKey

    key = EngineKey("a" * 64, "{}", "10.8", "Orin", "8.7")
    theirs = tmp_path / "model.engine.json"
    theirs.write_text('{"labels": []}\n')
    never = lambda: pytest.fail("built although the sidecar could not be written")
    with pytest.raises(FileExistsError, match="model.engine.json: already there and not a"):
        EngineCache(tmp_path).load_or_build(
            key, never, lambda data: data, path=tmp_path / "model.engine"
        )
    assert theirs.read_text() == '{"labels": []}\n' and not (tmp_path / "model.engine").exists()


# ---- fp16: constants beyond the half range are refused, infinities kept ----


def _graph(nodes: list[Any], outputs: list[str], inits: list[Any]) -> Any:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [3]) for o in outputs],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_fp16_refuses_a_finite_constant_beyond_the_half_range_naming_it() -> None:
    from neuroedge.export.onnx_fp16 import convert_to_fp16

    # x / 1e5 would become x / 65504: every output 1.53x too large
    big = numpy_helper.from_array(np.array(1e5, np.float32), "scale")
    with pytest.raises(ExportRefused, match="initializer 'scale' holds 1 finite value.*100000"):
        convert_to_fp16(_graph([helper.make_node("Div", ["X", "scale"], ["Y"])], ["Y"], [big]))
    const = helper.make_node(
        "Constant",
        [],
        ["c"],
        name="big_const",
        value=numpy_helper.from_array(np.array(-7e4, np.float32)),
    )
    mul = helper.make_node("Mul", ["X", "c"], ["Y"])
    with pytest.raises(ExportRefused, match="node 'big_const' \\(Constant\\)"):
        convert_to_fp16(_graph([const, mul], ["Y"], []))


def test_fp16_keeps_infinite_masks_and_counts_nothing_as_clipped() -> None:
    from neuroedge.export.onnx_fp16 import PRECISION_KEY, convert_to_fp16

    mask = numpy_helper.from_array(np.array([0.0, -np.inf, 0.0], np.float32), "mask")
    model = _graph([helper.make_node("Add", ["X", "mask"], ["Y"])], ["Y"], [mask])
    half = convert_to_fp16(model)
    kept = numpy_helper.to_array(next(i for i in half.graph.initializer if i.name == "mask"))
    assert kept.dtype == np.float16 and np.isneginf(kept[1])
    record = json.loads({p.key: p.value for p in half.metadata_props}[PRECISION_KEY])
    assert record.get("clipped", 0) == 0, record
    x = np.array([1.0, 2.0, 3.0], np.float32)
    sess = ort.InferenceSession(half.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"X": x})[0], [1.0, -np.inf, 3.0])


# ---- calibration seeds: never the examples parity is measured on ----


@pytest.fixture
def seeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every seed ``ModelSpec.built_example`` is asked for (calibration and held-out)."""
    seen: list[int] = []
    original = ModelSpec.built_example

    def logged(self: ModelSpec, seed: int, *args: Any, **kwargs: Any) -> Any:
        seen.append(seed)
        return original(self, seed, *args, **kwargs)

    monkeypatch.setattr(ModelSpec, "built_example", logged)
    return seen


def test_precision_bench_calibrates_as_the_backends_and_never_on_held_out_seeds(
    seeds: list[int],
) -> None:
    from neuroedge.backends.onnxrt import calibration_seeds
    from neuroedge.bench.precision import compare_precisions

    result = compare_precisions(TTT, calibration=102, samples=2, repeats=1)
    calibration, held_out = seeds[:102], seeds[102:]
    assert calibration == list(calibration_seeds("int8", 102))  # the shipped graph's seeds
    assert held_out == [100, 101] and not set(held_out) & set(calibration)
    assert result["held_out_seeds"] == [100, 101]
    assert result["calibration_seeds"] == [calibration[0], calibration[-1]]
    with pytest.raises(ValueError, match="must stay below the calibration seeds"):
        compare_precisions(TTT, calibration=1, samples=901, repeats=1)


def test_onnxrt_int8_calibrates_away_from_the_run_seed(seeds: list[int], tmp_path) -> None:
    # `neuroedge run --option precision=int8` measures parity on seed 0
    from neuroedge.export.tensorrt import CALIBRATION_SAMPLES

    spec = get_model(TTT)
    options = {"precision": "int8", "path": str(tmp_path / "t.onnx")}
    art = get_backend("onnxrt").compile(spec.build({}), spec, options)
    assert art.meta["precision"] == "int8"
    assert len(set(seeds)) == CALIBRATION_SAMPLES and 0 not in seeds, seeds
    from neuroedge.backends.onnxrt import CALIBRATION_SEED  # the one constant both backends use

    assert seeds == list(range(CALIBRATION_SEED, CALIBRATION_SEED + CALIBRATION_SAMPLES))


def test_tensorrt_int8_calibrates_away_from_the_gpu_check_seed(
    seeds: list[int], monkeypatch, tmp_path
) -> None:
    # bench/gpu_check compares on built_example(0); TensorRT itself is faked past calibration
    from neuroedge.backends.tensorrt import TensorRTBackend

    monkeypatch.setattr(TensorRTBackend, "probe", lambda self: Availability(True, "fake"))
    monkeypatch.setattr(TensorRTBackend, "_engine_artifact", lambda self, *args: args)
    spec = get_model(TTT)
    options = {"variant": "int8", "dir": str(tmp_path), "calibration_samples": 3}
    _, _, prepared, *_ = TensorRTBackend().compile(spec.build({}), spec, options)
    assert prepared.name == "sequence.int8.onnx" and 0 not in seeds and len(seeds) == 3


# ---- the precision bench never starts a training run on its own ----


def test_precision_bench_without_a_checkpoint_measures_untrained_weights(
    monkeypatch, tmp_path, capsys
) -> None:
    import neuroedge.models.lif_convnet.train as lif_train
    from neuroedge.bench.precision import main

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    monkeypatch.setattr(lif_train, "train", lambda *a, **k: pytest.fail("the bench trained"))
    argv = ["--model", LIF, "--calibration", "1", "--samples", "1", "--repeats", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert (
        f"{LIF} (weights: untrained)" in out
        and "there is no checkpoint, and this bench trains none" in out
    )
    assert not any(tmp_path.rglob("*.pt"))


def test_precision_bench_refuses_a_model_it_would_have_to_train(monkeypatch, tmp_path, capsys):
    import neuroedge.models.specprune.train as vla_train
    from neuroedge.bench.precision import main

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    monkeypatch.setattr(vla_train, "train", lambda *a, **k: pytest.fail("the bench trained"))
    assert main(["--model", "vla.specprune", "--repeats", "1"]) == 2
    assert "neuroedge train vla.specprune" in capsys.readouterr().err


def _calibrate(route: str, spec: ModelSpec, program: Any, tmp_path: Path, monkeypatch) -> None:
    """Prepare an int8 graph of ``program`` the way ``route`` does (TensorRT faked past it)."""
    if route == "onnxrt":
        options = {"precision": "int8", "path": str(tmp_path / "m.onnx")}
        get_backend("onnxrt").compile(program, spec, options)
    elif route == "tensorrt":
        from neuroedge.backends.tensorrt import TensorRTBackend

        monkeypatch.setattr(TensorRTBackend, "probe", lambda self: Availability(True, "fake"))
        monkeypatch.setattr(TensorRTBackend, "_engine_artifact", lambda self, *args: args)
        options = {"variant": "int8", "dir": str(tmp_path), "calibration_samples": 8}
        TensorRTBackend().compile(program, spec, options)
    else:
        from neuroedge.bench.precision import compare_precisions

        compare_precisions(spec.name, 8, 1, {"smoke": True}, repeats=1)


@pytest.mark.parametrize("route", ["onnxrt", "tensorrt", "precision_bench"])
@pytest.mark.parametrize("model", [LIF, "snn.unisparse"])
def test_a_dataset_models_int8_calibrates_on_training_digits(
    model: str, route: str, tmp_path, monkeypatch
) -> None:
    """``evaluate`` scores the test digits: int8 calibration examples are training digits
    on every route that calibrates (they were test digits of seeds 1000-1015)."""
    from neuroedge.backends import onnxrt

    spec = get_model(model)
    if model == LIF:
        from neuroedge.models.lif_convnet.data import load_digits_split as load
    else:
        from neuroedge.models.unisparse.data import load_digits as load
    data = load(0)
    train = {row.tobytes() for row in data.x_train.astype(np.float32)}
    test = {row.tobytes() for row in data.x_test.astype(np.float32)}
    drawn: list[tuple[int, str, bytes]] = []
    real = ModelSpec.example_for

    def spy(self: ModelSpec, seed: int, config: Any = None, split: str = "") -> dict[str, Any]:
        out = real(self, seed, config, split)
        drawn.append((seed, split, out["x"][0, 0].astype(np.float32).tobytes()))
        return out

    monkeypatch.setattr(ModelSpec, "example_for", spy)
    _calibrate(route, spec, spec.build({"smoke": True}), tmp_path, monkeypatch)
    calibration = [(split, x) for seed, split, x in drawn if seed >= onnxrt.CALIBRATION_SEED]
    assert len(calibration) == 8 or (route == "onnxrt" and len(calibration) >= 8)
    assert all(split == onnxrt.CALIBRATION_SPLIT for split, _ in calibration), calibration
    assert all(x in train and x not in test for _, x in calibration)
    held_out = [x for seed, split, x in drawn if seed < onnxrt.CALIBRATION_SEED]
    assert all(x in test for x in held_out)  # parity and the bench's held-out: test digits
    with pytest.raises(ValueError, match=r"example split='val': expected one of test, train"):
        spec.example(0, split="val")
