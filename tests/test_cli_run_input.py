"""`neuroedge run NAME --input X.npz --output Y.npz`: a user's own arrays, checked before the
model runs, every error naming the file; outputs written atomically and equal to the host's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroedge.cli import main

NAME = "ttt.linear_attention"  # untrained, one input x[T, batch, d_model=32]


def _x(t: int = 5) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((t, 3, 32)).astype(np.float32)


def test_run_on_a_users_npz_writes_the_hosts_outputs(tmp_path: Path, capsys) -> None:
    from neuroedge.registry import get_backend, get_model

    np.savez(tmp_path / "x.npz", x=_x())
    assert (
        main(["run", NAME, "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")])
        == 0
    )
    out = capsys.readouterr().out
    assert "input " in out and "x [5, 3, 32]" in out and "outputs written to" in out
    spec, host = get_model(NAME), get_backend("host")
    expected = host.run(host.compile(spec.build({}), spec), {"x": _x()})
    with np.load(tmp_path / "y.npz") as got:
        assert sorted(got.files) == sorted(expected)
        np.testing.assert_array_equal(got["y"], expected["y"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_run_on_onnxrt_takes_any_t_with_form_step_and_matches_the_host(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    np.save(tmp_path / "x.npy", _x(7))  # one input: an .npy will do
    args = ["run", NAME, "--input", str(tmp_path / "x.npy")]
    assert main([*args, "--output", str(tmp_path / "host.npz")]) == 0
    assert (
        main(
            [
                *args,
                "--backend",
                "onnxrt",
                "--option",
                "form=step",
                "--output",
                str(tmp_path / "ort.npz"),
            ]
        )
        == 0
    )
    with np.load(tmp_path / "host.npz") as a, np.load(tmp_path / "ort.npz") as b:
        np.testing.assert_allclose(b["y"], a["y"], atol=1e-4)


def test_the_sequence_graph_names_its_t_and_the_option(tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnxruntime")
    np.save(tmp_path / "x.npy", _x(7))
    assert main(["run", NAME, "--backend", "onnxrt", "--input", str(tmp_path / "x.npy")]) == 2
    assert "runs T=16 steps" in (err := capsys.readouterr().err) and "--option form=step" in err


def _write(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / {
        "npy_as_npz": "x.npz",
        "empty": "x.npz",
        "text": "x.npz",
        "txt": "x.txt",
        "dir": "sub",
    }.get(kind, "x.npz")
    if kind == "wrong_name":
        np.savez(path, z=_x())
    elif kind == "float64":
        np.savez(path, x=_x().astype(np.float64))
    elif kind == "shape":
        np.savez(path, x=_x()[..., :16])
    elif kind == "object":
        np.savez(path, x=np.array([{"a": 1}], dtype=object))
    elif kind == "npy_as_npz":
        with open(path, "wb") as fh:
            np.save(fh, _x())
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("1,2,3\n")
    elif kind == "txt":
        path.write_text("1,2,3\n")
    elif kind == "dir":
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "wrong_name",
            r"x\.npz: model 'ttt\.linear_attention' takes inputs \['x'\]; missing "
            r"\['x'\], unexpected \['z'\]",
        ),
        ("float64", r"x\.npz: .*expected shape x\[T, batch, d_model\]:float32, got dtype float64"),
        ("shape", r"x\.npz: .*axis 2 \(d_model\) is 16 but the built model fixed d_model=32"),
        ("object", r"x\.npz: not a readable \.npz file of arrays \(Object arrays cannot"),
        ("npy_as_npz", r"x\.npz: not an \.npz file: it is an \.npy file"),
        ("empty", r"x\.npz: not an \.npz file: it is empty"),
        ("text", r"x\.npz: not an \.npz file: it is neither format \(first bytes b'1,2,3\\n'\)"),
        ("txt", r"x\.txt: expected an \.npz with arrays named \['x'\]"),
        ("dir", r"sub: is a directory"),
        (
            "missing",
            r"nothere\.npz: no such file \(inputs of ttt\.linear_attention: "
            r"x\[T, batch, d_model\]:float32\)",
        ),
    ],
)
def test_bad_input_files_are_named_before_the_model_runs(tmp_path, capsys, kind, message) -> None:
    import re

    path = tmp_path / "nothere.npz" if kind == "missing" else _write(tmp_path, kind)
    out = tmp_path / "y.npz"
    assert main(["run", NAME, "--input", str(path), "--output", str(out)]) == 2
    assert re.search(message, capsys.readouterr().err), message
    assert not out.exists()


def test_a_bad_output_or_option_is_refused_before_work(tmp_path: Path, capsys) -> None:
    assert main(["run", NAME, "--output", str(tmp_path / "y.txt")]) == 2
    assert "--output" in (err := capsys.readouterr().err) and "ending in .npz" in err
    assert main(["run", NAME, "--option", "form"]) == 2
    assert "--option 'form': expected KEY=VALUE" in capsys.readouterr().err
    assert main(["run", NAME, "--option", "form=step", "--option", "form=sequence"]) == 2
    assert "--option form is given twice: 'step' and 'sequence'" in capsys.readouterr().err
    assert main(["run", NAME, "--input", str(tmp_path / "x.npz"), "--seed", "3"]) == 2
    assert "--seed picks the generated example input" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["run", NAME, "--output", str(tmp_path / "file" / "y.npz")]) == 2
    assert "file" in capsys.readouterr().err


def test_a_multi_input_model_refuses_an_npy(tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.zeros((1, 8), np.int64))
    assert (
        main(["run", "vla.specprune", "--config", "smoke=true", "--input", str(tmp_path / "x.npy")])
        == 2
    )
    err = capsys.readouterr().err
    assert "takes 5 inputs" in err and "arrays of one .npz named ['primary'" in err


def test_event_camera_journey_train_on_your_recordings_then_run_at_their_size(
    tmp_path: Path, capsys
) -> None:
    """`neuroedge train event.bivision --config data=FOLDER` on 16x16 recordings (the N-CARS
    layout) trains a 16x16 net; `neuroedge run` builds it from the checkpoint and takes a
    16x16 input from a file, or refuses a 32x32 one naming the size."""
    from neuroedge.models.bivision.data import ensure_dataset

    gen = {"train_samples": 8, "test_samples": 4, "size": 16, "seed": 0, "noise_rate_hz": 0.0}
    root = ensure_dataset(tmp_path / "data", "classification", gen, progress=False)
    ckpt = tmp_path / "mine.pt"
    cfg = [f"data={root}", "epochs=1", "batch=4", "threads=1"]
    assert main(["train", "event.bivision", "--out", str(ckpt), "--config", *cfg]) == 0
    capsys.readouterr()
    from neuroedge.models.bivision.spec import SPEC

    x = SPEC.example_for(1, {"checkpoint": str(ckpt)})["x"]
    assert x.shape == (5, 1, 2, 16, 16)
    np.savez(tmp_path / "x.npz", x=x)
    args = ["run", "event.bivision", "--config", f"checkpoint={ckpt}", "--input"]
    assert main([*args, str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")]) == 0
    with np.load(tmp_path / "y.npz") as y:
        assert y["detection"].shape == (5, 1, 5, 4, 4)
    np.savez(tmp_path / "x32.npz", x=SPEC.example_for(1, {"smoke": True})["x"])
    capsys.readouterr()
    assert main([*args, str(tmp_path / "x32.npz")]) == 2
    assert "x32.npz: " in (err := capsys.readouterr().err) and "fixed size=16" in err


def test_archive_names_are_checked_before_any_array_is_read(tmp_path: Path, capsys) -> None:
    import zipfile

    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 32), }"
    header = header.ljust(118) + "\n"  # a header declaring 1.2 TiB, with no data behind it
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    for name, member in (("extra.npz", "giant.npy"), ("giant.npz", "x.npy")):
        with zipfile.ZipFile(tmp_path / name, "w") as zf:
            zf.writestr(member, npy)
            if member != "x.npy":
                zf.writestr("x.npy", npy)
    assert main(["run", NAME, "--input", str(tmp_path / "extra.npz")]) == 2
    assert "unexpected ['giant']" in capsys.readouterr().err  # giant never read
    assert main(["run", NAME, "--input", str(tmp_path / "giant.npz")]) == 2
    err = capsys.readouterr().err
    assert "giant.npz: " in err and "Traceback" not in err
    np.savez(tmp_path / "empty.npz")
    assert main(["run", NAME, "--input", str(tmp_path / "empty.npz")]) == 2
    assert "missing ['x'], unexpected []" in capsys.readouterr().err


def test_small_things_a_user_hits_are_named(tmp_path: Path, capsys) -> None:
    from neuroedge.errors import InputError
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.shapes import bind_inputs

    with pytest.raises(InputError, match=r"axis 4 \(size\) is 16 but its own axis 3 fixed size=32"):
        bind_inputs(SPEC, {"x": np.zeros((5, 1, 2, 32, 16), np.float32)})
    (tmp_path / "out").mkdir()
    assert main(["run", NAME, "--output", str(tmp_path / "out")]) == 2
    assert "is a directory; give a file name ending in .npz" in capsys.readouterr().err
    assert main(["run", NAME, "--repeats", "0"]) == 2
    assert "--repeats 0: expected an integer >= 1" in capsys.readouterr().err
    assert main(["run", NAME, "--repeats", "2"]) == 0
    np.savez(tmp_path / "huge.npz", x=np.full((4, 2, 32), 3e38, np.float32))  # finite, yet
    capsys.readouterr()
    assert main(["run", NAME, "--input", str(tmp_path / "huge.npz"), "--repeats", "1"]) == 0
    assert "(256 values NaN or inf)" in capsys.readouterr().out


def _car_recording(size: int, seed: int, offset_us: int = 0) -> np.ndarray:
    from neuroedge.events.core import SensorSize, make_events
    from neuroedge.events.generate import random_object
    from neuroedge.events.simulator import DVSParams, simulate

    sensor, rng = SensorSize(size, size), np.random.default_rng(seed)
    ev = simulate([random_object("car", sensor, 100_000, rng)], sensor, 100_000, DVSParams(), seed)
    return make_events(ev["t"] + offset_us, ev["x"], ev["y"], ev["p"])


def test_a_long_recording_becomes_windows_that_run_as_one_batch(tmp_path: Path, capsys) -> None:
    from neuroedge.events.core import SensorSize
    from neuroedge.models.bivision.data import represent, represent_windows

    sensor = SensorSize(16, 16)
    first, second = _car_recording(16, 0), _car_recording(16, 1, offset_us=100_000)
    events = np.concatenate([first, second])
    x = represent_windows(events, sensor)
    assert x.shape == (5, 2, 2, 16, 16) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:, 0], represent(first, sensor, "e2s"))
    np.testing.assert_array_equal(x[:, 1], represent(second, sensor, "e2s"))
    assert represent_windows(events[::-1].copy(), sensor).tolist() == x.tolist()  # sorted first
    assert represent_windows(events, sensor, max_windows=1).shape[1] == 1
    h = represent_windows(events, sensor, "histogram")
    np.testing.assert_array_equal(h[:, 1], represent(second, sensor, "histogram"))
    np.savez(tmp_path / "x.npz", x=x)
    args = ["run", "event.bivision", "--config", "smoke=true", "size=16", "--input"]
    assert main([*args, str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")]) == 0
    with np.load(tmp_path / "y.npz") as y:
        assert y["logits"].shape == (5, 2, 2)  # per step, per window, per class


def test_windows_refuse_what_they_cannot_represent() -> None:
    from neuroedge.events.core import SensorSize
    from neuroedge.models.bivision.data import represent_windows

    events = _car_recording(16, 0)
    with pytest.raises(ValueError, match="the recording has no events"):
        represent_windows(events[:0], SensorSize(16, 16))
    with pytest.raises(ValueError, match=r"representation 'voxel' is not one of"):
        represent_windows(events, SensorSize(16, 16), "voxel")
    with pytest.raises(ValueError, match=r"max_windows=0: expected an integer >= 1"):
        represent_windows(events, SensorSize(16, 16), max_windows=0)
    late = events.copy()
    late["t"][-1] = 10**12  # 10,000,001 windows of 100 ms: refused before allocating
    with pytest.raises(ValueError, match=r"10000001 windows of 100000 us .* pass max_windows <="):
        represent_windows(late, SensorSize(16, 16))
