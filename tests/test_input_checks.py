"""Bad input found by the 2026-12-05 audit: checkpoints, report values, output paths, meshes.

Each test failed on the code before the fix (a raw traceback, a silent fallback to untrained
weights, an invalid report.json, or an error that named a temp file instead of the target).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.atomic import atomic_path
from neuroedge.bench.report import build_document, write_report
from neuroedge.checkpoints import load_checkpoint, resolve_checkpoint, save_checkpoint
from neuroedge.cli import main
from neuroedge.errors import ArtifactError, ExportRefused
from neuroedge.types import Measurement, Report


def _good_checkpoint(tmp_path: Path) -> Path:
    from neuroedge.models.lif_convnet import spec as lif_spec

    net = lif_spec.build({"smoke": True}).module
    return save_checkpoint(tmp_path / "ok.pt", {"state_dict": net.state_dict(), "config": {}})


def test_a_truncated_checkpoint_names_the_file(tmp_path: Path) -> None:
    data = _good_checkpoint(tmp_path).read_bytes()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 100):
        bad = tmp_path / f"cut{cut}.pt"
        bad.write_bytes(data[:cut])
        with pytest.raises(ArtifactError, match=f"cut{cut}.pt: not a readable checkpoint"):
            load_checkpoint(bad)


def test_a_checkpoint_that_is_not_a_dict_is_refused(tmp_path: Path) -> None:
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    with pytest.raises(ArtifactError, match="tensor.pt: a checkpoint holds a dict.*Tensor"):
        load_checkpoint(tmp_path / "tensor.pt", required=("state_dict",))


def test_a_named_checkpoint_must_exist_and_be_a_file(tmp_path: Path) -> None:
    from neuroedge.models.bivision import spec as bivision
    from neuroedge.models.cadre import spec as cadre
    from neuroedge.models.meshft import spec as meshft

    missing = str(tmp_path / "typo.pt")
    for build in (cadre.build, meshft.build, bivision.build):
        with pytest.raises(ArtifactError, match="typo.pt: no such checkpoint"):
            build({"checkpoint": missing})
    with pytest.raises(ArtifactError, match="is a directory"):
        resolve_checkpoint({"checkpoint": str(tmp_path)}, "snn.lif_convnet")
    assert resolve_checkpoint({}, "snn.lif_convnet").name == "snn.lif_convnet.pt"  # default


def test_weights_of_another_model_name_the_file(tmp_path: Path) -> None:
    from neuroedge.models.lif_convnet import spec as lif_spec

    other = save_checkpoint(
        tmp_path / "other.pt", {"state_dict": {"w": torch.zeros(2)}, "config": {}}
    )
    with pytest.raises(ArtifactError, match="other.pt: its weights do not fit"):
        lif_spec.build({"checkpoint": str(other)})
    assert lif_spec.build({"checkpoint": str(_good_checkpoint(tmp_path))}).meta["trained"]


def test_non_finite_metrics_are_null_in_report_json_and_skipped_in_history(
    tmp_path: Path,
) -> None:
    row = Report(
        "m", "host", "v", metrics={"ratio": Measurement(float("nan"), "x"), "n": Measurement(3, "")}
    )
    db = tmp_path / "h.sqlite"
    write_report(build_document("m", [row]), tmp_path / "r", history=db)

    def refuse(token: str) -> None:
        raise AssertionError(f"report.json holds {token}")

    doc = json.loads((tmp_path / "r/report.json").read_text(), parse_constant=refuse)
    assert doc["rows"][0]["metrics"]["ratio"]["value"] is None
    assert doc["non_finite"] == ["rows[0].metrics.ratio.value (nan)"]
    assert "not finite" in (tmp_path / "r/report.md").read_text()
    with sqlite3.connect(db) as con:
        names = [r[0] for r in con.execute("SELECT name FROM metrics")]
    assert names == ["n"]


def test_output_paths_are_checked_before_the_work(tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    rc = main(["bench", "snn.lif_convnet", "--out", str(a_file), "--history", str(tmp_path / "h")])
    assert rc == 2 and "is a file; give a folder" in capsys.readouterr().err
    with pytest.raises(NotADirectoryError, match=f"{a_file} is a file, not a folder"):
        with atomic_path(a_file / "x.onnx"):
            pass
    rc = main(["export", "snn.lif_convnet", "--out", str(a_file / "m.onnx")])
    assert rc == 2 and "is a file, not a folder" in capsys.readouterr().err


def test_precision_is_refused_outside_onnx_and_tensorrt(tmp_path: Path) -> None:
    from neuroedge.api import export

    with pytest.raises(ExportRefused, match="precision 'int8' applies to ONNX graphs and Tens"):
        export("snn.lif_convnet", "nir", tmp_path / "m.nir", {"smoke": True}, "int8")
    with pytest.raises(ExportRefused, match="precision 'int4': expected one of fp32, fp16, int8"):
        export("snn.lif_convnet", "onnx", tmp_path / "m.onnx", {"smoke": True}, "int4")
    assert not list(tmp_path.iterdir())


def test_an_onnx_export_whose_state_file_fails_leaves_no_graph(tmp_path: Path) -> None:
    from neuroedge.api import export

    (tmp_path / "m.state.npz").mkdir()  # the state file cannot be written
    with pytest.raises(IsADirectoryError):
        export("snn.lif_convnet", "onnx", tmp_path / "m.onnx", {"smoke": True})
    assert not (tmp_path / "m.onnx").exists()


def _nir_file(tmp_path: Path) -> Path:
    import nir

    graph = nir.NIRGraph(
        nodes={
            "input": nir.Input(input_type=np.array([3])),
            "fc": nir.Affine(weight=np.eye(3, dtype=np.float32), bias=np.zeros(3, np.float32)),
            "lif": nir.LIF(
                tau=np.full(3, 0.02),
                r=np.ones(3),
                v_leak=np.zeros(3),
                v_threshold=np.ones(3),
            ),
            "output": nir.Output(output_type=np.array([3])),
        },
        edges=[("input", "fc"), ("fc", "lif"), ("lif", "output")],
        metadata={"dt": 1e-3},
    )
    nir.write(tmp_path / "g.nir", graph)
    return tmp_path / "g.nir"


def test_nir_input_must_be_one_npy_with_a_batch(tmp_path: Path) -> None:
    from neuroedge.api import check_nir

    graph = _nir_file(tmp_path)
    np.savez(tmp_path / "x.npz", a=np.zeros((4, 1, 3)))
    with pytest.raises(ValueError, match=r"x.npz: not a numeric .npy array \(an .npz archive"):
        check_nir(graph, "lava", tmp_path / "x.npz")
    np.save(tmp_path / "empty.npy", np.zeros((4, 0, 3), np.float32))
    with pytest.raises(ValueError, match=r"empty.npy: input of shape \[4, 0, 3\]; expected"):
        check_nir(graph, "lava", tmp_path / "empty.npy")
    x = np.zeros((4, 1, 3), np.float32)
    x[2, 0, 1] = np.nan
    np.save(tmp_path / "nan.npy", x)
    with pytest.raises(
        ValueError, match=r"nan.npy: 1 values are not finite, the first at index \(2, 0, 1\)"
    ):
        check_nir(graph, "lava", tmp_path / "nan.npy")
    np.save(tmp_path / "c.npy", np.full((4, 1, 3), 1j))
    with pytest.raises(ValueError, match=r"c.npy: not a numeric .npy array \(complex dtype"):
        check_nir(graph, "lava", tmp_path / "c.npy")
    np.save(tmp_path / "s.npy", np.array([["a"]]))
    with pytest.raises(ValueError, match=r"s.npy: not a numeric .npy array \(dtype <U1\)"):
        check_nir(graph, "lava", tmp_path / "s.npy")


def test_a_user_mesh_runs_and_a_broken_one_is_a_mesh_error(tmp_path: Path) -> None:
    import meshio
    from neuroedge.api import deploy
    from neuroedge.models.meshft.mesh import MeshError

    xs, ys = np.meshgrid(np.linspace(0, 1, 5), np.linspace(0, 1, 5))
    quads = [
        (i * 5 + j, i * 5 + j + 1, i * 5 + j + 6, i * 5 + j + 5) for i in range(4) for j in range(4)
    ]
    tris = [t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))]
    points = np.c_[xs.ravel(), ys.ravel(), np.zeros(25)]
    meshio.write(tmp_path / "ok.vtk", meshio.Mesh(points, [("triangle", np.array(tris))]))
    _, report = deploy("physics.meshft", config={"mesh": str(tmp_path / "ok.vtk"), "smoke": True})
    assert report.metrics["latency_p50_ms"].value > 0
    (tmp_path / "bad.vtk").write_text("not a mesh\n")
    with pytest.raises(MeshError, match="bad.vtk: not a readable mesh"):
        deploy("physics.meshft", config={"mesh": str(tmp_path / "bad.vtk"), "smoke": True})
    with pytest.raises(MeshError, match="'grd': not a built-in mesh \\(grid, delaunay\\)"):
        deploy("physics.meshft", config={"mesh": "grd", "smoke": True})


def test_lora_flow_needs_a_layer() -> None:
    from neuroedge.models.lora_meanfield import spec as lora

    with pytest.raises(ValueError, match="layers=0: expected an integer in 1"):
        lora.build({"layers": 0})


def test_nir_dt_and_unsupported_nodes_name_the_file(tmp_path: Path) -> None:
    import nir
    from neuroedge.api import check_nir

    graph = nir.read(_nir_file(tmp_path))
    graph.metadata = {"dt": "1ms"}
    nir.write(tmp_path / "str_dt.nir", graph)
    with pytest.raises(ValueError, match=r"str_dt.nir: dt '1ms' is not a number"):
        check_nir(tmp_path / "str_dt.nir", "lava")
    graph.metadata = {"dt": 1e-3}
    graph.nodes["fc"] = nir.Delay(delay=np.ones(3))
    nir.write(tmp_path / "delay.nir", graph)
    with pytest.raises(ExportRefused, match=r"delay.nir: NIR node 'fc' of type 'Delay'"):
        check_nir(tmp_path / "delay.nir", "lava")


def test_bivision_refuses_an_empty_recording_and_a_mismatched_dataset(tmp_path: Path) -> None:
    from neuroedge.events import make_events
    from neuroedge.events.io import write_events
    from neuroedge.models.bivision.e2s_throughput import throughput_rows
    from neuroedge.models.bivision.train import train

    empty = write_events(tmp_path / "empty.dat", make_events([], [], [], []), "dat")
    with pytest.raises(ValueError, match="empty.dat: 0 events; the throughput bench needs"):
        throughput_rows({"events_file": str(empty)})
    with pytest.raises(FileNotFoundError, match="nothere: no such dataset folder"):
        train({"data": str(tmp_path / "nothere")})
    (tmp_path / "ds").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json: no dataset config"):
        train({"data": str(tmp_path / "ds")})
    (tmp_path / "ds/config.json").write_text('{"width": 120, "height": 100}')
    with pytest.raises(ValueError, match="a 120x100 sensor, but the net takes 64x64"):
        train({"data": str(tmp_path / "ds")})


def test_a_folder_is_no_edge_list(tmp_path: Path) -> None:
    from neuroedge.models.influence_max.data import load_edge_list

    with pytest.raises(IsADirectoryError, match="is a directory; give the edge-list file"):
        load_edge_list(tmp_path)


def test_bench_backends_and_repeats_are_checked_before_any_work(tmp_path: Path, capsys) -> None:
    out, hist = str(tmp_path / "out"), str(tmp_path / "h.sqlite")
    base = ["bench", "snn.lif_convnet", "--out", out, "--history", hist]
    assert main([*base, "--backend", "host", "--backend", "nonexistent"]) == 2
    assert "unknown backend 'nonexistent'" in capsys.readouterr().err
    assert main([*base, "--backend", ","]) == 2
    assert "no backend named" in capsys.readouterr().err
    assert main([*base, "--backend", "host", "--repeats", "0"]) == 2
    assert "--repeats 0: must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ArtifactError, match="config checkpoint 5: expected the path"):
        resolve_checkpoint({"checkpoint": 5}, "snn.lif_convnet")
