"""Install Lava (lava-nc 0.10.0) on Python 3.11: ``python -m neuroedge.backends.lava_install``.

lava-nc 0.10.0 is the last release; it declares ``Requires-Python <3.11`` and on 3.11 its
compiler dies at import with ``ValueError: mutable default <class 'ByteEncoder'> for field x
is not allowed`` (``lava/magma/compiler/var_model.py``: a non-frozen dataclass used as a field
default, which Python 3.11 rejects because it is unhashable).

Delivery chosen: a **patched wheel** built from PyPI's own lava-nc 0.10.0 wheel, installed by pip
like any other wheel. The step (idempotent, checked):

1. if ``lava-nc`` is installed at :data:`LOCAL_VERSION` and the check below passes, do nothing;
2. ``pip download lava-nc==0.10.0`` (the stock wheel; ``--wheel PATH`` uses a local copy);
3. verify the stock file's sha256 (:data:`STOCK_SHA256`) so the patch applies to exactly the
   bytes it was written for, then rewrite the wheel:
   - ``@dataclass`` -> ``@dataclass(frozen=True)`` on ``ByteEncoder`` (ByteEncoder is never
     mutated in lava, so freezing it changes no behaviour);
   - ``mp.set_start_method('fork')`` at import of lava's message infrastructure only when
     the start method is not already fork: the stock call raises "context has already been
     set" whenever anything called ``multiprocessing.get_start_method()`` first (torch.fx
     tracing during NIR export does), on any Python version;
   - ``Requires-Python`` widened to ``<3.12``; the version gets the local label ``+py311``, so
     ``pip list`` shows that this is not the stock build;
   - the stock wheel's top-level ``tests`` package (147 files) is left out: installed into
     site-packages it shadows any project's own ``tests`` package;
   - RECORD is regenerated with sha256 of every file (pip verifies it);
4. ``pip install`` that wheel plus the pinned dependencies lava declares and neuroedge does
   not pin (``asteval==0.9.33``, ``networkx==2.8.7``: lava's own ``<=2.8.7`` bound, the version
   verified here); numpy, scipy and scikit-learn are pinned by neuroedge within lava's bounds;
5. check: in a fresh interpreter, a 3-neuron Dense+LIF network runs 4 steps under
   ``Loihi2SimCfg`` and its spikes match a numpy reference; a mismatch fails the step.

Why not the alternatives: an import-time shim (a meta-path hook that recompiles var_model.py)
works only when neuroedge is imported before lava, so ``import lava`` in a user's own script
still crashes, and it patches code at every start; an isolated Python 3.10 environment needs an
interpreter this machine does not have and a process boundary for every call. The patched
wheel fixes lava for every importer, never edits site-packages by hand, and is undone with
``pip uninstall lava-nc``.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

STOCK_VERSION = "0.10.0"
LOCAL_VERSION = "0.10.0+py311"
STOCK_WHEEL = f"lava_nc-{STOCK_VERSION}-py3-none-any.whl"
PATCHED_WHEEL = f"lava_nc-{LOCAL_VERSION}-py3-none-any.whl"
COMMAND = "python -m neuroedge.backends.lava_install"  # what installs or repairs it
STOCK_SHA256 = "d646723e888a72868dac77d31beee3eef1f540366a8c1a8578a2dc3302470926"
DEPENDENCIES = ("asteval==0.9.33", "networkx==2.8.7")  # lava's own bounds, verified here
# path in the wheel -> (stock bytes, replacement); each must occur exactly once
SOURCE_PATCHES = {
    "lava/magma/compiler/var_model.py": (
        b"@dataclass\nclass ByteEncoder:",
        b"@dataclass(frozen=True)\nclass ByteEncoder:",
    ),
    "lava/magma/runtime/message_infrastructure/multiprocessing.py": (
        b"    mp.set_start_method('fork')\n",
        (
            b"    if mp.get_start_method(allow_none=True) != 'fork':\n"
            b"        mp.set_start_method('fork', force=True)\n"
        ),
    ),
}
METADATA_EDITS = (
    (f"Version: {STOCK_VERSION}\n", f"Version: {LOCAL_VERSION}\n"),
    ("Requires-Python: >=3.10,<3.11\n", "Requires-Python: >=3.10,<3.12\n"),
)

CHECK_SCRIPT = r"""
import multiprocessing
multiprocessing.get_start_method()  # fixes the context before lava is imported
import numpy as np
from lava.magma.core.run_conditions import RunSteps
from lava.magma.core.run_configs import Loihi2SimCfg
from lava.proc.dense.process import Dense
from lava.proc.io.source import RingBuffer
from lava.proc.lif.process import LIF
from lava.proc.monitor.process import Monitor

spikes_in = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], dtype=float)
w = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
src = RingBuffer(data=spikes_in)
dense = Dense(weights=w)
lif = LIF(shape=(3,), du=1.0, dv=0.0, vth=1.5, bias_mant=0.0)
mon = Monitor()
src.s_out.connect(dense.s_in)
dense.a_out.connect(lif.a_in)
mon.probe(lif.s_out, 4)
lif.run(condition=RunSteps(num_steps=4), run_cfg=Loihi2SimCfg(select_tag="floating_pt"))
got = mon.get_data()[lif.name]["s_out"].T
lif.stop()
# Lava delays each Dense by one step; IF neuron (dv=0) with reset to zero, vth 1.5.
v, want = np.zeros(3), np.zeros((3, 4))
for t in range(1, 4):
    v = v + w @ spikes_in[:, t - 1]
    want[:, t] = v > 1.5
    v[want[:, t] > 0] = 0.0
if not np.array_equal(got, want):  # not assert: python -O would drop the check
    raise SystemExit(f"lava check FAILED: spikes {got.tolist()}, numpy {want.tolist()}")
print("lava check ok: Dense+LIF under Loihi2SimCfg matches numpy")
"""


def installed_version() -> str | None:
    """The installed lava-nc version, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lava-nc")
    except PackageNotFoundError:
        return None


def installed_problem() -> str | None:
    """None when lava-nc is the build :func:`install` makes (its version :data:`LOCAL_VERSION`
    and every :data:`SOURCE_PATCHES` file patched) or a version of the user's own (neither that
    nor the stock release: :func:`import_problem` checks it at compile), else what is wrong and
    the command that fixes it. Reads the installed metadata and files, imports nothing:
    cheap enough for ``neuroedge doctor``. The stock 0.10.0 crashes at import on Python 3.11."""
    from importlib.metadata import PackageNotFoundError, distribution

    fix = f"run {COMMAND}"
    try:
        dist = distribution("lava-nc")
    except PackageNotFoundError:
        return f"lava-nc is not installed ({COMMAND})"
    if dist.version == STOCK_VERSION:
        return (
            f"lava-nc {dist.version} is installed, not the patched {LOCAL_VERSION} build that "
            f"runs on Python 3.11: {fix}"
        )
    if dist.version != LOCAL_VERSION:  # a build of the user's own: compile tries its import
        return None
    for name, (_, patched) in SOURCE_PATCHES.items():
        try:
            ok = patched in Path(str(dist.locate_file(name))).read_bytes()
        except OSError as err:
            return f"lava-nc {dist.version}: {name} does not read ({err}): {fix} --force"
        if not ok:
            return f"lava-nc {dist.version}: {name} lacks the Python 3.11 patch: {fix} --force"
    return None


def import_problem() -> str | None:
    """None when lava's compiler imports (what :func:`installed_problem` cannot see: a build
    whose files look patched yet fail at import), else the error and the fix. Imports lava
    (0.1 s): for the compile that imports it anyway, not for ``neuroedge doctor``."""
    try:
        import lava.magma.compiler.var_model  # noqa: F401 (where the stock build fails on 3.11)
    except (ImportError, ValueError, TypeError, AttributeError, OSError) as err:
        return f"lava-nc does not import ({type(err).__name__}: {err}): run {COMMAND} --force"
    return None


def check(python: str = sys.executable) -> tuple[bool, str]:
    """Run a tiny network under Loihi2SimCfg in a fresh interpreter: ``(ok, output)``."""
    proc = subprocess.run(
        [python, "-c", CHECK_SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    out = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0, out.splitlines()[-1] if out else f"exit {proc.returncode}"


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _patch_member(name: str, data: bytes) -> bytes:
    if name in SOURCE_PATCHES:
        old, new = SOURCE_PATCHES[name]
        if data.count(old) != 1:
            raise ValueError(
                f"{name}: expected one {old!r}; the stock wheel changed, the patch does not apply"
            )
        return data.replace(old, new)
    if name.endswith(".dist-info/METADATA"):
        text = data.decode("utf-8")
        for old, new in METADATA_EDITS:
            if old not in text:
                raise ValueError(f"{name}: expected line {old.strip()!r} not found")
            text = text.replace(old, new, 1)
        return text.encode("utf-8")
    return data


def patch_wheel(stock: Path, out_dir: Path) -> Path:
    """Write the patched wheel into ``out_dir`` (see the module docstring) and return it."""
    digest = hashlib.sha256(stock.read_bytes()).hexdigest()
    if digest != STOCK_SHA256:
        raise ValueError(
            f"{stock}: sha256 {digest} is not the lava-nc {STOCK_VERSION} wheel "
            f"this patch was written for ({STOCK_SHA256})"
        )
    old_info, new_info = f"lava_nc-{STOCK_VERSION}.dist-info", f"lava_nc-{LOCAL_VERSION}.dist-info"
    target = out_dir / PATCHED_WHEEL
    records: list[list[str]] = []
    with zipfile.ZipFile(stock) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            name = info.filename
            if name.startswith("tests/") or name == f"{old_info}/RECORD" or name.endswith("/"):
                continue
            data = _patch_member(name, src.read(info))
            name = name.replace(old_info, new_info, 1)
            dst.writestr(name, data)
            records.append(_record_line(name, data))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*records, [f"{new_info}/RECORD", "", ""]])
        dst.writestr(f"{new_info}/RECORD", buf.getvalue())
    return target


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def install(wheel: Path | None = None, force: bool = False) -> str:
    """Idempotent install; returns what was done. Raises RuntimeError when the check fails."""
    if not force and installed_version() == LOCAL_VERSION:
        ok, out = check()
        if ok:
            return f"lava-nc {LOCAL_VERSION} already installed and working ({out})"
    with tempfile.TemporaryDirectory(prefix="lava-install-") as tmp:
        work = Path(tmp)
        if wheel is None:
            _pip(
                "download",
                "-q",
                f"lava-nc=={STOCK_VERSION}",
                "--no-deps",
                "--ignore-requires-python",
                "--only-binary=:all:",
                "-d",
                str(work),
            )
            wheel = work / STOCK_WHEEL
        patched = patch_wheel(Path(wheel), work)
        _pip("install", "-q", "--force-reinstall", "--no-deps", str(patched))
        _pip("install", "-q", *DEPENDENCIES)
    ok, out = check()
    if not ok:
        raise RuntimeError(f"lava-nc {LOCAL_VERSION} installed but the check failed: {out}")
    return f"installed lava-nc {LOCAL_VERSION} ({out})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(  # no __doc__ under python -OO
        prog=COMMAND,
        description=(__doc__ or "").split("\n\n")[0],
    )
    p.add_argument("--wheel", type=Path, default=None, help="a local stock lava-nc wheel")
    p.add_argument("--force", action="store_true", help="rebuild and reinstall")
    p.add_argument("--check", action="store_true", help="only run the check")
    args = p.parse_args(argv)
    if args.check:
        ok, out = check()
        print(out)
        return 0 if ok else 1
    print(install(args.wheel, args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
