"""event.bivision checkpoints record the input encoding their net was trained on
(``representation_version``): one trained on E2S before a0ec326's support count loaded under
today's encoding without a word (accuracy 0.585 then, 0.55 now, same split). Another version
is refused naming the file; one without the key (saved before it existed: old or current,
the file cannot tell) builds with a one-line note. No training: fit is faked, the weights
saved are untrained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neuroedge.checkpoints import save_checkpoint

ABSENT = object()


def _checkpoint(path: Path, version: object, variant: str = "statnf_e2s") -> str:
    """A checkpoint as ``train.train`` saves it (``version`` ABSENT: as it saved it before)."""
    from neuroedge.models.bivision.train import make_net

    cfg = {"variant": variant, "size": 16}
    payload = {"state_dict": make_net(cfg).state_dict(), "config": cfg}
    if version is not ABSENT:
        payload["representation_version"] = version
    return str(save_checkpoint(path, payload))


def test_training_saves_the_representation_version(tmp_path: Path, monkeypatch) -> None:
    from neuroedge.models.bivision import train

    monkeypatch.setenv("NEUROEDGE_HOME", str(tmp_path))
    monkeypatch.setattr(train, "fit", lambda *a, **k: 0.0)
    cfg = {"train_samples": 2, "test_samples": 2, "size": 16}
    train.train(cfg, tmp_path / "c.pt", progress=False)
    saved = torch.load(tmp_path / "c.pt", weights_only=True)
    assert saved["representation_version"] == train.REPRESENTATION_VERSION == 2


@pytest.mark.parametrize("version", [1, 3, "2", 2.0, True, None])
def test_a_checkpoint_of_another_representation_is_refused_naming_the_file(
    tmp_path: Path, capsys, version: object
) -> None:
    from neuroedge.cli import main
    from neuroedge.errors import ArtifactError
    from neuroedge.models.bivision.spec import SPEC

    ckpt = _checkpoint(tmp_path / "old.pt", version)
    expected = f"{ckpt}: checkpoint representation_version={version!r}, this neuroedge encodes"
    with pytest.raises(ArtifactError, match="retrain it") as err:
        SPEC.build({"checkpoint": ckpt})
    assert str(err.value).startswith(expected)
    with pytest.raises(ArtifactError, match="representation_version"):  # its inputs too
        SPEC.example_for(0, {"checkpoint": ckpt})
    assert main(["run", "event.bivision", "--repeats", "1", "--config", f"checkpoint={ckpt}"]) == 2
    stderr = capsys.readouterr().err
    assert expected in stderr and "Traceback" not in stderr


def test_a_checkpoint_without_a_version_builds_with_a_one_line_note(tmp_path: Path, capsys):
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.models.bivision.train import REPRESENTATION_VERSION

    ckpt = _checkpoint(tmp_path / "unversioned.pt", ABSENT)
    assert SPEC.build({"checkpoint": ckpt}).meta["trained"]
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and note.startswith(f"event.bivision: note: {ckpt} records no")
    assert "may predate the current E2S encoding" in note
    for quiet in (  # today's version; a histogram net (no E2S)
        _checkpoint(tmp_path / "current.pt", REPRESENTATION_VERSION),
        _checkpoint(tmp_path / "histogram.pt", ABSENT, "lif_histogram"),
    ):
        assert SPEC.build({"checkpoint": quiet}).meta["trained"]
        assert capsys.readouterr().err == ""


def test_the_sweeps_nets_carry_the_version_and_build_without_a_note(tmp_path: Path, capsys):
    """The bench's nets (``deployment.save_nets``) were saved without it: every net a bench
    had just trained would have printed the "may predate" note."""
    from neuroedge.models.bivision.deployment import net_path, save_nets
    from neuroedge.models.bivision.spec import SPEC
    from neuroedge.models.bivision.train import REPRESENTATION_VERSION, make_net

    cfg = {"variant": "statnf_e2s", "size": 16}
    save_nets(tmp_path, 0, {("statnf_e2s", "classification"): make_net(cfg)}, cfg)
    path = net_path(tmp_path, 0, "statnf_e2s")
    saved = torch.load(path, weights_only=True)
    assert saved["representation_version"] == REPRESENTATION_VERSION
    assert SPEC.build({"checkpoint": str(path)}).meta["trained"]
    assert capsys.readouterr().err == ""
