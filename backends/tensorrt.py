"""TensorRT backend: ONNX -> a strongly typed TensorRT engine (fp32, fp16, int8) on CUDA.

Compile: the torch program is exported to ONNX (``neuroedge.export.onnx``, explicit state,
sequence form by default), prepared for the variant (``neuroedge.export.tensorrt``: fp16 cast
in the graph, int8 as explicit Q/DQ calibrated on the model's examples), checked against the
parser's support matrix, then parsed (``OnnxParser.parse_from_file``), given one optimisation
profile (min/opt/max of every dynamic axis), a workspace limit and a timing cache, and built
with ``build_serialized_network``. Engines are cached by model hash, settings, TensorRT
version and GPU name (``tensorrt_cache``); a stale engine is rebuilt, never loaded.

Design decisions the docs leave open:

* Strongly typed networks only. TensorRT 11 removed the FP16/INT8 builder flags and implicit
  calibration; on 10.x we ask for ``STRONGLY_TYPED`` explicitly so both majors build the same
  graph with the same precision (the precision is in the ONNX file, see export/tensorrt.py).
* One optimisation profile, ``opt`` = the example's shapes (what is measured), batch 1..32 by
  default (option ``max_batch``).
* Builder optimisation level 3 (TensorRT's default) and a 1 GiB workspace, capped at half the
  GPU's free memory; the static budget of the graph at max shapes must fit in free memory.
* TF32 off (TensorRT enables it by default on Ampere and later): the fp32 variant is the
  engine path's parity reference against the host, so it computes in float32.
* The parser has the last word on support: the support-matrix check of
  export/tensorrt_support.py does not refuse graphs here (a newer TensorRT may take more), its
  findings are appended to the parser's errors. Parser errors carry the node's name and
  operator, from the parser when it says them and otherwise from the ONNX graph by node index.

This module has not yet run on a GPU in this project's CI (TensorRT cannot be installed on
CPU-only machines): it follows the documented TensorRT Python API; ``bench/gpu_check.sh``
exercises it on a GPU machine.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from neuroedge.backends.base import MeasuredBackend, check_options
from neuroedge.backends.export_folders import export_once
from neuroedge.backends.tensorrt_cache import EngineCache, EngineKey, file_sha256
from neuroedge.errors import ArtifactError, BackendUnavailable
from neuroedge.export.tensorrt import CALIBRATION_SAMPLES, VARIANTS
from neuroedge.export.tensorrt_profile import InputProfile, StaticBudget
from neuroedge.export.tensorrt_support import TensorRTUnsupported, tensorrt_issues
from neuroedge.paths import artifact_dir
from neuroedge.types import Artifact, Availability, ModelSpec, Program, Support

OPTIONS = (  # what compile reads
    "variant",
    "form",
    "max_batch",
    "workspace_mb",
    "optimization_level",
    "calibration_samples",
    "dir",
    "engine_path",
)
DEFAULTS = {
    "form": "sequence",
    "max_batch": 32,
    "workspace_mb": 1024,
    "optimization_level": 3,
    "calibration_samples": CALIBRATION_SAMPLES,
}
INSTALL_HINT = (
    "pip install 'neuroedge[tensorrt]' on a machine with an NVIDIA GPU (TensorRT's "
    "libraries download from NVIDIA's index at install time)"
)


def tensorrt_availability() -> Availability:
    """Whether TensorRT and a CUDA device are usable here, with the exact reason if not."""
    if importlib.util.find_spec("tensorrt") is None:
        return Availability(False, f"the tensorrt package is not installed; {INSTALL_HINT}")
    if importlib.util.find_spec("torch") is None:
        return Availability(False, "torch is not installed (engines run on torch CUDA buffers)")
    try:
        import tensorrt as trt
    except (ImportError, OSError) as err:  # e.g. libnvinfer / libnvonnxparser not found
        return Availability(False, f"tensorrt is installed but does not import: {err}")
    import torch

    if not torch.cuda.is_available():
        return Availability(
            False,
            f"TensorRT {trt.__version__} is installed but torch "
            f"{torch.__version__} sees no CUDA device (CPU build of "
            "torch, no GPU, or no driver)",
        )
    major, minor = torch.cuda.get_device_capability()
    return Availability(
        True,
        f"TensorRT {trt.__version__} on {torch.cuda.get_device_name()} "
        f"(compute {major}.{minor}), CUDA buffers via torch "
        f"{torch.__version__}",
    )


def network_flags(trt: Any) -> int:
    """Strongly typed on every major: implicit in 11.x, the STRONGLY_TYPED flag on 10.x."""
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if int(trt.__version__.split(".")[0]) >= 11 or flag is None:
        return 0
    return 1 << int(flag)


def parser_error_report(parser: Any, nodes: Sequence[Any], where: str) -> str:
    """Every parser error with the node's name and operator (from the graph if need be)."""
    lines = []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        index = int(err.node())
        name = err.node_name() if hasattr(err, "node_name") else ""
        op = err.node_operator() if hasattr(err, "node_operator") else ""
        if 0 <= index < len(nodes):
            name, op = name or nodes[index].name, op or nodes[index].op_type
        label = f"node {name!r} ({op}, #{index})" if index >= 0 else "graph"
        lines.append(f"{label}: {err.desc()} [{err.code()}]")
    lines = lines or ["no errors recorded"]
    return f"{where}: the TensorRT ONNX parser failed:\n  " + "\n  ".join(lines)


def _logger(trt: Any) -> Any:
    """A TensorRT logger that keeps warnings and errors, so failures can quote them."""
    level = trt.ILogger.Severity
    errors = (level.INTERNAL_ERROR, level.ERROR)
    kept = (*errors, level.WARNING)

    class Log(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.messages: list[str] = []

        def log(self, severity: Any, msg: str) -> None:
            if severity in kept:
                self.messages.append(f"[{severity.name}] {msg}")
            if severity in errors:
                print(f"TensorRT {severity.name}: {msg}", file=sys.stderr)

    return Log()


def build_serialized_engine(
    onnx_path: Path,
    profile: Sequence[InputProfile],
    workspace_bytes: int,
    optimization_level: int,
    timing_cache: Path,
) -> bytes:
    """Parse ``onnx_path`` and build a serialized engine; the timing cache is reused/updated."""
    import onnx
    import tensorrt as trt
    from neuroedge.atomic import write_bytes

    log = _logger(trt)
    builder = trt.Builder(log)
    network = builder.create_network(network_flags(trt))
    parser = trt.OnnxParser(network, log)
    if not parser.parse_from_file(str(onnx_path)):
        model = onnx.load(str(onnx_path), load_external_data=False)
        notes = tensorrt_issues(model)
        raise TensorRTUnsupported(
            parser_error_report(parser, model.graph.node, str(onnx_path))
            + "".join(f"\n  support matrix: {n}" for n in notes)
        )
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    config.builder_optimization_level = int(optimization_level)
    if hasattr(trt.BuilderFlag, "TF32"):  # float32 layers compute in float32, not TF32
        config.clear_flag(trt.BuilderFlag.TF32)
    trt_profile = builder.create_optimization_profile()
    for p in profile:
        trt_profile.set_shape(p.name, p.min, p.opt, p.max)
    config.add_optimization_profile(trt_profile)
    cache = config.create_timing_cache(timing_cache.read_bytes() if timing_cache.is_file() else b"")
    if not config.set_timing_cache(cache, ignore_mismatch=False):  # another device's cache
        config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=False)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ArtifactError(
            f"{onnx_path}: TensorRT could not build an engine:\n  "
            + "\n  ".join(log.messages[-20:] or ["(no log messages)"])
        )
    write_bytes(timing_cache, bytes(memoryview(config.get_timing_cache().serialize())))
    return bytes(memoryview(plan))


class _Deserializer:
    """``deserialize(bytes) -> engine | None``; holds the runtime, which must outlive engines."""

    def __init__(self, trt: Any) -> None:
        self.runtime = trt.Runtime(_logger(trt))

    def __call__(self, data: bytes) -> Any:
        return self.runtime.deserialize_cuda_engine(data)


class TensorRTBackend(MeasuredBackend):
    """Engines from the model's ONNX export; variants fp32, fp16 and int8 (one row each)."""

    name: ClassVar[str] = "tensorrt"
    finite_inputs: ClassVar[bool] = True
    variants: ClassVar[tuple[str, ...]] = VARIANTS

    def probe(self) -> Availability:
        return tensorrt_availability()

    def supports(self, spec: ModelSpec) -> Support:
        """Engines are built from the ONNX export: the same models onnxrt takes."""
        from neuroedge.backends.onnxrt import OnnxRuntimeBackend

        return OnnxRuntimeBackend().supports(spec)

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, Any] | None = None
    ) -> Artifact:
        """Options: variant (fp32|fp16|int8), form, max_batch, workspace_mb,
        optimization_level, calibration_samples (int8: examples of seeds from the onnxrt
        backend's CALIBRATION_SEED, disjoint from the seed 0 that `neuroedge run` and the GPU
        check compare on), dir (the working folder: the ONNX source and the prepared graph are
        rebuilt on each compile and kept in dir/<form>.<variant>-<hash of the files>, reused
        when the same; engines cached under dir/engines), engine_path."""
        from neuroedge.backends.onnxrt import (
            OnnxRuntimeBackend,
            calibration_examples,
            calibration_seeds,
        )
        from neuroedge.export.tensorrt import calibration_feeds, prepare_precision

        availability = self.probe()
        if not availability.ok:
            raise BackendUnavailable(f"backend 'tensorrt' is not available: {availability.reason}")
        opts = {**DEFAULTS, **check_options(self.name, options, OPTIONS)}
        variant = str(opts.get("variant", "fp32"))
        if variant not in VARIANTS:
            raise ValueError(f"TensorRT variant {variant!r} is not one of {', '.join(VARIANTS)}")
        folder = Path(opts.get("dir") or artifact_dir(spec.name, self.name))
        form = str(opts["form"])
        made: list[Any] = []  # the float32 source and its calibration feeds

        def write(work: Path) -> Path:
            cpu = {"providers": "CPUExecutionProvider"}
            source = OnnxRuntimeBackend().compile_at(
                program, spec, work / f"{form}.onnx", form, "fp32", cpu
            )
            # int8 calibrates on seeds disjoint from the example parity is measured on
            seeds = calibration_seeds(variant, int(opts["calibration_samples"]))
            examples = calibration_examples(spec, program, seeds)
            made.extend([source, calibration_feeds(source.handle, source.meta, examples)])
            return prepare_precision(source.path, variant, work, made[1], check=False)

        # the ONNX source and the graph the engine is built from, in a folder of their own
        # named by their hash (``export_folders``): a run at once never swaps them
        prepared = export_once(folder, f"{form}.{variant}", write)
        source, feeds = made
        return self._engine_artifact(spec, source, prepared, feeds[0], variant, opts)

    def _engine_artifact(
        self,
        spec: ModelSpec,
        source: Artifact,
        prepared: Path,
        feed: Mapping[str, Any],
        variant: str,
        opts: Mapping[str, Any],
    ) -> Artifact:
        import onnx
        import tensorrt as trt
        import torch
        from neuroedge.backends.tensorrt_runtime import TensorRTRunner
        from neuroedge.export.tensorrt_profile import optimization_profile, static_budget

        model = onnx.load(str(prepared))
        profile = optimization_profile(model, feed, {"batch": (1, int(opts["max_batch"]))})
        budget = static_budget(model, profile)
        free, _total = torch.cuda.mem_get_info()
        _check_budget(budget, free, str(prepared))
        workspace = min(int(opts["workspace_mb"]) << 20, free // 2)
        level = int(opts["optimization_level"])
        key = _engine_key(prepared, variant, opts, level, profile)
        cache = EngineCache(Path(opts.get("dir") or artifact_dir(spec.name, self.name)) / "engines")
        timing = cache.root / f"timing-{key.device_stem()}.cache"
        deserialize = _Deserializer(trt)
        engine, outcome = cache.load_or_build(
            key,
            lambda: build_serialized_engine(prepared, profile, workspace, level, timing),
            deserialize,
            path=Path(opts["engine_path"]) if opts.get("engine_path") else None,
        )
        meta = {k: v for k, v in source.meta.items() if k != "providers"}
        meta.update(
            {
                "device": "cuda",
                "variant": variant,
                "tensorrt": trt.__version__,
                "gpu": key.gpu_name,
                "onnx": str(prepared),
                "fallbacks": (),
                "engine_cache": f"{outcome.action}: {outcome.reason}",
                "profile": [asdict(p) for p in profile],
                "budget": asdict(budget),
            }
        )
        return Artifact(
            self.name,
            "trt-engine",
            spec,
            path=str(outcome.path),
            meta=meta,
            handle=TensorRTRunner(engine, profile, keepalive=deserialize.runtime),
        )

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Steps the engine exactly as the onnxrt backend steps a session (same feeds)."""
        from neuroedge.backends.onnxrt import OnnxRuntimeBackend

        return OnnxRuntimeBackend().run(artifact, inputs)


def _engine_key(
    prepared: Path,
    variant: str,
    opts: Mapping[str, Any],
    level: int,
    profile: Sequence[InputProfile],
) -> EngineKey:
    """The engine cache key: graph hash, build settings, TensorRT version and this GPU."""
    import tensorrt as trt
    import torch

    # The key holds the workspace asked for, not the capped one: free memory varies.
    settings = json.dumps(
        {
            "variant": variant,
            "form": opts["form"],
            "level": level,
            "workspace_mb": int(opts["workspace_mb"]),
            "profile": [asdict(p) for p in profile],
        },
        sort_keys=True,
    )
    major, minor = torch.cuda.get_device_capability()
    return EngineKey(
        file_sha256(prepared),
        settings,
        trt.__version__,
        torch.cuda.get_device_name(),
        f"{major}.{minor}",
    )


def _check_budget(budget: StaticBudget, free_bytes: int, where: str) -> None:
    if budget.total_bytes > free_bytes:
        raise BackendUnavailable(
            f"{where}: needs about {budget.total_bytes / 2**20:.0f} MiB at the profile's max "
            f"shapes (weights {budget.weight_bytes / 2**20:.1f} MiB, activations "
            f"{budget.activation_bytes / 2**20:.0f} MiB) but the GPU has "
            f"{free_bytes / 2**20:.0f} MiB free; lower max_batch"
        )
