"""The Lava backend's probe, its line in ``neuroedge doctor``, and the install step's patch."""

from __future__ import annotations

import pytest


def test_probe_gives_a_reason_either_way():
    from neuroedge.backends.lava import LavaBackend, hardware_reason

    availability = LavaBackend().probe()
    assert availability.reason
    if availability.ok:
        assert ("Loihi2SimCfg" in availability.reason) == (hardware_reason() is not None)


def test_doctor_lists_lava_with_its_reason(capsys):
    from neuroedge.backends.lava import LavaBackend
    from neuroedge.cli import main

    assert main(["doctor"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("lava "))
    assert LavaBackend().probe().reason in line


def test_install_patch_rewrites_only_what_it_names(tmp_path):
    import zipfile

    from neuroedge.backends import lava_install as li

    stock = tmp_path / li.STOCK_WHEEL
    with zipfile.ZipFile(stock, "w") as z:
        z.writestr("lava/magma/compiler/var_model.py", "@dataclass\nclass ByteEncoder:\n")
        z.writestr("tests/test_x.py", "")
    with pytest.raises(ValueError, match="sha256"):
        li.patch_wheel(stock, tmp_path)
    assert li._patch_member(
        "lava/magma/compiler/var_model.py", b"@dataclass\nclass ByteEncoder:\n"
    ).startswith(b"@dataclass(frozen=True)")
    with pytest.raises(ValueError, match="does not apply"):
        li._patch_member("lava/magma/compiler/var_model.py", b"class Other: pass\n")


FAKE_LAVA = """
import numpy as np


class _Port:
    def connect(self, other):
        pass


class _Process:
    def __init__(self, *args, **kwargs):
        self.name, self.s_in, self.s_out, self.a_in, self.a_out = "lif", *(_Port(),) * 4

    def run(self, condition=None, run_cfg=None):
        pass

    def stop(self):
        pass

    def probe(self, port, steps):
        pass

    def get_data(self):  # every neuron spikes at every step: not what numpy computes
        return {"lif": {"s_out": np.ones((4, 3))}}


RunSteps = Loihi2SimCfg = Dense = RingBuffer = LIF = Monitor = _Process
"""


def test_install_check_fails_a_wrong_lava_under_python_o(tmp_path, monkeypatch):
    """A bare assert compared Lava's spikes with numpy's: under -O a wrong Lava passed."""
    from neuroedge.backends import lava_install as li

    leaves = ("magma/core/run_conditions", "magma/core/run_configs", "proc/dense/process")
    leaves += ("proc/io/source", "proc/lif/process", "proc/monitor/process")
    for leaf in leaves:
        module = tmp_path / "lava" / f"{leaf}.py"
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text("from lava._fake import *  # noqa: F403\n")
    for folder in (tmp_path / "lava", *(tmp_path / "lava").rglob("*/")):
        (folder / "__init__.py").touch()
    (tmp_path / "lava" / "_fake.py").write_text(FAKE_LAVA)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    ok, line = li.check()
    assert not ok
    assert line.startswith("lava check FAILED: spikes [[1.0, 1.0, 1.0, 1.0], [1.0")


def test_install_help_runs_without_docstrings(monkeypatch, capsys):
    """python -OO strips __doc__: the parser's description read None.split."""
    from neuroedge.backends import lava_install as li

    monkeypatch.setattr(li, "__doc__", None)
    with pytest.raises(SystemExit) as stop:
        li.main(["--help"])
    assert stop.value.code == 0
    assert "--check" in capsys.readouterr().out
