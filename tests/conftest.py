"""Skip hardware-bound tests with the backend's own probe reason; ``write_cifar``,
``torchrun`` and ``chat_server`` (a fake OpenAI-compatible server) fixtures.

Markers map to probes: ``tensorrt`` -> the tensorrt backend, ``loihi`` -> the lava backend,
``gpu`` -> a CUDA device visible to torch; ``need_package("tonic")`` skips unless a package
outside install_requires imports. ``NEUROEDGE_REQUIRE=tensorrt,gpu`` (comma list of marker,
backend or package names) turns those skips into failures, for runs on machines that must have
them.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def package_reason(module: str, imports: bool = True) -> str | None:
    """None when ``module`` imports (with ``imports=False``: is found, for a package of data
    files whose own imports need more), else why not: for the packages outside install_requires
    that ``make`` installs (tests/test_packaging.py NOT_DECLARED)."""
    import importlib
    import importlib.util

    if not imports:
        found = importlib.util.find_spec(module) is not None
        return None if found else f"{module} is not installed; make installs it"
    try:
        importlib.import_module(module)
    except ImportError as err:
        return f"{module} does not import ({err}); make installs it"
    return None


def require_package(module: str, imports: bool = True) -> None:
    """Call at the top of a test (or fixture) that needs package ``module``."""
    reason = package_reason(module, imports)
    if reason is not None:
        skip_or_fail(module, reason)


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


@pytest.fixture(scope="session")
def need_package() -> object:
    """``need_package("tonic")`` skips (or fails, under NEUROEDGE_REQUIRE=tonic) with the
    import's reason unless package ``tonic`` imports (``imports=False``: is installed);
    session-wide, for module fixtures too."""
    return require_package


@pytest.fixture
def nir_data() -> object:
    """``nir_data("lif/lif_norse.nir")``: the path of a shared reference NIR file (other
    frameworks' graphs, ``../shared/data/nir`` beside the repository); skips when absent."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "nir"

    def get(rel: str) -> Path:
        path = folder / rel
        if not path.is_file():
            pytest.skip(f"reference NIR data {path} is not present (shared/ sits beside the repo)")
        return path

    return get


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
            env={**os.environ, "TMPDIR": str(cwd)},  # its torchelastic_* log folders go there
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    return run


class FakeServer:
    """Answers POSTs from a script: a str is a reply's content (with a ``usage`` object), a
    dict is the whole JSON body, ``(status, text)`` an HTTP error, ``("sleep", s)`` a stall.
    With the script empty, ``answer(body) -> str`` (when set) writes the content."""

    def __init__(self) -> None:
        self.replies: list = []
        self.requests: list[dict] = []
        self.base_url = ""
        self.answer: Callable[[dict], str] | None = None

    def reply_for(self, index: int, item: object) -> tuple[int, dict | str]:
        if isinstance(item, str):
            usage = {"prompt_tokens": 100 + index, "completion_tokens": 5 + index}
            choice = {"index": 0, "message": {"role": "assistant", "content": item}}
            return 200, {"choices": [choice], "usage": usage}
        if isinstance(item, dict):
            return 200, item
        return item  # (status, text)

    def next_item(self, body: dict) -> object:
        if self.replies:
            return self.replies.pop(0)
        return self.answer(body) if self.answer else (500, "script exhausted")

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                index = len(fake.requests)
                fake.requests.append({"path": self.path, "headers": self.headers, "body": body})
                item = fake.next_item(body)
                if isinstance(item, tuple) and item[0] == "sleep":
                    time.sleep(item[1])
                    return
                status, payload = fake.reply_for(index, item)
                data = (json.dumps(payload) if isinstance(payload, dict) else payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def usage(self) -> dict[str, int]:
        """What the server reported, summed over the 200 replies it gave (script: strs)."""
        n = len(self.requests)
        return {
            "prompt": sum(100 + i for i in range(n)),
            "completion": sum(5 + i for i in range(n)),
        }


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch):
    """A ``FakeServer`` on a free local port (``base_url`` ends in ``/v1``), no proxy."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")  # a proxy must not see localhost
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    fake = FakeServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield fake
    httpd.shutdown()
    httpd.server_close()
