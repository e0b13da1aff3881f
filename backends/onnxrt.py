"""ONNX Runtime backend: the CPU execution provider, or CUDA / TensorRT ones when installed.

Provider choice is explicit: the default asks for every accelerated provider this onnxruntime
build offers (TensorRT, then CUDA) before the CPU. If the session comes up without a provider
that was asked for, that is a fallback: it is recorded in the artifact and every Report, never
silent (a test fails on it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from neuroedge.backends.base import MeasuredBackend, axes_meta, check_options, int_option, unroll
from neuroedge.backends.export_folders import export_once
from neuroedge.backends.export_folders import refuse_existing as _refuse_existing
from neuroedge.backends.onnxrt_probe import onnxrt_availability
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.npyfile import load_npz
from neuroedge.export.tensorrt import VARIANTS as PRECISIONS  # int8: Q/DQ, calibrated
from neuroedge.paths import artifact_dir
from neuroedge.shapes import as_numpy, bind_inputs
from neuroedge.types import Artifact, Availability, ModelSpec, Program, Support, TorchProgram

OPTIONS = ("form", "path", "precision", "providers", "threads")  # what compile / load read

ACCELERATED = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
CALIBRATION_SEED = 1000  # int8 graphs (here and in tensorrt) calibrate from it; parity: seed 0
CALIBRATION_SPLIT = "train"


def calibration_seeds(precision: str, samples: int) -> range:
    """The example seeds a ``precision`` graph is prepared with: ``samples`` calibration seeds
    from CALIBRATION_SEED for int8; seed 0 alone otherwise (its shapes, nothing calibrated)."""
    if precision != "int8":
        return range(1)
    return range(CALIBRATION_SEED, CALIBRATION_SEED + samples)


def calibration_examples(
    spec: ModelSpec, program: Any, seeds: range, config: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The examples of ``seeds`` an int8 graph calibrates on, from the training data where the
    model's examples are test data (``CALIBRATION_SPLIT``: never what ``evaluate`` scores)."""
    return [spec.built_example(s, program, config, CALIBRATION_SPLIT) for s in seeds]


class OnnxRuntimeBackend(MeasuredBackend):
    name: ClassVar[str] = "onnxrt"
    finite_inputs: ClassVar[bool] = True

    def probe(self) -> Availability:
        return onnxrt_availability()  # imports both packages: installed is not enough

    def supports(self, spec: ModelSpec) -> Support:
        if "onnx" not in spec.exportable:
            return Support(
                False,
                f"{spec.name} has no ONNX export (exportable: "
                f"{', '.join(spec.exportable) or 'none'})",
            )
        return Support(True)

    def checked_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """``check_options``, with form, precision, providers (a comma list) strings and path a
        file path, as compile and load read them (``deploy`` calls it before the build)."""
        given = check_options(self.name, options, OPTIONS)
        for key in ("form", "precision", "providers", "path"):
            value = given.get(key, "")
            if not isinstance(value, (str, os.PathLike) if key == "path" else str):
                raise ConfigError(
                    f"backend 'onnxrt' option {key}={value!r} ({type(value).__name__}): "
                    f"expected {'a file path' if key == 'path' else 'a string'}"
                )
        return given

    def compile(
        self, program: Program, spec: ModelSpec, options: Mapping[str, str] | None = None
    ) -> Artifact:
        options = self.checked_options(options)
        if not isinstance(program, TorchProgram):
            raise TypeError(f"onnxrt compiles torch programs, got a {program.kind} program")
        form = options.pop("form", "sequence")
        precision = options.pop("precision", "fp32")
        if precision not in PRECISIONS:  # before the export
            raise ConfigError(
                f"backend 'onnxrt' option precision={precision!r}: expected one of "
                f"{', '.join(PRECISIONS)}"
            )
        if "path" in options:  # the user's file name: never over files already there
            path = Path(options.pop("path"))
            _refuse_existing(path, precision, program.stateful)
            return self.compile_at(program, spec, path, form, precision, options)
        # a folder of its own named by its files' hash: runs at once never mix graph and state
        name = form if precision == "fp32" else f"{form}.{precision}"
        write = lambda work: self._export(program, spec, work / f"{form}.onnx", form, precision)
        path = export_once(artifact_dir(spec.name, self.name), name, write)
        artifact = self.load(path, spec, options)
        return replace(artifact, meta={**artifact.meta, **axes_meta(program)})

    def compile_at(
        self,
        program: TorchProgram,
        spec: ModelSpec,
        path: Path,
        form: str,
        precision: str,
        options: Mapping[str, str],
    ) -> Artifact:
        """Export to ``path`` (replacing a file there: the caller's own folder), reduce to
        ``precision``, load."""
        path = self._export(program, spec, path, form, precision)
        artifact = self.load(path, spec, options)
        return replace(artifact, meta={**artifact.meta, **axes_meta(program)})

    def _export(
        self, program: TorchProgram, spec: ModelSpec, path: Path, form: str, precision: str
    ) -> Path:
        """The graph to load: the export at ``path``, or its ``precision`` graph beside it."""
        from neuroedge.export.onnx import export_onnx

        export_onnx(program, spec, path, form=form)
        return path if precision == "fp32" else self._reduced(path, precision, program, spec)

    def _reduced(self, path: Path, precision: str, program: TorchProgram, spec: ModelSpec) -> Path:
        """The fp16 or int8 graph of the float32 export at ``path``, beside it (the graphs the
        TensorRT backend builds engines from; see ``neuroedge.export.tensorrt``). int8 is
        calibrated on the model's examples of ``calibration_seeds`` (CALIBRATION_SAMPLES of
        them from CALIBRATION_SEED, never the seed 0 parity is measured on), each step of a
        step-form graph with the state it meets."""
        from neuroedge.export.tensorrt import (
            CALIBRATION_SAMPLES,
            calibration_feeds,
            prepare_precision,
        )

        fp32 = self.load(path, spec, {"threads": "1"})
        seeds = calibration_seeds(precision, CALIBRATION_SAMPLES)
        examples = calibration_examples(spec, program, seeds)
        feeds = calibration_feeds(fp32.handle, fp32.meta, examples)
        return prepare_precision(path, precision, path.parent, feeds, check=False)

    def load(
        self,
        path: str | os.PathLike[str],
        spec: ModelSpec,
        options: Mapping[str, str] | None = None,
    ) -> Artifact:
        """An artifact from an existing .onnx file; corrupt files raise ArtifactError."""
        from neuroedge.export.onnx import FORM_KEY, load_onnx

        options = self.checked_options(options)
        threads = int_option(self.name, options, "threads", 1)
        model = load_onnx(path)
        session, fallbacks = open_session(path, options.get("providers"), threads, checked=True)
        active = session.get_providers()
        graph_inputs = [i.name for i in session.get_inputs()]
        output_names = [o.name for o in session.get_outputs()]
        state_names = tuple(n for n in graph_inputs if f"{n}_out" in output_names)
        form = session.get_modelmeta().custom_metadata_map.get(FORM_KEY, "step")
        meta = {
            "device": "cuda" if active[0] in ACCELERATED else "cpu",
            "providers": active,
            "fallbacks": fallbacks,
            "opset": model.opset_import[0].version,
            "form": form,
            "precision": _precision(model),
            "inputs": graph_inputs,
            "steps": session.get_inputs()[0].shape[0] if form == "sequence" else None,
            "outputs": output_names,
            "state_names": state_names,
            "state_init": _load_state_init(Path(path), session, state_names),
        }
        if meta["precision"] != "fp32":  # report rows say which graph ran
            meta["variant"] = meta["precision"]
        return Artifact(self.name, "onnx", spec, path=str(path), meta=meta, handle=session)

    def run(self, artifact: Artifact, inputs: Mapping[str, Any]) -> dict[str, Any]:
        bind_inputs(
            artifact.spec, inputs, finite=self.finite_inputs, fixed=artifact.meta.get("axes")
        )
        session, meta = artifact.handle, artifact.meta
        state_names = meta["state_names"]
        data_inputs = [n for n in meta["inputs"] if n not in state_names]
        outs = [n for n in meta["outputs"] if not n.endswith("_out") or n[:-4] not in state_names]
        xs = [np.ascontiguousarray(as_numpy(inputs[n])) for n in data_inputs]
        if not state_names:
            ys = _session_run(session, outs, dict(zip(data_inputs, xs)), artifact.path)
            return dict(zip(outs, ys))
        batch = int(xs[0].shape[1])
        state = [
            np.ascontiguousarray(np.broadcast_to(s, (batch, *s.shape[1:])))
            for s in meta["state_init"]
        ]
        fetch = outs + [f"{s}_out" for s in state_names]
        feed_names = data_inputs + list(state_names)
        if meta["form"] == "sequence":
            steps = meta["steps"]
            if int(xs[0].shape[0]) != steps:
                raise ValueError(
                    f"{artifact.path}: this sequence export runs T={steps} steps, got "
                    f"input {data_inputs[0]!r} of shape {list(xs[0].shape)}; "
                    "compile with the option form=step for any T (`neuroedge run --option "
                    "form=step`)"
                )
            ys = _session_run(session, fetch, dict(zip(feed_names, xs + state)), artifact.path)
            result = dict(zip(outs, ys[: len(outs)]))
            result.update({f"{n}_final": s for n, s in zip(state_names, ys[len(outs) :])})
            return result

        def step(args: list[Any]) -> list[Any]:
            return _session_run(session, fetch, dict(zip(feed_names, args)), artifact.path)

        ys, final = unroll(step, xs, state, len(outs), np.stack)
        result = dict(zip(outs, ys))
        result.update({f"{n}_final": s for n, s in zip(state_names, final)})
        return result


def open_session(
    path: str | os.PathLike[str],
    providers: str | None = None,
    threads: int = 1,
    *,
    checked: bool = False,
) -> tuple[Any, tuple[str, ...]]:
    """An ONNX Runtime session on ``path`` and a note per requested provider it runs without.

    ``providers`` is a comma list (default: the accelerated ones present, then CPU); threads
    do not spin. A missing, corrupt or unloadable file raises ArtifactError naming it
    (``checked``: the caller has already run ``load_onnx`` on it).
    """
    import onnxruntime as ort
    from neuroedge.export.onnx import load_onnx

    if not checked:
        load_onnx(path)
    requested = _requested_providers(providers)
    sess_opts = ort.SessionOptions()
    sess_opts.intra_op_num_threads = threads
    sess_opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(
            str(path),
            sess_options=sess_opts,
            providers=requested,
            provider_options=[_provider_options(p, Path(path)) for p in requested],
        )
    except Exception as err:  # onnxruntime raises its own untyped errors here
        raise ArtifactError(f"{path}: ONNX Runtime cannot load this model: {err}") from err
    active = session.get_providers()
    return session, tuple(
        f"asked for {p}, session runs without it (active: {', '.join(active)})"
        for p in requested
        if p not in active
    )


def _requested_providers(option: str | None) -> list[str]:
    import onnxruntime as ort

    if option:
        return [p.strip() for p in option.split(",") if p.strip()]
    available = ort.get_available_providers()
    return [p for p in ACCELERATED if p in available] + ["CPUExecutionProvider"]


def _session_run(session: Any, fetch: list[str], feed: dict[str, Any], path: Any) -> Any:
    """``session.run``; ONNX Runtime's shape and type refusals (an axis the export fixed, such
    as a model width other than the exported one) become a ValueError naming the file, what
    was fed and what the graph takes."""
    try:
        return session.run(fetch, feed)
    except Exception as err:
        if type(err).__name__ not in ("InvalidArgument", "Fail"):
            raise
        takes = {i.name: i.shape for i in session.get_inputs()}
        given = {k: list(np.shape(v)) for k, v in feed.items()}
        raise ValueError(f"{path}: inputs {given} do not fit the graph's {takes}: {err}") from None


def _provider_options(provider: str, model_path: Path) -> dict[str, str]:
    """TensorRT EP: cache engines beside the model (else every session rebuilds them), in a
    folder named by the graph's content hash: ONNX Runtime's engine id hashes the file name and
    tensor names but not the weights, and a file at one path may be exported again with other
    weights (a default export has a folder per content, ``export_folders``, but a path of the
    caller's own does not), which would otherwise run the old engine. The timing cache (per
    layer shape and GPU, not per weight) is the ``trt_ep_cache`` folder itself, beside the
    model: a default export's folder holds one content, so each has its own timing cache.
    CUDA EP: no TF32, so float32 parity with the host reference means float32."""
    if provider == "TensorrtExecutionProvider":
        from neuroedge.backends.tensorrt_cache import file_sha256

        cache = model_path.parent / "trt_ep_cache"
        engines = cache / file_sha256(model_path)[:16]
        # ORT creates each cache folder with a non-recursive create_directory: the nested one
        # would fail on a fresh export folder, and the session with it
        engines.mkdir(parents=True, exist_ok=True)
        return {
            "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(engines),
            "trt_timing_cache_enable": "True",
            "trt_timing_cache_path": str(cache),
        }
    if provider == "CUDAExecutionProvider":
        return {"use_tf32": "0"}
    return {}


def _read_state_file(side: Path, session: Any, state_names: tuple[str, ...]) -> list[Any]:
    """The arrays of ``state_names`` in ``side``, each checked against the graph's input."""
    import zipfile

    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    inputs = {i.name: i for i in session.get_inputs()}
    if not zipfile.is_zipfile(side):  # np.load would call it pickled data
        raise ArtifactError(f"{side}: not a state file (an .npz archive); export the model again")

    def check(names: list[str]) -> None:
        missing = [n for n in state_names if n not in names]
        if missing:
            raise ArtifactError(f"{side}: no initial state for {missing}")

    try:
        saved = load_npz(side, check, only=state_names)
        arrays = [saved[n] for n in state_names]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise ArtifactError(f"{side}: not a readable state file (.npz): {err}") from None
    for name, a in zip(state_names, arrays):
        want = inputs[name].shape
        dims_ok = a.ndim == len(want) and a.shape[0] == 1
        dims_ok = dims_ok and all(
            not isinstance(w, int) or w == d for w, d in zip(want[1:], a.shape[1:])
        )
        dtype = types.get(inputs[name].type)
        if not dims_ok or (dtype is not None and a.dtype != dtype):
            raise ArtifactError(
                f"{side}: state {name!r} is {a.dtype} {list(a.shape)}; the graph takes "
                f"{np.dtype(dtype or a.dtype).name} [1, {', '.join(map(str, want[1:]))}]"
            )
    return arrays


def _load_state_init(path: Path, session: Any, state_names: tuple[str, ...]) -> list[Any]:
    """Initial state saved beside the model. A neuroedge export declares that file in its
    metadata and is refused without it; a foreign graph without one starts from zeros. A
    renamed .onnx finds the state under its declared name; a state file that is unreadable or
    does not fit the graph's state inputs (shape [1, ...], dtype) is refused naming it."""
    if not state_names:
        return []
    from neuroedge.export.onnx import STATE_KEY, state_file

    side = state_file(path)
    declared = session.get_modelmeta().custom_metadata_map.get(STATE_KEY)
    if declared is not None and not side.is_file() and (path.parent / declared).is_file():
        side = path.parent / declared  # the .onnx was renamed, its state was not
    if declared is not None and not side.is_file():
        raise ArtifactError(
            f"{path}: the model's learned initial state {declared!r} (or {side.name}) is not "
            f"beside it in {path.parent}; copy it with the .onnx file "
            "(starting from zeros would change the outputs)"
        )
    if side.is_file():
        return _read_state_file(side, session, state_names)
    shapes = {i.name: i.shape for i in session.get_inputs()}
    init = []
    for n in state_names:
        dims = shapes[n][1:]
        if not all(isinstance(d, int) for d in dims):
            raise ArtifactError(
                f"{path}: state {n!r} has symbolic shape {shapes[n]} and no {side.name} beside it"
            )
        init.append(np.zeros((1, *dims), dtype=np.float32))
    return init


def _precision(model: Any) -> str:
    """fp32, or the reduced precision the graph records (``neuroedge.export.tensorrt``)."""
    import json

    from neuroedge.export.tensorrt import PRECISION_KEY

    record = {p.key: p.value for p in model.metadata_props}.get(PRECISION_KEY)
    try:
        return str(json.loads(record)["precision"]) if record else "fp32"
    except (ValueError, KeyError, TypeError):
        return "fp32"
