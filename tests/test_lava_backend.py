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
