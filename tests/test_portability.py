"""What Windows and macOS lack does not break neuroedge there: POSIX-only modules (resource,
fcntl) and attributes (signal.pthread_sigmask and SIGKILL, select.poll) are simulated away
here, in a subprocess for a module-top import; mujoco's GL platform is chosen per OS; the
JSON files a user may write (a BOM, a non-ASCII name under a C locale) are read as UTF-8."""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

# Windows' module surface, as far as neuroedge's imports go: set before neuroedge is imported
NO_POSIX = """
import select, signal, sys
for name in ("fcntl", "resource"):
    sys.modules[name] = None
for module, attr in ((signal, "pthread_sigmask"), (signal, "SIGKILL"), (select, "poll")):
    delattr(module, attr)
"""


def run_without_posix(code: str, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(
        [sys.executable, "-c", NO_POSIX + code],
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        **kwargs,
    )


def test_bench_and_onnx_export_modules_import_without_resource_and_fcntl():
    """``import resource`` (bench.latency) and ``import fcntl`` (backends.export_folders) at
    module top failed every ``neuroedge bench`` and the onnxrt/tensorrt backends."""
    done = run_without_posix(
        "import neuroedge.bench.report, neuroedge.backends.export_folders\n"
        "from neuroedge.bench.latency import peak_rss_mb\n"
        "print(peak_rss_mb())\n"
        "from neuroedge.cli import main\n"
        "sys.exit(main(['list']))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("None\n") and "snn.lif_convnet" in done.stdout


def test_a_report_shows_no_peak_memory_where_it_is_not_measured(monkeypatch, tmp_path):
    """No ru_maxrss: report.json holds null and report.md says nothing, not a made-up figure."""
    from neuroedge.bench import report

    monkeypatch.setitem(sys.modules, "resource", None)
    monkeypatch.setattr("neuroedge.bench.provenance.provenance", lambda: {})
    doc = report.build_document("m", [])
    assert doc["process_peak_rss_mb"] is None
    report.write_markdown(report.plain_json(doc), tmp_path / "report.md", ["latency_p50_ms"])
    assert "peak resident memory" not in (tmp_path / "report.md").read_text(encoding="utf-8")


def fake_msvcrt(calls: list) -> types.ModuleType:
    """msvcrt.locking recording its calls; LK_LOCK fails once as after 10 s of another's hold."""
    msvcrt = types.ModuleType("msvcrt")
    msvcrt.LK_LOCK, msvcrt.LK_UNLCK = 1, 0

    def locking(fd: int, mode: int, nbytes: int) -> None:
        calls.append((mode, os.lseek(fd, 0, os.SEEK_CUR), nbytes))
        if mode == msvcrt.LK_LOCK and len(calls) == 1:
            raise OSError(errno.EDEADLOCK, "Resource deadlock avoided")

    msvcrt.locking = locking
    return msvcrt


def test_a_damaged_export_is_replaced_under_msvcrt_locking_without_fcntl(monkeypatch, tmp_path):
    """Without fcntl (Windows) the lock that guards setting a damaged export aside is
    msvcrt.locking of the lock file's first byte, waited for, then released."""
    from neuroedge.backends.export_folders import export_once

    calls: list = []
    monkeypatch.setitem(sys.modules, "fcntl", None)
    monkeypatch.setitem(sys.modules, "msvcrt", fake_msvcrt(calls))

    def write(work: Path) -> Path:
        (work / "m.onnx").write_bytes(b"graph")
        return work / "m.onnx"

    first = export_once(tmp_path, "m", write)
    (first.parent / "m.onnx").write_bytes(b"damaged by hand")
    assert calls == []  # the same files published once: no lock taken
    again = export_once(tmp_path, "m", write)
    assert again == first and again.read_bytes() == b"graph"
    assert calls == [(1, 0, 1), (1, 0, 1), (0, 0, 1)]  # failed try, lock, unlock: byte 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".stale", ".part"))]


def test_the_seed_pool_runs_without_signal_masks(monkeypatch):
    """No signal.pthread_sigmask (Windows): seed sweeps with workers > 1 ran into an
    AttributeError (pool.py, signals.sigint_blocked), nor does it start the resource tracker
    (there it needs _posixsubprocess) that was started only for the mask's sake."""
    from multiprocessing import resource_tracker

    from neuroedge.bench.seeds import map_seeds
    from neuroedge.signals import sigint_blocked

    def no_tracker() -> None:
        raise ModuleNotFoundError("No module named '_posixsubprocess'")

    monkeypatch.delattr(signal, "pthread_sigmask")
    monkeypatch.setattr(resource_tracker, "ensure_running", no_tracker)
    # as Windows' would be; there spawn starts no tracker, here (POSIX spawn) it does
    monkeypatch.setattr(resource_tracker, "_HAVE_SIGMASK", False)
    with sigint_blocked():
        pass
    assert map_seeds(abs, {0: -3, 1: -1}, workers=2, progress=False) == {0: 3, 1: 1}


def test_a_worker_killed_by_a_signal_is_named_without_sigkill(monkeypatch):
    """signal.SIGKILL is POSIX-only: naming a dead worker raised AttributeError instead."""
    from neuroedge.bench.pool import _Worker

    monkeypatch.delattr(signal, "SIGKILL")
    worker = object.__new__(_Worker)
    worker.proc = types.SimpleNamespace(join=lambda timeout: None, exitcode=-15, pid=7)
    err = worker.died("d seeds", "running seed 1", "left: [1]")
    assert "(pid 7) running seed 1 was killed by signal SIGTERM; left: [1]" in str(err)


def test_no_poll_tells_a_broken_pipe_as_an_error_not_a_traceback(monkeypatch):
    """No select.poll (Windows): ``neuroedge list | head -1`` ended in an AttributeError
    traceback; whether the reader left cannot be told, so it is one error line and 2."""
    from neuroedge.signals import stdout_reader_gone

    monkeypatch.delattr(select, "poll")
    assert stdout_reader_gone() is False
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        done = run_without_posix(
            "from neuroedge.cli import main\nsys.exit(main(['list']))\n", stdout=write
        )
    finally:
        os.close(write)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "neuroedge: error: [Errno 32] Broken pipe\n"


@pytest.mark.parametrize("system, gl", [("Linux", "egl"), ("Darwin", None), ("Windows", None)])
def test_egl_is_chosen_for_mujoco_on_linux_only(monkeypatch, system, gl):
    """mujoco refuses MUJOCO_GL=egl on macOS and Windows (its gl_context.py)."""
    from neuroedge.models.specprune import sim

    monkeypatch.delitem(sys.modules, "mujoco", raising=False)
    monkeypatch.setenv("MUJOCO_GL", "x")  # so that its absence is what comes back after
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setattr("platform.system", lambda: system)
    sim._choose_gl()
    assert os.environ.get("MUJOCO_GL") == gl


READ_UNDER_C_LOCALE = """
import json, sys
from pathlib import Path
from neuroedge.backends.tensorrt_cache import _is_sidecar
from neuroedge.bench.report import _written_before
from neuroedge.events.generate import add_noise_to_dataset
from neuroedge.models.bivision.data import dataset_sensor
from neuroedge.models.mecat.minilm import MiniLM
root = Path(sys.argv[1])
print(dataset_sensor(root / "bom"), dataset_sensor(root / "utf8"))
print((add_noise_to_dataset(root / "bom", root / "noisy", 0.0) / "config.json").is_file())
print(_written_before(root / "report.json"), _is_sidecar(root / "m.engine.json"))
try:
    MiniLM(root / "minilm")
except Exception as err:
    print(type(err).__name__, "model.safetensors" in str(err))
"""


def test_json_files_are_read_as_utf8_with_or_without_a_bom_under_a_c_locale(tmp_path):
    """A config.json with a BOM (Notepad) or a non-ASCII value read under the locale's ASCII:
    'needs integer width and height ('ascii' codec can't decode byte 0xef ...)'."""
    cfg = {"width": 32, "height": 32, "camera": "Prophesee µ-EVK"}
    for name, text in (("bom", "\ufeff" + json.dumps(cfg)), ("utf8", json.dumps(cfg))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(text, encoding="utf-8", newline="\n")
    mine = {"plots": ["a.png"], "note": "µ"}
    (tmp_path / "report.json").write_text(json.dumps(mine, ensure_ascii=False), encoding="utf-8")
    side = {"key": {}, "engine_sha256": "0", "note": "µ"}
    (tmp_path / "m.engine.json").write_text(json.dumps(side, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "minilm").mkdir()
    (tmp_path / "minilm" / "config.json").write_text(
        json.dumps(
            {"num_hidden_layers": 1, "num_attention_heads": 1, "hidden_size": 4},
            ensure_ascii=False,
        )[:-1]
        + ', "layer_norm_eps": 1e-12, "_name": "µ"}',
        encoding="utf-8",
    )
    (tmp_path / "minilm" / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", encoding="utf-8")
    (tmp_path / "minilm" / "model.safetensors").write_bytes(b"")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, "-c", READ_UNDER_C_LOCALE, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "SensorSize(width=32, height=32) SensorSize(width=32, height=32)"
    assert lines[1:3] == ["True", "(['a.png'], []) True"]
    assert lines[3].endswith(" True"), lines[3]  # past config.json, to the weights


def test_draft_liveness_sends_no_signal_on_windows(monkeypatch):
    """os.kill(pid, 0) is CTRL_C_EVENT on Windows: probing a concurrent writer's pid would
    stop it. There the draft is left to its age alone."""
    from neuroedge import atomic

    def no_kill(*args):
        raise AssertionError(f"os.kill{args} called")

    monkeypatch.setattr(atomic.sys, "platform", "win32")
    monkeypatch.setattr(atomic.os, "kill", no_kill)
    assert atomic._alive(os.getpid() + 1) is False
    assert atomic._alive(os.getpid()) is True  # this process's other thread: never removed
