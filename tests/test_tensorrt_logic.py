"""The TensorRT and GPU-check decisions that run without a GPU, against fakes of ``tensorrt``
and ``torch.cuda``: the engine cache key, the memory budget refusal, TF32 off in the builder,
the GPU compute percentile and the runner's stream synchronisation."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from neuroedge.backends.tensorrt import _check_budget, _engine_key, build_serialized_engine
from neuroedge.backends.tensorrt_cache import EngineCache, EngineKey
from neuroedge.backends.tensorrt_runtime import TensorRTRunner
from neuroedge.bench.gpu_check import gpu_compute_p50
from neuroedge.errors import BackendUnavailable
from neuroedge.export.tensorrt import InputProfile, StaticBudget

PROFILE = [InputProfile("x", (8, 1, 4), (8, 1, 4), (8, 32, 4))]
OPTS = {"form": "sequence", "workspace_mb": 1024}


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake ``tensorrt`` module and an H200 as far as ``torch.cuda`` says."""
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="11.4.0.106"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")


def test_engine_key_holds_variant_profile_level_and_the_gpu(tmp_path: Path, gpu: None) -> None:
    graph = tmp_path / "g.onnx"
    graph.write_bytes(b"graph")
    key = _engine_key(graph, "fp32", OPTS, 3, PROFILE)
    assert key == _engine_key(graph, "fp32", OPTS, 3, PROFILE)
    assert (key.tensorrt_version, key.gpu_name, key.compute_capability) == (
        "11.4.0.106",
        "NVIDIA H200",
        "9.0",
    )
    wider = [InputProfile("x", (8, 1, 4), (8, 1, 4), (8, 64, 4))]
    others = [
        _engine_key(graph, "fp16", OPTS, 3, PROFILE),
        _engine_key(graph, "fp32", OPTS, 3, wider),
        _engine_key(graph, "fp32", OPTS, 5, PROFILE),
        _engine_key(graph, "fp32", {**OPTS, "form": "step"}, 3, PROFILE),
        _engine_key(graph, "fp32", {**OPTS, "workspace_mb": 512}, 3, PROFILE),
    ]
    assert len({k.digest() for k in (key, *others)}) == 1 + len(others)


def test_engine_of_another_compute_capability_is_rebuilt(tmp_path: Path) -> None:
    key = EngineKey("ab" * 32, "{}", "11.4.0.106", "NVIDIA H200", "9.0")
    other = EngineKey(**{**key.__dict__, "compute_capability": "8.9"})  # same name, other chip
    cache = EngineCache(tmp_path)
    EngineCache.store(cache.path_for(key), other, b"old")
    engine, outcome = cache.load_or_build(key, lambda: b"new", lambda data: data)
    assert engine == b"new" and "compute_capability '8.9' (now '9.0')" in outcome.reason


def test_budget_beyond_free_memory_is_refused_with_the_sizes() -> None:
    budget = StaticBudget(weight_bytes=1 << 20, activation_bytes=3 << 20, nodes=4)
    _check_budget(budget, 4 << 20, "m.onnx")  # fits exactly
    with pytest.raises(BackendUnavailable, match=r"m.onnx: needs about 4 MiB .* 3 MiB free"):
        _check_budget(budget, 3 << 20, "m.onnx")


def fake_builder_trt(seen: dict[str, Any]) -> SimpleNamespace:
    """Enough of ``tensorrt`` for ``build_serialized_engine``; TF32 on by default, as in
    TensorRT; ``seen`` gets the builder flags and optimization level at build time and the
    profile shapes."""

    class Config:
        def __init__(self) -> None:
            self.flags = {"TF32"}

        def set_memory_pool_limit(self, pool: str, size: int) -> None:
            seen[pool] = size

        def clear_flag(self, flag: str) -> None:
            self.flags.discard(flag)

        def add_optimization_profile(self, profile: Any) -> None:
            seen["profile"] = profile.shapes

        def create_timing_cache(self, data: bytes) -> Any:
            return SimpleNamespace(serialize=lambda: b"timing")

        def set_timing_cache(self, cache: Any, ignore_mismatch: bool) -> bool:
            return True

        get_timing_cache = lambda self: self.create_timing_cache(b"")

    class Builder:
        def __init__(self, log: Any) -> None:
            self.config = Config()

        create_network = lambda self, flags: "network"
        create_builder_config = lambda self: self.config

        def create_optimization_profile(self) -> Any:
            shapes: dict[str, Any] = {}
            return SimpleNamespace(shapes=shapes, set_shape=lambda n, *s: shapes.update({n: s}))

        def build_serialized_network(self, network: Any, config: Config) -> bytes:
            seen["flags"] = set(config.flags)
            seen["level"] = getattr(config, "builder_optimization_level", None)
            return b"plan"

    severity = SimpleNamespace(INTERNAL_ERROR="internal", ERROR="error", WARNING="warning")
    logger = type("ILogger", (), {"Severity": severity, "__init__": lambda self: None})
    return SimpleNamespace(
        __version__="11.4.0.106",
        ILogger=logger,
        Builder=Builder,
        OnnxParser=lambda network, log: SimpleNamespace(parse_from_file=lambda path: True),
        MemoryPoolType=SimpleNamespace(WORKSPACE="workspace"),
        BuilderFlag=SimpleNamespace(TF32="TF32"),
        NetworkDefinitionCreationFlag=SimpleNamespace(STRONGLY_TYPED=1),
    )


def test_builder_turns_tf32_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setitem(sys.modules, "tensorrt", fake_builder_trt(seen))
    timing = tmp_path / "timing.cache"
    plan = build_serialized_engine(tmp_path / "g.onnx", PROFILE, 1 << 26, 5, timing)
    assert plan == b"plan" and seen["flags"] == set()  # fp32 layers compute in float32
    assert seen["level"] == 5  # the asked level, not TensorRT's default 3
    assert seen["workspace"] == 1 << 26 and seen["profile"] == {
        "x": ((8, 1, 4), (8, 1, 4), (8, 32, 4))
    }
    assert timing.read_bytes() == b"timing"


def test_gpu_compute_time_is_the_median_of_the_engine_calls() -> None:
    feeds = []

    def times(feed: dict[str, Any], repeats: int) -> list[float]:
        feeds.append(feed)
        return [float(t) for t in np.random.default_rng(0).permutation(np.arange(1, 102))]

    meta = {"form": "sequence", "inputs": ["x"]}
    art = SimpleNamespace(
        backend="tensorrt", meta=meta, handle=SimpleNamespace(compute_times_ms=times)
    )
    example = {"x": np.ones((8, 1, 4), np.float32)}
    p50 = gpu_compute_p50(art, example)
    assert p50 is not None and (p50.value, p50.unit) == (51.0, "ms")  # p90 would read 91
    assert list(feeds[0]) == ["x"] and np.array_equal(feeds[0]["x"], example["x"])
    assert gpu_compute_p50(SimpleNamespace(**{**vars(art), "backend": "onnxrt"}), example) is None
    assert gpu_compute_p50(SimpleNamespace(**{**vars(art), "meta": {"form": "step"}}), {}) is None


def fake_runner(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> TensorRTRunner:
    """A runner whose engine calls, stream block, stream syncs, CUDA events and output reads
    (``.cpu()``) only append to ``events``."""

    @contextmanager
    def on_stream(stream: Any) -> Any:
        events.append("enter stream")
        yield
        events.append("exit stream")

    class Output:
        def cpu(self) -> torch.Tensor:
            events.append("read")
            return torch.ones(2)

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            pass

        def record(self, stream: Any) -> None:
            events.append("record")

        def elapsed_time(self, end: Any) -> float:
            events.append("elapsed")
            return 0.5

    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    runner = object.__new__(TensorRTRunner)  # no engine: the parts below stand in for it
    runner.outputs = ["y"]
    runner.stream = SimpleNamespace(synchronize=lambda: events.append("sync"), cuda_stream=0)
    runner._bind = lambda feeds: events.append("bind") or {"y": Output()}
    runner._execute = lambda: events.append("execute")
    return runner


def test_runner_synchronises_its_stream_before_results_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    runner = fake_runner(monkeypatch, events)
    out = runner.run(None, {"x": np.zeros(2, np.float32)})
    assert np.array_equal(out[0], np.ones(2))
    assert events[:3] == ["enter stream", "bind", "execute"] and events.count("sync") == 1
    read, sync = events.index("read"), events.index("sync")
    # on the runner's stream (ordered after the engine) or after the sync; never on the
    # default stream between the two, where it races the engine
    assert read < events.index("exit stream") < sync or sync < read
    events.clear()
    times = runner.compute_times_ms({"x": np.zeros(2, np.float32)}, repeats=3, warmup=1)
    assert times == [0.5] * 3
    assert events.index("sync") < events.index("elapsed")  # events read after the sync
    inside = events[events.index("enter stream") + 1 : events.index("exit stream")]
    assert inside.count("execute") == 4 and inside.count("record") == 6  # on the runner's stream
    assert events.count("execute") == 4 and events.count("record") == 6
