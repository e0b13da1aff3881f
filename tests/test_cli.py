"""The neuroedge command: list, info, doctor, export, bench, run, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuroedge.cli import main


def test_list_and_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    assert "snn.lif_convnet" in capsys.readouterr().out
    assert main(["info", "snn.lif_convnet"]) == 0
    out = capsys.readouterr().out
    assert "x[T, batch, 1, 8, 8]:float32" in out and "onnx" in out


def test_doctor_lists_every_known_backend_with_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    from neuroedge.registry import known_backends

    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[0] for line in lines) == known_backends()
    assert all(len(line.split()) >= 3 for line in lines)


def test_unknown_model_exits_2_listing_valid_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "snn.nope"]) == 2
    assert "valid models:" in capsys.readouterr().err


def test_unknown_backend_exits_2_listing_valid_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "bench",
                "snn.lif_convnet",
                "--backend",
                "tpu",
                "--out",
                str(tmp_path),
                "--config",
                "untrained=true",
            ]
        )
        == 2
    )
    assert "valid backends:" in capsys.readouterr().err


def test_export_writes_an_onnx_file(tmp_path: Path) -> None:
    out = tmp_path / "net.onnx"
    assert (
        main(
            [
                "export",
                "snn.lif_convnet",
                "--target",
                "onnx",
                "--out",
                str(out),
                "--config",
                "untrained=true",
            ]
        )
        == 0
    )
    assert out.stat().st_size > 1000


@pytest.mark.parametrize("model", ["snn.lif_convnet", "snn.unisparse"])
def test_export_writes_a_nir_file_that_reads_back(tmp_path: Path, model: str) -> None:
    pytest.importorskip("nir")
    from neuroedge.export.nir import read_nir

    out = tmp_path / "net.nir"
    assert (
        main(
            [
                "export",
                model,
                "--target",
                "nir",
                "--out",
                str(out),
                "--config",
                "untrained=true",
                "smoke=true",
            ]
        )
        == 0
    )
    graph = read_nir(out)
    kinds = {type(node).__name__ for node in graph.nodes.values()}
    assert {"Input", "Output", "Conv2d", "LIF"} <= kinds
    assert graph.metadata["dt"] > 0


def test_bench_writes_report_rows_for_each_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "bench",
            "snn.lif_convnet",
            "--backend",
            "host",
            "--backend",
            "onnxrt,null",
            "--out",
            str(tmp_path),
            "--repeats",
            "5",
            "--config",
            "untrained=true",
        ]
    )
    assert code == 0
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [r["backend"] for r in doc["rows"]] == ["host", "onnxrt", "null"]
    host, ort, null = doc["rows"]
    assert host["metrics"]["sops_per_sample"]["how"] == "counted"
    assert host["metrics"]["energy_uj"]["how"] == "estimated"
    assert ort["metrics"]["spike_agreement"]["value"] == 1.0
    assert null["metrics"]["latency_p50_ms"]["how"] == "estimated"
    ratio = doc["speedup_vs_host"]["default/onnxrt"]
    line = f"speedup default/onnxrt vs host (p50, same run): {ratio:.2f}x"
    assert line in capsys.readouterr().out.splitlines()
    assert f"- {line}" in (tmp_path / "report.md").read_text().splitlines()  # not console only
    assert "speedup default/host" not in (tmp_path / "report.md").read_text()
    assert (tmp_path / "latency.png").is_file()


def test_run_prints_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["run", "snn.lif_convnet", "--backend", "onnxrt", "--config", "untrained=true"]) == 0
    )
    out = capsys.readouterr().out
    assert "logits" in out and "latency p50" in out


def _tiny_nir(path: Path, dt: float | None) -> Path:
    import nir
    from neuroedge.export.nir import write_nir

    graph = nir.NIRGraph(
        nodes={
            "x": nir.Input({"input": np.array([3])}),
            "fc": nir.Affine(np.full((2, 3), 1.5), np.zeros(2)),
            "lif": nir.LIF(
                tau=np.full(2, 2e-3),
                r=np.ones(2),
                v_leak=np.zeros(2),
                v_threshold=np.ones(2),
                v_reset=np.zeros(2),
            ),
            "spikes": nir.Output({"output": np.array([2])}),
        },
        edges=[("x", "fc"), ("fc", "lif"), ("lif", "spikes")],
        metadata={} if dt is None else {"dt": dt},
    )
    return write_nir(graph, path)


@pytest.mark.loihi
def test_nir_command_runs_a_file_on_lava_against_the_host(
    tmp_path: Path, require, capsys: pytest.CaptureFixture[str]
):
    require("lava")
    path = _tiny_nir(tmp_path / "tiny.nir", 1e-3)
    out = tmp_path / "check.json"
    assert main(["nir", str(path), "--steps", "12", "--batch", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    row = report["outputs"]["spikes"]
    assert row["shape"] == [12, 3, 2] and row["reference_mean"] > 0.05
    assert row["equal_fraction"] == 1.0 and report["chip_fit"]["neurons"] == 2
    assert row["spike_kappa"] == 1.0  # agreement beyond what the firing rates give by chance
    assert "equal 1.000000  kappa 1.0000" in capsys.readouterr().out


def test_nir_command_names_a_missing_dt_and_a_wrong_input_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("nir")
    bare = _tiny_nir(tmp_path / "bare.nir", None)
    assert main(["nir", str(bare)]) == 2
    assert "carries no dt" in capsys.readouterr().err
    timed = _tiny_nir(tmp_path / "timed.nir", 1e-3)
    wrong = tmp_path / "x.npy"
    np.save(wrong, np.zeros((5, 2, 4), np.float32))
    assert main(["nir", str(timed), "--input", str(wrong)]) == 2
    err = capsys.readouterr().err
    assert "x.npy" in err and "[5, 2, 4]" in err and "(T, batch, 3)" in err
    right = tmp_path / "right.npy"
    np.save(right, np.zeros((5, 2, 3), np.float32))
    flags = ["--steps", "7", "--density", "0.9"]
    assert main(["nir", str(timed), "--input", str(right), *flags]) == 2  # ran 5 x 2, ignored
    err = capsys.readouterr().err
    assert "steps (--steps), density (--density) set the random spike input" in err
    assert "right.npy they have no use" in err


def test_own_benchmark_refuses_backends_and_repeats_it_would_ignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuroedge import cli
    from neuroedge.registry import get_model

    spec = get_model("stats.self_distill")  # a host-only method with its own benchmark
    assert main(["bench", spec.name, "--backend", "host,onnxrt", "--out", str(tmp_path)]) == 2
    assert "measures the backends host; not onnxrt" in capsys.readouterr().err
    assert (
        main(["bench", spec.name, "--backend", "host", "--repeats", "5", "--out", str(tmp_path)])
        == 2
    )
    assert "sets its own repetitions" in capsys.readouterr().err
    assert not (tmp_path / "report.json").exists()
    # without --backend the default (host, onnxrt) narrows to what the benchmark measures
    assert cli._bench_backends(spec, ["host", "onnxrt"], explicit=False) == ["host"]
    lava_too = get_model("snn.unisparse")
    assert cli._bench_backends(lava_too, ["host", "lava"], explicit=True) == ["host", "lava"]


def test_missing_input_file_is_an_error_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nir", str(tmp_path / "absent.nir")]) == 2
    assert "absent.nir" in capsys.readouterr().err


def test_deploy_reports_counted_ops_and_parity_with_host() -> None:
    import neuroedge as ne

    art, report = ne.deploy("snn.lif_convnet", "onnxrt", {"untrained": True})
    m = report.metrics
    assert m["sops_per_sample"].how == "counted" and m["macs_per_sample"].value > 0
    assert m["energy_uj"].how == "estimated"
    assert m["max_abs_err"].value < 1e-4 and m["spike_agreement"].value == 1.0
    assert m["within_tolerance"].value == 1.0 and report.to_json()["model"] == "snn.lif_convnet"
    _, host = ne.deploy("snn.lif_convnet", "host", {"untrained": True})
    assert "max_abs_err" not in host.metrics  # the host is the reference
    assert host.metrics["sops_per_sample"].value == m["sops_per_sample"].value


def test_example_follows_the_build_config_through_run_and_onnx_export(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "run",
                "ttt.linear_attention",
                "--backend",
                "onnxrt",
                "--config",
                "d_model=64",
                "smoke=true",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "y              shape [16, 2, 64]" in out and "within_tolerance 1" in out


def test_tensorrt_engine_export_builds_or_is_refused_with_the_probe_reason(tmp_path: Path) -> None:
    import neuroedge as ne
    from neuroedge.errors import BackendUnavailable, ExportRefused
    from neuroedge.registry import get_backend

    availability = get_backend("tensorrt").probe()
    out = tmp_path / "lif.fp16.engine"
    if availability.ok:  # a GPU machine: the engine is written where asked
        path = ne.export("snn.lif_convnet", "tensorrt", out, {"untrained": True}, "fp16")
        assert path == out and out.stat().st_size > 0
    else:
        with pytest.raises(BackendUnavailable, match=availability.reason[:40].replace("(", ".")):
            ne.export("snn.lif_convnet", "tensorrt", out, {"untrained": True}, "fp16")
        assert not out.exists()
    with pytest.raises(ExportRefused, match="no ONNX export"):
        ne.export("stats.self_distill", "tensorrt", tmp_path / "x.engine")


def test_verbs_stay_callable_after_their_namesake_subpackages_are_imported(tmp_path: Path) -> None:
    import neuroedge as ne
    import neuroedge.export.onnx  # noqa: F401  (binds the subpackage on neuroedge)
    import neuroedge.models.lif_convnet.spec  # noqa: F401

    assert "snn.lif_convnet" in ne.models()
    out = ne.export(
        "snn.lif_convnet", target="onnx", out=tmp_path / "lif.onnx", config={"untrained": True}
    )
    assert out == tmp_path / "lif.onnx" and out.stat().st_size > 0
    assert ne.export.onnx.state_file(out).is_file()  # still the package too


def test_bad_nir_options_and_output_paths_are_error_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nir_file = Path(__file__).resolve().parents[2] / "shared/data/nir/lif/lif_norse.nir"
    if not nir_file.is_file():
        pytest.fail(f"shared NIR graphs missing at {nir_file} (expected <repo>/../shared)")
    for extra, said in (
        (["--steps", "0"], "steps (0)"),
        (["--density", "2"], "density (2.0)"),
        (["--backend", "host"], "run on 'lava'"),
    ):
        assert main(["nir", str(nir_file), "--dt", "1e-4", *extra]) == 2
        assert said in capsys.readouterr().err
    (tmp_path / "adir").mkdir()
    assert (
        main(
            [
                "export",
                "snn.lif_convnet",
                "--out",
                str(tmp_path / "adir"),
                "--config",
                "untrained=true",
            ]
        )
        == 2
    )
    assert "is a directory" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                "snn.lif_convnet",
                "--out",
                str(tmp_path / "m.json"),
                "--config",
                "untrained=true",
            ]
        )
        == 0
    )  # any extension: the file is protobuf


def test_atomic_writes_get_the_usual_file_mode(tmp_path: Path) -> None:
    from neuroedge import atomic

    path = atomic.write_text(tmp_path / "r.json", "{}")
    assert path.stat().st_mode & 0o777 == 0o666 & ~atomic._UMASK  # mkstemp gave 0600


def test_a_history_that_is_not_a_neuroedge_database_fails_before_the_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    out = tmp_path / "out"
    args = ["bench", "alloc.envy_free", "--out", str(out), "--history"]
    assert main([*args, str(text)]) == 2
    assert f"history {text}: not a neuroedge history database" in capsys.readouterr().err
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE runs (x INTEGER)")
    assert main([*args, str(other)]) == 2
    assert "table 'runs' has columns ['x']" in capsys.readouterr().err
    assert main([*args, str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not out.exists()  # refused before the benchmark ran
