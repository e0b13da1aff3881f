"""Skip hardware-bound tests with the backend's own probe reason; ``write_cifar`` and
``torchrun`` fixtures.

Markers map to probes: ``tensorrt`` -> the tensorrt backend, ``loihi`` -> the lava backend,
``gpu`` -> a CUDA device visible to torch. ``NEUROEDGE_REQUIRE=tensorrt,gpu`` (comma list of
marker or backend names) turns those skips into failures, for runs on machines that must have
them.
"""

from __future__ import annotations

import os

import pytest

MARKER_BACKENDS = {"tensorrt": "tensorrt", "loihi": "lava"}


@pytest.fixture(autouse=True, scope="session")
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Checkpoints, artifacts and history of the test run go to a temp folder, not ./.neuroedge."""
    os.environ["NEUROEDGE_HOME"] = str(tmp_path_factory.mktemp("neuroedge_home"))
    os.environ.pop("NEUROEDGE_HISTORY", None)


def required() -> set[str]:
    return {n.strip() for n in os.environ.get("NEUROEDGE_REQUIRE", "").split(",") if n.strip()}


def gpu_reason() -> str | None:
    """None when torch sees a CUDA device, else why not."""
    import torch

    if not torch.cuda.is_available():
        return f"no CUDA device visible to torch {torch.__version__} (CPU build or no GPU)"
    return None


def backend_reason(name: str) -> str | None:
    """None when backend ``name`` is registered and its probe passes, else the reason."""
    from neuroedge.registry import backend_table, get_backend

    if name not in backend_table():
        return f"backend {name!r} is not registered"
    availability = get_backend(name).probe()
    return None if availability.ok else availability.reason


def skip_or_fail(label: str, reason: str) -> None:
    if label in required():
        pytest.fail(f"{label} is required (NEUROEDGE_REQUIRE) but unavailable: {reason}")
    pytest.skip(f"{label}: {reason}")


def require_backend(name: str) -> None:
    """Call at the top of a test that needs backend ``name``."""
    reason = backend_reason(name)
    if reason is not None:
        skip_or_fail(name, reason)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers():
        if marker.name == "gpu":
            reason = gpu_reason()
            if reason:
                skip_or_fail("gpu", reason)
        elif marker.name in MARKER_BACKENDS:
            reason = backend_reason(MARKER_BACKENDS[marker.name])
            if reason:
                skip_or_fail(marker.name, reason)


@pytest.fixture
def require() -> object:
    """``require("lava")`` skips (or fails, under NEUROEDGE_REQUIRE) unless the backend runs."""
    return require_backend


@pytest.fixture
def write_cifar() -> object:
    """``write(folder, n, broken=None)``: the six CIFAR-10 python batch files of ``n`` random
    images each in ``folder`` (created), ``data_batch_2`` replaced by ``broken`` if given."""
    import pickle
    from pathlib import Path

    import numpy as np
    from neuroedge.models.unisparse.data import CIFAR_FILES

    def write(folder: Path, n: int, broken: dict | None = None) -> Path:
        rng = np.random.default_rng(0)
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name in CIFAR_FILES:
            blob = {
                b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                b"labels": [int(v) for v in rng.integers(0, 10, n)],
            }
            if name == "data_batch_2" and broken is not None:
                blob = broken
            (Path(folder) / name).write_bytes(pickle.dumps(blob))
        return Path(folder)

    return write


@pytest.fixture
def torchrun() -> object:
    """``run(args, cwd, timeout=300)``: ``torchrun --standalone --nproc-per-node 2 *args`` in
    ``cwd``; asserts it exited 0 (its stderr tail as the message) and returns the process."""
    import subprocess
    import sys

    def run(args: list[str], cwd: object, timeout: float = 300) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        done = subprocess.run(
            [*cmd, "--nproc-per-node", "2", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    return run
