"""Paths whose bytes are not UTF-8 (a Latin-1 ``ck_\\xfc.pt``, which Python reads as the
surrogate ``\\udcfc``) are refused up front, naming their bytes: they were a 358-792 line
traceback from torch's ONNX exporter, or a bench that ran and then failed writing report.md or
its history row."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from neuroedge.cli import main
from neuroedge.errors import ConfigError, InputError
from neuroedge.paths import refuse_undecodable

LATIN1 = "x_\udcfc"  # os.fsdecode(b"x_\xfc") under a UTF-8 locale
WHY = "its bytes are not UTF-8 text (a Latin-1 name?); rename it"


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("the work started before the path was checked")


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """snn.lif_convnet's build makes no net (its spec is frozen: patch what it calls)."""
    from neuroedge.models.lif_convnet import train

    monkeypatch.setattr(train, "make_net", _refuse)


def test_the_check_names_the_bytes_and_the_cause() -> None:
    assert os.fsencode(LATIN1) == b"x_\xfc"
    with pytest.raises(ConfigError, match=r"^--out=b'x_\\xfc': its bytes are not UTF-8"):
        refuse_undecodable(LATIN1, "--out", ConfigError)
    with pytest.raises(InputError, match=r"^b'x_\\xc3\\xbc': not text in this locale's"):
        refuse_undecodable("x_\udcc3\udcbc", "", InputError)  # UTF-8 read under LC_ALL=C
    with pytest.raises(ValueError, match=r"'x_\\ud800': not text \(it holds a lone surrogate"):
        refuse_undecodable("x_\ud800", "")
    refuse_undecodable(Path("x_\u00fc"), "--out")  # UTF-8 text: fine


def test_export_refuses_such_an_out_before_the_build(
    tmp_path: Path, no_build: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = f"{tmp_path}/{LATIN1}.onnx"
    assert main(["export", "snn.lif_convnet", "--out", out, "--config", "untrained=true"]) == 2
    assert f"{os.fsencode(out)!r}: {WHY}" in capsys.readouterr().err
    with pytest.raises(InputError, match="its bytes are not UTF-8"):
        import neuroedge

        neuroedge.export("snn.lif_convnet", out=out, config={"untrained": True})
    assert list(tmp_path.iterdir()) == []


def test_such_a_neuroedge_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = f"{tmp_path}/{LATIN1}"
    monkeypatch.setenv("NEUROEDGE_HOME", home)
    args = ["run", "snn.lif_convnet", "--backend", "onnxrt", "--repeats", "1"]
    assert main([*args, "--config", "untrained=true"]) == 2
    assert f"NEUROEDGE_HOME={os.fsencode(home)!r}: {WHY}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "label", "named"),
    [
        (["--out", "{bad}"], "", ""),
        (["--out", "{tmp}/rep", "--history", "{bad}.sqlite"], "history=", ".sqlite"),
        (["--out", "{tmp}/rep", "--config", "checkpoint={bad}.pt"], "config checkpoint=", ".pt"),
    ],
)
def test_bench_refuses_such_paths_before_the_run(
    args: list[str],
    label: str,
    named: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import neuroedge.bench.runner as runner

    monkeypatch.setattr(runner, "bench_model", _refuse)
    bad = f"{tmp_path}/{LATIN1}"
    argv = [a.format(bad=bad, tmp=tmp_path) for a in args]
    assert main(["bench", "snn.lif_convnet", "--repeats", "1", *argv]) == 2
    assert f"{label}{os.fsencode(bad + named)!r}: {WHY}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["--option", "path={bad}"], "--option path="),
        (["--input", "{bad}"], "--input="),
        (["--output", "{bad}"], ""),
    ],
)
def test_run_refuses_such_paths_before_the_build(
    args: list[str],
    label: str,
    tmp_path: Path,
    no_build: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = f"{tmp_path}/{LATIN1}.npz"
    run = ["run", "snn.lif_convnet", "--backend", "onnxrt", "--config", "untrained=true"]
    assert main([*run, *(a.format(bad=bad) for a in args)]) == 2
    assert f"{label}{os.fsencode(bad)!r}: {WHY}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_deploy_refuses_such_an_option_before_the_build(tmp_path: Path, no_build: None) -> None:
    import neuroedge

    with pytest.raises(ConfigError, match=r"^option path=b'.*x_\\xfc.onnx': its bytes are not"):
        neuroedge.deploy(
            "snn.lif_convnet", "onnxrt", {"untrained": True}, {"path": f"{tmp_path}/{LATIN1}.onnx"}
        )
