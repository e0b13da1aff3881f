"""The tensorrt backend: what runs anywhere (probe, refusals, engine-cache decisions, parser
error reports, network flags) and, marked ``tensorrt``/``gpu``, real engines on a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import pytest
from neuroedge.backends.onnxrt import _provider_options
from neuroedge.backends.tensorrt import (
    TensorRTBackend,
    network_flags,
    parser_error_report,
    tensorrt_availability,
)
from neuroedge.backends.tensorrt_cache import EngineCache, EngineKey, sidecar_path
from neuroedge.bench.parity import compare
from neuroedge.errors import BackendUnavailable
from neuroedge.export.tensorrt import TensorRTUnsupported
from neuroedge.registry import get_backend, get_model
from neuroedge.types import IOSpec, ModelSpec
from onnx import TensorProto, helper

MODEL = "snn.lif_convnet"
KEY = EngineKey("ab" * 32, '{"variant": "fp32"}', "11.4.0.106", "NVIDIA H200", "9.0")


def with_fields(key: EngineKey, **changes: str) -> EngineKey:
    return EngineKey(**{**key.__dict__, **changes})


def test_registered_with_three_precision_variants() -> None:
    backend = get_backend("tensorrt")
    assert isinstance(backend, TensorRTBackend)
    assert backend.variants == ("fp32", "fp16", "int8")


def test_probe_states_the_missing_piece() -> None:
    availability = get_backend("tensorrt").probe()
    if availability.ok:
        assert availability.reason.startswith("TensorRT ") and "compute" in availability.reason
    else:
        assert any(word in availability.reason for word in ("tensorrt", "CUDA", "torch"))


def test_importing_the_backend_loads_neither_tensorrt_nor_torch() -> None:
    code = (
        "import sys, neuroedge.backends.tensorrt; "
        "print(sorted(m for m in ('tensorrt', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_models_without_onnx_export_are_refused_with_the_reason() -> None:
    spec = ModelSpec(
        "graph.toy",
        "algorithm",
        "toy",
        (IOSpec("x", (3,)),),
        (IOSpec("y", (3,)),),
        build=dict,
        example=lambda seed: {},
    )
    support = TensorRTBackend().supports(spec)
    assert not support.ok and "no ONNX export" in support.reason


def test_compile_without_tensorrt_raises_the_probe_reason() -> None:
    availability = tensorrt_availability()
    if availability.ok:
        pytest.skip("TensorRT is available here")
    spec = get_model(MODEL)
    with pytest.raises(BackendUnavailable, match="not available"):
        TensorRTBackend().compile(spec.build({"smoke": True}), spec, {"variant": "fp16"})


def test_engine_is_built_once_then_loaded(tmp_path: Path) -> None:
    cache, builds = EngineCache(tmp_path), []
    build = lambda: builds.append(1) or b"engine-bytes"
    first, outcome = cache.load_or_build(KEY, build, lambda data: data)
    assert (first, outcome.action, outcome.reason) == (b"engine-bytes", "built", "no cached engine")
    again, outcome = cache.load_or_build(KEY, build, lambda data: data)
    assert (again, outcome.action, len(builds)) == (b"engine-bytes", "loaded", 1)


def test_engine_built_for_another_gpu_is_rebuilt_not_loaded(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    slot = cache.path_for(KEY)
    other = with_fields(KEY, gpu_name="NVIDIA A100-SXM4-80GB", compute_capability="8.0")
    EngineCache.store(slot, other, b"a100-engine")  # a file copied over from another machine
    engine, outcome = cache.load_or_build(KEY, lambda: b"h200-engine", lambda data: data)
    assert engine == b"h200-engine" and outcome.action == "built"
    assert "gpu_name 'NVIDIA A100-SXM4-80GB' (now 'NVIDIA H200')" in outcome.reason
    assert json.loads(sidecar_path(slot).read_text())["key"]["gpu_name"] == "NVIDIA H200"


def test_engine_from_another_tensorrt_version_is_rebuilt(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    EngineCache.store(cache.path_for(KEY), with_fields(KEY, tensorrt_version="10.13.0.35"), b"old")
    _, outcome = cache.load_or_build(KEY, lambda: b"new", lambda data: data)
    assert outcome.action == "built" and "tensorrt_version '10.13.0.35'" in outcome.reason


def test_truncated_or_orphaned_engines_are_rebuilt(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    slot = cache.path_for(KEY)
    EngineCache.store(slot, KEY, b"complete engine")
    slot.write_bytes(b"compl")
    _, outcome = cache.load_or_build(KEY, lambda: b"rebuilt", lambda data: data)
    assert "does not hash" in outcome.reason
    sidecar_path(slot).unlink()
    _, outcome = cache.load_or_build(KEY, lambda: b"rebuilt", lambda data: data)
    assert "missing" in outcome.reason


def test_engine_the_runtime_refuses_is_rebuilt_once(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    EngineCache.store(cache.path_for(KEY), KEY, b"stale")
    engine, outcome = cache.load_or_build(
        KEY, lambda: b"fresh", lambda data: None if data == b"stale" else data
    )
    assert engine == b"fresh" and "refused to deserialize" in outcome.reason
    with pytest.raises(ValueError, match="does not deserialize"):
        EngineCache(tmp_path / "other").load_or_build(KEY, lambda: b"x", lambda data: None)


def test_cache_slots_differ_per_gpu_and_version() -> None:
    cache = EngineCache("/cache")
    paths = {
        cache.path_for(KEY),
        cache.path_for(with_fields(KEY, gpu_name="Orin")),
        cache.path_for(with_fields(KEY, tensorrt_version="10.13.0.35")),
    }
    assert len(paths) == 3 and "nvidia-h200" in cache.path_for(KEY).name


def test_parser_errors_name_the_node_and_operator() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="relu0"),
        helper.make_node("Unique", ["y"], ["z"], name="dedupe"),
    ]

    class Error(SimpleNamespace):  # the shape of tensorrt.ParserError's accessors
        def node(self) -> int:
            return self.index

        def desc(self) -> str:
            return self.text

        def code(self) -> str:
            return "UNSUPPORTED_NODE"

    parser = SimpleNamespace(
        num_errors=2,
        get_error=[
            Error(index=1, text="No importer registered for op: Unique"),
            Error(index=-1, text="invalid graph"),
        ].__getitem__,
    )
    report = parser_error_report(parser, nodes, "m.onnx")
    assert "node 'dedupe' (Unique, #1): No importer registered" in report
    assert "graph: invalid graph" in report and report.startswith("m.onnx")


def test_networks_are_strongly_typed_on_every_major() -> None:
    flags = SimpleNamespace(STRONGLY_TYPED=1)
    assert (
        network_flags(
            SimpleNamespace(__version__="10.13.0.35", NetworkDefinitionCreationFlag=flags)
        )
        == 1 << 1
    )
    assert (
        network_flags(
            SimpleNamespace(__version__="11.4.0.106", NetworkDefinitionCreationFlag=flags)
        )
        == 0
    )


def test_onnxrt_gpu_providers_get_engine_cache_and_no_tf32(tmp_path: Path) -> None:
    from neuroedge.backends.tensorrt_cache import file_sha256

    (tmp_path / "m.onnx").write_bytes(b"graph bytes")
    trt = _provider_options("TensorrtExecutionProvider", tmp_path / "m.onnx")
    assert trt["trt_engine_cache_enable"] == "True"
    # one engine folder per graph content: ONNX Runtime's engine id ignores the weights
    sha = file_sha256(tmp_path / "m.onnx")[:16]
    assert trt["trt_engine_cache_path"] == str(tmp_path / "trt_ep_cache" / sha)
    assert trt["trt_timing_cache_path"] == str(tmp_path / "trt_ep_cache")
    assert _provider_options("CUDAExecutionProvider", tmp_path / "m.onnx") == {"use_tf32": "0"}
    assert _provider_options("CPUExecutionProvider", tmp_path / "m.onnx") == {}


# ---- on a GPU with TensorRT (skipped with the probe's reason elsewhere) ----


@pytest.fixture(scope="module")
def lif() -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    spec = get_model(MODEL)
    program = spec.build({"smoke": True})
    host = get_backend("host")
    example = spec.example(0)
    return spec, program, example, host.run(host.compile(program, spec), example)


def compile_variant(lif: Any, tmp_path: Path, variant: str, **options: Any) -> Any:
    spec, program, _, _ = lif
    return TensorRTBackend().compile(
        program, spec, {"variant": variant, "dir": str(tmp_path), **options}
    )


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_fp32_engine_matches_the_host_reference(lif: Any, tmp_path: Path) -> None:
    spec, _, example, reference = lif
    art = compile_variant(lif, tmp_path, "fp32")
    metrics = compare(reference, TensorRTBackend().run(art, example))
    assert metrics["max_abs_err"].value <= spec.tolerance_for("tensorrt")
    assert metrics["spike_agreement"].value == 1.0
    assert art.meta["device"] == "cuda" and art.format == "trt-engine"


@pytest.mark.gpu
@pytest.mark.tensorrt
@pytest.mark.parametrize("variant", ["fp16", "int8"])
def test_reduced_precision_engines_keep_spikes(lif: Any, tmp_path: Path, variant: str) -> None:
    _, _, example, reference = lif
    art = compile_variant(lif, tmp_path, variant)
    metrics = compare(reference, TensorRTBackend().run(art, example))
    assert metrics["spike_agreement"].value >= 0.95
    assert art.meta["variant"] == variant


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_second_compile_loads_the_cached_engine(lif: Any, tmp_path: Path) -> None:
    assert compile_variant(lif, tmp_path, "fp32").meta["engine_cache"].startswith("built")
    assert compile_variant(lif, tmp_path, "fp32").meta["engine_cache"].startswith("loaded")


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_engine_recorded_for_another_gpu_is_rebuilt_on_compile(lif: Any, tmp_path: Path) -> None:
    art = compile_variant(lif, tmp_path, "fp32")
    side = sidecar_path(Path(art.path))
    record = json.loads(side.read_text())
    record["key"]["gpu_name"] = "some other GPU"
    side.write_text(json.dumps(record))
    again = compile_variant(lif, tmp_path, "fp32")
    assert (
        again.meta["engine_cache"].startswith("built")
        and "some other GPU" in again.meta["engine_cache"]
    )


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_batch_beyond_the_profile_is_refused(lif: Any, tmp_path: Path) -> None:
    _, _, example, _ = lif
    art = compile_variant(lif, tmp_path, "fp32", max_batch=2)
    wide = {"x": np.repeat(example["x"], 3, axis=1)}
    with pytest.raises(ValueError, match="outside the engine's optimisation profile"):
        TensorRTBackend().run(art, wide)


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_unparseable_graph_reports_the_node(tmp_path: Path) -> None:
    from neuroedge.backends.tensorrt import build_serialized_engine
    from neuroedge.export.tensorrt import InputProfile

    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], name="dedupe_tokens")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
    )
    path = tmp_path / "unique.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(TensorRTUnsupported, match="dedupe_tokens"):
        build_serialized_engine(
            path, [InputProfile("x", (4,), (4,), (4,))], 1 << 26, 3, tmp_path / "timing.cache"
        )


@pytest.mark.gpu
@pytest.mark.tensorrt
def test_gpu_compute_time_is_measured(lif: Any, tmp_path: Path) -> None:
    from neuroedge.export.tensorrt import calibration_feeds

    _, _, example, _ = lif
    art = compile_variant(lif, tmp_path, "fp32")
    feed = calibration_feeds(None, art.meta, [example])[0]
    times = art.handle.compute_times_ms(feed, repeats=20)
    assert len(times) == 20 and all(t > 0 for t in times)
