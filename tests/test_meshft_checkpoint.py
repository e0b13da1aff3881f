"""physics.meshft checkpoints: weights the user named (``checkpoint``) that were trained on
another mesh are refused (the build fell back to the theory metric had that check gone), the
default checkpoint of another mesh is passed over (theory metric), and a checkpoint whose saved
config is no dict of ``mesh`` and ``hodge`` is refused naming the file (it was an
AttributeError or KeyError traceback). The checkpoints hold untrained metrics: no training."""

from __future__ import annotations

from pathlib import Path

import pytest
from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.models.meshft import spec
from neuroedge.models.meshft.module import MeshFT


AS_TRAINED = object()


def _save(path: Path, mesh: str = "grid", config: object = AS_TRAINED) -> Path:
    """A checkpoint as ``spec.train`` saves it (untrained metric of ``mesh``), or with the
    saved ``config`` given."""
    model = MeshFT(spec.make_mesh(mesh), "learn_geom").double()
    saved = {"mesh": mesh, "hodge": "learn_geom"} if config is AS_TRAINED else config
    return save_checkpoint(path, {"state_dict": model.state_dict(), "config": saved})


def test_a_named_checkpoint_of_another_mesh_is_refused(tmp_path: Path, capsys) -> None:
    from neuroedge.cli import main

    path = _save(tmp_path / "grid.pt")
    assert spec.build({"checkpoint": str(path)}).meta["trained"]  # its own mesh
    expected = f"mesh='delaunay': checkpoint {path} was trained on mesh 'grid'"
    with pytest.raises(ConfigError, match=expected):
        spec.build({"checkpoint": str(path), "mesh": "delaunay"})
    config = [f"checkpoint={path}", "mesh=delaunay"]
    assert main(["run", "physics.meshft", "--repeats", "1", "--config", *config]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_the_default_checkpoint_of_another_mesh_leaves_the_theory_metric(monkeypatch, tmp_path):
    from neuroedge import paths

    monkeypatch.setattr(paths, "checkpoint_path", lambda name: tmp_path / "default.pt")
    _save(tmp_path / "default.pt")
    assert spec.build({}).meta["trained"]
    assert not spec.build({"mesh": "delaunay"}).meta["trained"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, "checkpoint config is a NoneType, expected a dict of training settings (mesh"),
        ("grid", "checkpoint config is a str, expected a dict"),
        ({"mesh": "grid"}, "checkpoint config hodge=None: expected one of theory, scalar,"),
        ({"mesh": "grid", "hodge": "bogus"}, "checkpoint config hodge='bogus': expected one of"),
        ({"hodge": "learn_geom"}, "checkpoint config mesh=None: expected the name or file"),
    ],
)
def test_a_checkpoint_config_that_is_no_mesh_and_hodge_is_refused(
    tmp_path: Path, capsys, config: object, expected: str
) -> None:
    from neuroedge.cli import main

    path = _save(tmp_path / "bad.pt", config=config)
    with pytest.raises(ArtifactError, match=str(path)):
        spec.build({"checkpoint": str(path)})
    assert main(["run", "physics.meshft", "--repeats", "1", "--config", f"checkpoint={path}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {expected}" in err and "Traceback" not in err
