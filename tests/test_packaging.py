"""Layout: one `neuroedge` namespace over the client's folders, a complete wheel, cheap import."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {
    "sdk": "neuroedge",
    "backends": "neuroedge/backends",
    "models": "neuroedge/models",
    "export": "neuroedge/export",
    "bench": "neuroedge/bench",
}


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_bare_top_level_folder_imports_fail(tmp_path: Path) -> None:
    for name in ("models", "backends", "export", "bench", "sdk"):
        result = python(f"import {name}", tmp_path)
        assert result.returncode != 0, f"`import {name}` should fail outside the repo"
        assert "ModuleNotFoundError" in result.stderr


def test_import_neuroedge_loads_no_heavy_library(tmp_path: Path) -> None:
    code = (
        "import sys, neuroedge; heavy = [m for m in ('torch', 'onnx', 'onnxruntime', "
        "'tensorrt', 'lava', 'numba', 'matplotlib', 'transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    result = python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_subpackages_resolve_to_the_client_folders(tmp_path: Path) -> None:
    code = (
        "import neuroedge, neuroedge.models, neuroedge.backends, neuroedge.export, "
        "neuroedge.bench; print(*[m.__path__[0] for m in (neuroedge, neuroedge.models, "
        "neuroedge.backends, neuroedge.export, neuroedge.bench)])"
    )
    result = python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    paths = [Path(p).name for p in result.stdout.split()]
    assert paths == ["sdk", "models", "backends", "export", "bench"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (path,) = out.glob("neuroedge-*.whl")
    return path


def test_wheel_contains_every_subpackage(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, package in FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.relative_to(REPO / folder).as_posix()
            expected.add(f"{package}/{rel}")
    assert expected, "no packages found in the repo"
    missing = sorted(expected - names)
    assert not missing, f"wheel lacks {missing}"
    assert not any(n.startswith(("models/", "tests/", "sdk/")) for n in names)


def test_wheel_declares_the_cli_entry_point(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entry = next(n for n in zf.namelist() if n.endswith("entry_points.txt"))
        text = zf.read(entry).decode()
    assert "neuroedge = neuroedge.cli:main" in text


def test_loading_every_model_spec_loads_no_heavy_library(tmp_path: Path) -> None:
    # `neuroedge list` / `info` read every spec: torch and friends load only when a model runs
    code = (
        "import sys\n"
        "from neuroedge import registry\n"
        "from neuroedge.types import load_target\n"
        "for target in registry.MODELS.values():\n"
        "    load_target(target)\n"
        "print([m for m in ('torch', 'onnx', 'onnxruntime', 'tensorrt', 'lava', 'numba', "
        "'matplotlib', 'transformers') if m in sys.modules])"
    )
    result = python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
