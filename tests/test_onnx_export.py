"""ONNX export: explicit state, hidden-state refusal, parity over steps, bad files, atomicity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from neuroedge.backends.host import run_torch_program
from neuroedge.backends.onnxrt import OnnxRuntimeBackend
from neuroedge.bench.parity import check, require_nonzero_state
from neuroedge.errors import ArtifactError, ExportRefused
from neuroedge.export.onnx import export_onnx
from neuroedge.models.neurons.module import LIFCell
from neuroedge.types import IOSpec, ModelSpec, TorchProgram

STEPS, BATCH, WIDTH = 6, 2, 5


class ExplicitNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.lif = LIFCell()

    def forward(self, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z, v = self.lif(self.fc(x) * 3.0, v)
        return z, v, v


class HiddenStateNet(nn.Module):
    """The anti-pattern: the membrane lives in an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.v = torch.zeros(1, WIDTH)

    def forward(self, x: torch.Tensor, dummy: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.v = 0.5 * self.v + self.fc(x)
        z = (self.v > 1.0).float()
        self.v = self.v * (1 - z)
        return z, self.v, dummy


def toy_spec(module: nn.Module) -> tuple[ModelSpec, TorchProgram]:
    torch.manual_seed(0)
    program = TorchProgram(
        module, ("x",), ("spikes", "membrane"), ("v",), lambda b: (torch.zeros(b, WIDTH),)
    )

    def example(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {"x": rng.uniform(0, 1, (STEPS, BATCH, WIDTH)).astype(np.float32)}

    spec = ModelSpec(
        "snn.toy",
        "snn",
        "toy",
        (IOSpec("x", ("T", "batch", WIDTH)),),
        (IOSpec("spikes", ("T", "batch", WIDTH)), IOSpec("membrane", ("T", "batch", WIDTH))),
        build=lambda cfg: program,
        example=example,
        exportable=("onnx",),
    )
    return spec, program


@pytest.mark.parametrize("form", ["step", "sequence"])
def test_explicit_state_export_matches_host_over_steps(tmp_path: Path, form: str) -> None:
    torch.manual_seed(1)
    spec, program = toy_spec(ExplicitNet())
    backend = OnnxRuntimeBackend()
    art = backend.compile(program, spec, {"path": str(tmp_path / "m.onnx"), "form": form})
    example = spec.example(3)
    reference = run_torch_program(program, example)
    require_nonzero_state(reference)
    assert reference["spikes"].sum() > 0, "the example must make the net spike"
    check(reference, backend.run(art, example), tolerance=1e-5)


def test_export_is_checked_opset17_with_dynamic_batch(tmp_path: Path) -> None:
    spec, program = toy_spec(ExplicitNet())
    path = export_onnx(program, spec, tmp_path / "m.onnx")
    model = onnx.load(str(path))
    assert model.opset_import[0].version >= 17
    onnx.checker.check_model(model, full_check=True)
    dims = {i.name: i.type.tensor_type.shape.dim[0].dim_param for i in model.graph.input}
    assert dims == {"x": "batch", "v": "batch"}
    backend = OnnxRuntimeBackend()
    art = backend.load(path, spec)
    big = {"x": np.random.default_rng(0).uniform(0, 1, (STEPS, 7, WIDTH)).astype(np.float32)}
    check(run_torch_program(program, big), backend.run(art, big), tolerance=1e-5)


def test_hidden_state_is_refused_with_a_reason(tmp_path: Path) -> None:
    spec, program = toy_spec(HiddenStateNet())
    with pytest.raises(ExportRefused, match=r"changes tensors it keeps internally \(<root>\.v\)"):
        export_onnx(program, spec, tmp_path / "m.onnx")
    assert not list(tmp_path.iterdir()), "a refused export must leave no file behind"


def test_truncated_and_corrupt_onnx_give_clear_errors(tmp_path: Path) -> None:
    spec, program = toy_spec(ExplicitNet())
    good = export_onnx(program, spec, tmp_path / "good.onnx").read_bytes()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good[: len(good) // 2])
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x00garbage" * 50)
    backend = OnnxRuntimeBackend()
    for path in (truncated, corrupt):
        with pytest.raises(ArtifactError, match=str(path.name)):
            backend.load(path, spec)
    with pytest.raises(ArtifactError, match="no such ONNX file"):
        backend.load(tmp_path / "missing.onnx", spec)


def test_sequence_form_rejects_another_length(tmp_path: Path) -> None:
    spec, program = toy_spec(ExplicitNet())
    backend = OnnxRuntimeBackend()
    art = backend.compile(program, spec, {"path": str(tmp_path / "s.onnx"), "form": "sequence"})
    short = {"x": np.zeros((STEPS - 1, BATCH, WIDTH), np.float32)}
    with pytest.raises(ValueError, match=f"runs T={STEPS} steps"):
        backend.run(art, short)


def test_wrong_input_shape_names_the_expected_shape(tmp_path: Path) -> None:
    spec, program = toy_spec(ExplicitNet())
    backend = OnnxRuntimeBackend()
    art = backend.compile(program, spec, {"path": str(tmp_path / "m.onnx")})
    with pytest.raises(ValueError, match=r"expected shape x\[T, batch, 5\]"):
        backend.run(art, {"x": np.zeros((STEPS, BATCH, 3), np.float32)})


def test_missing_initial_state_file_is_refused_not_zeroed(tmp_path: Path) -> None:
    spec, program = toy_spec(ExplicitNet())
    path = export_onnx(program, spec, tmp_path / "m.onnx")
    (tmp_path / "m.state.npz").unlink()  # copied the .onnx alone, as onto a robot
    with pytest.raises(ArtifactError, match=r"m\.state\.npz.* is not beside it"):
        OnnxRuntimeBackend().load(path, spec)


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("m.onnx", "m.state.npz"),
        ("m.int8.onnx", "m.int8.state.npz"),
        ("ttt.v1", "ttt.v1.state.npz"),
    ],
)
def test_the_state_file_keeps_the_graphs_whole_name(name: str, state: str) -> None:
    from neuroedge.export.onnx import state_file

    assert state_file(Path("out") / name) == Path("out") / state


def test_two_exports_differing_after_the_last_dot_keep_their_own_state(tmp_path: Path) -> None:
    """ttt.v1 and ttt.v2 shared ttt.state.npz: the first ran with the second's learned S0
    (max abs err 2.46)."""
    import neuroedge as ne
    from neuroedge.registry import get_backend, get_model

    spec = get_model("ttt.linear_attention")
    paths = {s: ne.export(spec.name, "onnx", tmp_path / f"ttt.v{s}", {"seed": s}) for s in (0, 1)}
    x = spec.example(0)
    for seed, path in paths.items():
        program = spec.build({**spec.default_config, "seed": seed})
        art = OnnxRuntimeBackend().load(path, spec)
        ref = get_backend("host").run(get_backend("host").compile(program, spec), x)
        got = OnnxRuntimeBackend().run(art, x)
        assert np.abs(got["y"] - ref["y"]).max() < 1e-4, seed
