"""Packages that are installed but broken, or missing: doctor, run and bench say which package
and how to fix it (exit 2, one line, or an unavailable backend with the reason), never a
traceback, and one backend's broken package never costs the other backends' rows.

A broken package is simulated in-process, nothing uninstalled: a meta-path finder in front
whose loader raises at import (``_break``), the real module taken out of ``sys.modules`` for
the test; a missing one with ``sys.modules[name] = None``; a stock (unpatched) lava-nc with a
dist-info folder of its own in tmp_path, which the metadata look-ups are pointed at.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
from pathlib import Path

import pytest
from neuroedge.cli import main

NUMPY_ABI = "numpy.core.multiarray failed to import"


class _Raising(importlib.abc.Loader):
    def __init__(self, error: BaseException) -> None:
        self.error = error

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        raise self.error


class _Breaker(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, error: BaseException) -> None:
        self.name, self.error = name, error

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        return importlib.machinery.ModuleSpec(name, _Raising(self.error), is_package=True)


def _break(monkeypatch, name: str, error: BaseException) -> None:
    """``name`` found by find_spec but raising ``error`` at import, for this test only."""
    monkeypatch.delitem(sys.modules, name, raising=False)  # put back afterwards
    monkeypatch.setattr(sys, "meta_path", [_Breaker(name, error), *sys.meta_path])


# ---- A: onnxruntime installed but failing at import -------------------------------------


@pytest.mark.parametrize("error", [ImportError(NUMPY_ABI), OSError("libonnxruntime.so: nope")])
def test_doctor_names_an_onnxruntime_that_does_not_import(monkeypatch, capsys, error) -> None:
    _break(monkeypatch, "onnxruntime", error)
    assert main(["doctor"]) == 0  # was a traceback (ImportError) or one error line (OSError)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("onnxrt"))
    assert "missing" in line and "onnxruntime is installed but does not import" in line
    assert f"{type(error).__name__}: {error}" in line
    assert any(x.startswith("host ") and "available" in x for x in out.splitlines())


def test_a_probe_that_raises_is_recorded_not_fatal(monkeypatch) -> None:
    from neuroedge.backends.onnxrt import OnnxRuntimeBackend
    from neuroedge.registry import available_backends

    def buggy(self):
        raise RuntimeError("a bug in the probe")

    monkeypatch.setattr(OnnxRuntimeBackend, "probe", buggy)
    found = available_backends()  # probes never raise: was the RuntimeError
    assert not found["onnxrt"].ok
    assert "RuntimeError: a bug in the probe" in found["onnxrt"].reason
    assert found["host"].ok


def test_bench_rows_keep_host_when_onnxruntime_does_not_import(monkeypatch) -> None:
    from neuroedge.bench.runner import _compile_rows
    from neuroedge.registry import get_model

    _break(monkeypatch, "onnxruntime", ImportError(NUMPY_ABI))
    spec = get_model("snn.lif_convnet")
    rows, artifacts = _compile_rows(spec, ["onnxrt"], {}, None, None, {}, {}, None, False)
    assert not artifacts  # a rejection row, not the ImportError that ended the bench
    (row,) = rows.values()
    assert row.backend == "onnxrt" and NUMPY_ABI in row.rejections[0]


# ---- C: onnx installed but failing at import (a protobuf too new) ------------------------


def test_a_broken_onnx_makes_onnxrt_unavailable_and_run_refuses(monkeypatch, capsys) -> None:
    from neuroedge.backends.onnxrt import OnnxRuntimeBackend

    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    _break(monkeypatch, "onnx", TypeError("Descriptors cannot be created directly"))
    availability = OnnxRuntimeBackend().probe()  # was available: find_spec only
    assert not availability.ok
    assert availability.reason == (
        "onnx is installed but does not import: TypeError: Descriptors cannot be created directly"
    )
    args = ["run", "snn.lif_convnet", "--backend", "onnxrt", "--config", "smoke=true"]
    assert main(args) == 2  # was the TypeError's traceback, exit 1
    assert "onnx is installed but does not import" in capsys.readouterr().err


# ---- B: the stock lava-nc (crashes at import on Python 3.11) -----------------------------

VAR_MODEL = "lava/magma/compiler/var_model.py"


def _fake_lava(monkeypatch, tmp_path: Path, version: str, patched: bool) -> None:
    """lava-nc ``version`` as importlib.metadata sees it: a dist-info folder in tmp_path with
    lava_install's patched files (or the stock ones)."""
    from neuroedge.backends.lava_install import SOURCE_PATCHES

    info = tmp_path / f"lava_nc-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lava-nc\nVersion: {version}\n")
    for name, (stock, fixed) in SOURCE_PATCHES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"# lava\n" + (fixed if patched else stock))
    dist = importlib.metadata.PathDistribution(info)
    real_distribution, real_version = importlib.metadata.distribution, importlib.metadata.version
    pick = lambda real: lambda name: dist if name == "lava-nc" else real(name)  # noqa: E731
    monkeypatch.setattr(importlib.metadata, "distribution", pick(real_distribution))
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: dist.version if name == "lava-nc" else real_version(name),
    )


def test_the_stock_lava_nc_is_unavailable_with_the_fix(monkeypatch, tmp_path) -> None:
    from neuroedge.backends.lava import LavaBackend

    _fake_lava(monkeypatch, tmp_path, "0.10.0", patched=False)
    availability = LavaBackend().probe()  # was "available": version and find_spec only
    assert not availability.ok
    assert "lava-nc 0.10.0 is installed, not the patched 0.10.0+py311" in availability.reason
    assert availability.reason.endswith("run python -m neuroedge.backends.lava_install")


def test_a_patched_version_with_a_stock_var_model_is_unavailable(monkeypatch, tmp_path) -> None:
    from neuroedge.backends.lava import LavaBackend

    _fake_lava(monkeypatch, tmp_path, "0.10.0+py311", patched=False)
    availability = LavaBackend().probe()
    assert not availability.ok
    assert f"{VAR_MODEL} lacks the Python 3.11 patch" in availability.reason
    assert "python -m neuroedge.backends.lava_install --force" in availability.reason


def test_a_lava_build_of_another_version_is_left_to_its_import(monkeypatch, tmp_path) -> None:
    from neuroedge.backends import lava_install

    _fake_lava(monkeypatch, tmp_path, "0.11.0.dev0", patched=False)  # e.g. built from source
    assert lava_install.installed_problem() is None  # compile's import_problem checks it
    from neuroedge.backends.lava import LavaBackend

    assert "lava-nc 0.11.0.dev0" in LavaBackend().probe().reason  # was 0.10.0+py311 always


def test_a_lava_that_fails_at_import_is_refused_at_compile_naming_the_fix(monkeypatch) -> None:
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.errors import BackendUnavailable

    if not LavaBackend().probe().ok:
        pytest.skip(LavaBackend().probe().reason)
    error = ValueError("mutable default <class 'ByteEncoder'> for field x is not allowed")
    _break(monkeypatch, "lava.magma.compiler.var_model", error)
    with pytest.raises(BackendUnavailable) as caught:  # was the bare ValueError
        LavaBackend().compile(None, None)  # refused before the program is read
    assert "lava-nc does not import (ValueError: mutable default" in str(caught.value)
    assert "run python -m neuroedge.backends.lava_install --force" in str(caught.value)


def test_the_installed_lava_passes_the_cheap_check() -> None:
    from neuroedge.backends import lava_install

    if lava_install.installed_version() is None:
        pytest.skip("lava-nc is not installed")
    assert lava_install.installed_problem() is None  # the set-up's own build


# ---- E: a package missing when a command needs it ----------------------------------------


def test_a_missing_package_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx: ModuleNotFoundError
    args = ["export", "snn.lif_convnet", "--target", "onnx", "--out", str(tmp_path / "x.onnx")]
    assert main([*args, "--config", "smoke=true"]) == 2  # was its traceback, exit 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("neuroedge: error: missing package onnx (") and "\n" not in err
    assert err.endswith(
        "neuroedge requires it: install neuroedge's dependencies (make test, "
        "or pip install -e ., in the source tree)"
    )


@pytest.mark.parametrize(
    "module, hint",
    [
        ("tensorrt", "pip install 'neuroedge[tensorrt]'"),  # an extra of setup.cfg
        ("sklearn", "neuroedge requires it"),  # scikit-learn, in install_requires
        ("tonic", "the set-up (make) installs it, see the Makefile"),  # --no-deps in make
        ("lava", "python -m neuroedge.backends.lava_install"),
    ],
)
def test_the_missing_package_line_says_how_to_install(monkeypatch, capsys, module, hint):
    import neuroedge.cli as cli

    def needs(args):
        raise ModuleNotFoundError(f"No module named '{module}.sub'", name=f"{module}.sub")

    monkeypatch.setattr(cli, "cmd_doctor", needs)
    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"neuroedge: error: missing package {module} (") and hint in err
    monkeypatch.setenv("NEUROEDGE_DEBUG", "1")  # the traceback, as for every exit-2 error
    with pytest.raises(ModuleNotFoundError):
        main(["doctor"])


def test_a_missing_neuroedge_module_stays_a_bug(monkeypatch) -> None:
    import neuroedge.cli as cli

    def needs(args):
        raise ModuleNotFoundError("No module named 'neuroedge.gone'", name="neuroedge.gone")

    monkeypatch.setattr(cli, "cmd_doctor", needs)
    monkeypatch.delenv("NEUROEDGE_DEBUG", raising=False)
    with pytest.raises(ModuleNotFoundError):  # exit 1 with its traceback: our own error
        main(["doctor"])
