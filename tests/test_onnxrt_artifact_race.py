"""Default exports of runs at once: each graph loads with its own state, folders are reused.

Every run used to export a model to the same ``.neuroedge/artifacts/onnxrt/<model>/<form>.onnx``
(and its ``.state.npz``) and load it back, so a job array of benches loaded one run's graph
with another's state (refused rows, or false parity failures). Each default export now goes
to a folder of its own named by the hash of its files (``neuroedge.backends.export_folders``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import neuroedge.backends.export_folders as export_folders  # noqa: E402
import neuroedge.backends.onnxrt as onnxrt  # noqa: E402
from neuroedge.backends.export_folders import content_hash, export_once  # noqa: E402
from neuroedge.registry import get_backend, get_model  # noqa: E402
from neuroedge.types import Availability  # noqa: E402

LIF = "snn.lif_convnet"
CPU = {"providers": "CPUExecutionProvider"}


def _program(**config: Any) -> Any:
    return get_model(LIF).build({"smoke": True, **config})


def _folder(home: Path) -> Path:
    return home / "artifacts" / "onnxrt" / LIF


def test_a_run_exporting_meanwhile_never_lends_its_state(monkeypatch, tmp_path) -> None:
    # run B exports the same model with other channels while run A is between loading its
    # graph and loading its state (what a job array of benches did): each keeps its own
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    spec, backend, host = get_model(LIF), get_backend("onnxrt"), get_backend("host")
    prog_a, prog_b = _program(channels1=4), _program(channels1=6)
    load_state, other = onnxrt._load_state_init, {}

    def meanwhile(path: Path, session: Any, names: tuple[str, ...]) -> list[Any]:
        if not other:
            other["b"] = None  # B's own loads go straight through
            other["b"] = backend.compile(prog_b, spec, CPU)
        return load_state(path, session, names)

    monkeypatch.setattr(onnxrt, "_load_state_init", meanwhile)
    art_a = backend.compile(prog_a, spec, CPU)  # was: "state 'v1' is [1, 6, 8, 8]; the graph..."
    art_b = other["b"]
    assert art_a.path != art_b.path
    x = spec.example_for(0, {"smoke": True})
    for art, prog in ((art_a, prog_a), (art_b, prog_b)):
        want = host.run(host.compile(prog, spec), x)
        got = backend.run(art, x)
        for name in want:
            np.testing.assert_allclose(got[name], np.asarray(want[name]), atol=1e-4)


def test_the_same_export_reuses_its_folder_and_leaves_nothing_behind(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    spec, backend = get_model(LIF), get_backend("onnxrt")
    paths = [backend.compile(_program(seed=s), spec, CPU).path for s in (0, 1, 0)]
    assert paths[0] == paths[2] != paths[1]
    folders = sorted(p.name for p in _folder(tmp_path).iterdir())
    assert folders == sorted({Path(p).parent.name for p in paths})  # no per-run leftovers
    for p in map(Path, paths):  # the name is the hash of the files, which belong together
        assert p.name == "sequence.onnx" and p.with_suffix(".state.npz").is_file()
        assert p.parent.name == f"sequence-{content_hash(p.parent)[:16]}"
    reduced = backend.compile(_program(seed=0), spec, {**CPU, "precision": "fp16"})
    assert Path(reduced.path).name == "sequence.fp16.onnx"
    assert Path(reduced.path).parent.name.startswith("sequence.fp16-")
    # ONNX Runtime's TensorRT engine id hashes names, not weights: one cache per weights
    engines = [onnxrt._provider_options("TensorrtExecutionProvider", Path(p)) for p in paths]
    paths_of = [e["trt_engine_cache_path"] for e in engines]
    assert paths_of[0] == paths_of[2] != paths_of[1]


def test_a_damaged_folder_is_replaced_and_a_failed_export_leaves_nothing(
    monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    spec, backend = get_model(LIF), get_backend("onnxrt")
    first = Path(backend.compile(_program(), spec, CPU).path)
    first.with_suffix(".state.npz").unlink()  # removed by hand
    again = Path(backend.compile(_program(), spec, CPU).path)
    assert again == first and again.with_suffix(".state.npz").is_file()

    def fails(work: Path) -> Path:
        (work / "half.onnx").write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export_once(_folder(tmp_path), "sequence", fails)
    # and the lock file that replacing the damaged folder took
    assert sorted(p.name for p in _folder(tmp_path).iterdir()) == [
        ".sequence.lock",
        first.parent.name,
    ]


def _write(work: Path) -> Path:
    (work / "g.onnx").write_bytes(b"graph")
    np.savez(work / "g.state.npz", v=np.arange(1000, dtype=np.float32))
    return work / "g.onnx"


def test_an_identical_folder_is_reused_in_place(tmp_path) -> None:
    # not replaced by a copy: a run using it (its engine cache, trt_ep_cache) keeps it
    final = export_once(tmp_path, "seq", _write).parent
    (final / "trt_ep_cache").mkdir()
    inode = final.stat().st_ino
    assert export_once(tmp_path, "seq", _write).parent == final
    assert final.stat().st_ino == inode and (final / "trt_ep_cache").is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [final.name]  # nothing else, not even a lock


def test_a_state_archive_damaged_inside_is_replaced(tmp_path) -> None:
    # a flipped byte in an array made hashing the folder raise BadZipFile ("Bad CRC-32"):
    # every later export of the same weights failed instead of replacing the folder
    state = export_once(tmp_path, "seq", _write).with_suffix(".state.npz")
    damaged = bytearray(state.read_bytes())
    damaged[600] ^= 0xFF
    state.write_bytes(bytes(damaged))
    assert export_once(tmp_path, "seq", _write).with_suffix(".state.npz") == state
    np.testing.assert_array_equal(np.load(state)["v"], np.arange(1000, dtype=np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".seq.lock", state.parent.name]


@pytest.mark.parametrize("pause_at, pause_s", [(1, 10.0), (2, 0.5)])
def test_a_run_that_saw_the_damage_keeps_the_replacement_another_run_uses(
    monkeypatch, tmp_path, pause_at: int, pause_s: float
) -> None:
    # run C hashes a damaged folder and is paused (1: before taking the lock, 2: under it);
    # run B replaces the folder and uses it (its engine cache): C then set aside and deleted
    # B's folder. Now C hashes again under the lock, and B waits for the lock C holds.
    final = export_once(tmp_path, "seq", _write).parent
    (final / "g.state.npz").unlink()  # damaged by hand
    real_hash, got, hashed = export_folders.content_hash, {}, []
    paused, b_done = threading.Event(), threading.Event()

    def content_hash(folder: Path) -> str:
        key = real_hash(folder)
        if threading.current_thread().name == "C" and folder == final:
            hashed.append(key)
            if len(hashed) == pause_at:
                paused.set()
                b_done.wait(pause_s)
        return key

    def run_c() -> None:
        try:
            got["c"] = export_once(tmp_path, "seq", _write)
        finally:
            paused.set()  # C done without pausing (old code at 2): B runs after it

    def run_b() -> None:
        got["b"] = export_once(tmp_path, "seq", _write)
        (got["b"].parent / "trt_ep_cache").mkdir()  # B's session at work in its folder
        b_done.set()

    monkeypatch.setattr(export_folders, "content_hash", content_hash)
    c = threading.Thread(target=run_c, name="C")
    c.start()
    assert paused.wait(5)
    b = threading.Thread(target=run_b)
    b.start()
    for thread in (b, c):
        thread.join(10)
    assert got["c"] == got["b"] and got["b"].with_suffix(".state.npz").is_file()
    assert (got["b"].parent / "trt_ep_cache").is_dir()  # was: deleted by C


def test_the_users_path_is_written_there_and_nowhere_else(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    art = get_backend("onnxrt").compile(_program(), get_model(LIF), {**CPU, "path": "m.onnx"})
    assert art.path == "m.onnx" and Path("m.onnx").is_file()
    assert not (tmp_path / "home").exists()


def test_tensorrt_builds_from_a_graph_no_later_run_replaces(monkeypatch, tmp_path) -> None:
    # the engine is keyed by the prepared graph's hash and built from its file: a run at once
    # that replaced that file in between cached an engine of other weights under this key
    from neuroedge.backends.tensorrt import TensorRTBackend

    built: list[Path] = []
    monkeypatch.setattr(TensorRTBackend, "probe", lambda self: Availability(True, "faked"))
    monkeypatch.setattr(
        TensorRTBackend,
        "_engine_artifact",
        lambda self, spec, source, prepared, feed, variant, opts: built.append(prepared),
    )
    spec, options = get_model(LIF), {"variant": "fp16", "dir": str(tmp_path)}
    TensorRTBackend().compile(_program(seed=0), spec, options)
    held = built[0].read_bytes()
    TensorRTBackend().compile(_program(seed=1), spec, options)
    assert built[0].read_bytes() == held and built[0] != built[1]
    for prepared in built:
        assert prepared.name == "sequence.fp16.onnx"
        assert prepared.with_suffix(".state.npz").is_file()
        assert prepared.parent.name == f"sequence.fp16-{content_hash(prepared.parent)[:16]}"
