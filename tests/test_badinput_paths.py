"""Bad input found by the 2026-12-06 audit: output paths that cannot be written or are empty,
a history that is no database given to the CIFAR-10 recipe, crafted CIFAR batches, garbage
checkpoints and an unknown TensorRT precision.

Each test failed on the code before the fix: the work ran before a late ``[Errno 2]`` (or an
empty --out wrote into the current folder or nothing at all), training started, a raw
OverflowError/MemoryError, torch's advice to load with weights_only=False, or only "TensorRT is
not installed".
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from neuroedge.atomic import check_writable
from neuroedge.cli import main
from neuroedge.errors import ArtifactError, ExportRefused

UNWRITABLE = "/proc/neuroedge-audit-nope"  # /proc takes no new file, not even from root


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("the work started before the output path was checked")


def test_check_writable_probes_the_nearest_existing_folder(tmp_path: Path) -> None:
    for folder in (False, True):
        with pytest.raises(FileNotFoundError, match=f"cannot write {UNWRITABLE}/x: /proc takes"):
            check_writable(f"{UNWRITABLE}/x", folder=folder)
        with pytest.raises(FileNotFoundError, match="'': an empty path; give a"):
            check_writable("", folder=folder)
    assert check_writable(tmp_path / "new" / "r.json") == tmp_path / "new" / "r.json"
    assert check_writable(tmp_path, folder=True) == tmp_path
    assert list(tmp_path.iterdir()) == []  # the probe file is gone, no folder was made


@pytest.mark.parametrize("out", [UNWRITABLE, ""])
def test_bench_refuses_the_report_folder_before_the_run(
    out: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import neuroedge.bench.runner as runner

    monkeypatch.setattr(runner, "bench_model", _refuse)
    monkeypatch.chdir(tmp_path)  # the old code wrote an empty --out into the current folder
    args = ["bench", "snn.lif_convnet", "--out", out, "--history", str(tmp_path / "h.sqlite")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert ("/proc takes no new file" if out else "'': an empty path; give a folder") in err
    assert not (tmp_path / "report.json").exists()


@pytest.mark.parametrize("out", [f"{UNWRITABLE}.pt", ""])
def test_train_refuses_the_checkpoint_path_before_training(
    out: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuroedge.types import ModelSpec

    monkeypatch.setattr(ModelSpec, "hook", lambda self, name: _refuse)
    assert main(["train", "snn.lif_convnet", "--out", out]) == 2
    err = capsys.readouterr().err
    assert ("/proc takes no new file" if out else "'': an empty path; give a file") in err


@pytest.mark.parametrize("out", [f"{UNWRITABLE}.json", ""])
def test_nir_refuses_the_comparison_path_before_the_run(
    out: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import neuroedge.api as api

    monkeypatch.setattr(api, "check_nir", _refuse)
    assert main(["nir", "any.nir", "--out", out]) == 2
    err = capsys.readouterr().err
    assert ("/proc takes no new file" if out else "'': an empty path; give a file") in err


def test_export_refuses_an_unwritable_or_empty_out(capsys: pytest.CaptureFixture[str]) -> None:
    config = ["--config", "untrained=true"]
    assert main(["export", "snn.lif_convnet", "--out", f"{UNWRITABLE}.onnx", *config]) == 2
    assert f"cannot write {UNWRITABLE}.onnx: /proc takes no new file" in capsys.readouterr().err
    assert main(["export", "snn.lif_convnet", "--out", "", *config]) == 2
    assert "'': an empty path; give a file path" in capsys.readouterr().err


def test_an_unknown_tensorrt_precision_is_refused_naming_the_allowed_ones(tmp_path: Path) -> None:
    from neuroedge.api import export

    with pytest.raises(ExportRefused, match="precision 'fp8': .*fp32, fp16, int8"):
        export("snn.lif_convnet", "tensorrt", tmp_path / "f.engine", {"untrained": True}, "fp8")
    assert not (tmp_path / "f.engine").exists()


def test_recipe_refuses_a_history_that_is_not_a_database_before_training(
    tmp_path: Path, write_cifar, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from neuroedge.models.unisparse import pipeline, train
    from neuroedge.models.unisparse.recipe import main as recipe_main

    for module, name in ((train, "train_dense"), (train, "sparsify"), (pipeline, "load_data")):
        monkeypatch.setattr(module, name, _refuse)
    data, history = write_cifar(tmp_path / "cifar", 4), tmp_path / "afile"
    history.write_text("not a database\n" * 100)
    argv = ["--data", str(data), "--out", str(tmp_path / "out"), "--history", str(history)]
    assert recipe_main([*argv, "--config", "device=cpu"]) == 2
    err = capsys.readouterr().err
    assert f"recipe: error: history {history}: not a neuroedge history database" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"\x8e" + b"\xff" * 8, "BINBYTES exceeds"),  # a length past the largest size
        (b"\x8e" + b"\xff" * 7 + b"\x3f", "MemoryError"),  # one too large to allocate
    ],
)
def test_a_batch_with_a_huge_length_field_is_named(
    blob: bytes, why: str, tmp_path: Path, write_cifar
) -> None:
    from neuroedge.models.unisparse.data import load_cifar10

    folder = write_cifar(tmp_path / "cifar", 4)
    (folder / "data_batch_1").write_bytes(blob)
    with pytest.raises(ValueError, match=f"data_batch_1: not a CIFAR-10 python batch .*{why}"):
        load_cifar10(folder)


def test_a_garbage_checkpoint_gets_no_advice_to_unpickle_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from neuroedge.checkpoints import load_checkpoint

    class Code:
        def __reduce__(self) -> tuple:
            return (os.getcwd, ())

    (tmp_path / "g.pt").write_bytes(b"x")
    (tmp_path / "code.pt").write_bytes(pickle.dumps({"state_dict": Code()}, protocol=2))
    for name, reason in (("g.pt", "operand"), ("code.pt", "getcwd")):
        with pytest.raises(ArtifactError, match=f"{name}: not a readable checkpoint") as err:
            load_checkpoint(tmp_path / name)
        message = str(err.value)
        assert "not a weights-only torch checkpoint" in message and reason in message
        assert "weights_only" not in message and "Re-running" not in message
    args = ["run", "snn.lif_convnet", "--config", f"checkpoint={tmp_path / 'g.pt'}"]
    assert main(args) == 2
    err_text = capsys.readouterr().err
    assert "g.pt: not a readable checkpoint" in err_text and "weights_only" not in err_text


@pytest.mark.parametrize("data", [b"\x80\x02J\x00", b"\x80\x02M\x00", b"\x80\x02G\x00\x00"])
def test_a_pickle_cut_inside_an_opcode_argument_is_not_a_readable_checkpoint(
    tmp_path: Path, data: bytes
) -> None:
    from neuroedge.checkpoints import load_checkpoint

    (tmp_path / "cut.pt").write_bytes(data)  # was struct.error: a traceback, exit 1
    with pytest.raises(ArtifactError, match="cut.pt: not a readable checkpoint"):
        load_checkpoint(tmp_path / "cut.pt")


@pytest.mark.parametrize(
    "backend", ["host", "onnxrt", pytest.param("lava", marks=pytest.mark.loihi)]
)
def test_torch_onnx_and_lava_refuse_non_finite_and_empty_inputs_and_take_grad_tensors(backend):
    """Lava read a NaN pixel as 0 (no finite check) and refused a requires_grad tensor with
    torch's RuntimeError "Can't call numpy() on Tensor that requires grad"."""
    import numpy as np
    import torch

    import neuroedge as ne
    from neuroedge.errors import InputError
    from neuroedge.registry import get_backend

    art, _ = ne.deploy("snn.lif_convnet", backend, config={"smoke": True}, repeats=1)
    x = art.spec.example_for(0, {"smoke": True})["x"]
    run = get_backend(backend).run
    y = x.copy()
    y.flat[0] = np.nan  # a NaN pixel was read as "no spike": finite logits, no error
    with pytest.raises(InputError, match=r"input 'x': 1 values are NaN or inf"):
        run(art, {"x": y})
    with pytest.raises(InputError, match=r"axis 0 \(T\) is empty"):
        run(art, {"x": x[:0]})  # was a RuntimeError from torch.stack
    want = run(art, {"x": x})["logits"]
    got = run(art, {"x": torch.as_tensor(x).requires_grad_()})["logits"]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    if backend == "lava":
        art.handle.close()


def test_cadre_names_a_non_finite_value_and_checks_the_domain_index():
    import numpy as np

    from neuroedge.models.cadre.spec import DOMAINS, SPEC

    program = SPEC.build({"smoke": True})
    ex = SPEC.example(0)
    x = ex["x"].copy()
    x[1, 4, 2] = np.inf  # was reported as "window 1 has a gap (NaN)"
    with pytest.raises(ValueError, match=r"x: window 1 step 4 feature 2 is inf"):
        program.fn(x=x, domain=ex["domain"])
    for bad in (ex["domain"] * 0 - 1, ex["domain"] * 0 + DOMAINS, ex["domain"][:1]):
        with pytest.raises(ValueError, match=rf"domain: expected 4 indices in 0..{DOMAINS - 1}"):
            program.fn(x=ex["x"], domain=bad)
    assert set(program.fn(x=ex["x"], domain=ex["domain"])) == {"graph", "latents"}
