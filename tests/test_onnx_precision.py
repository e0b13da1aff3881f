"""Reduced-precision ONNX graphs for edge CPUs: `neuroedge export --precision fp16|int8`, the
onnxrt backend's `precision` option, their initial state, and what they refuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from neuroedge.cli import main  # noqa: E402
from neuroedge.registry import get_backend, get_model  # noqa: E402

NAME = "ttt.linear_attention"  # continuous outputs, a learned initial state, untrained weights


def _host(x: np.ndarray) -> np.ndarray:
    spec, host = get_model(NAME), get_backend("host")
    return host.run(host.compile(spec.build({}), spec), {"x": x})["y"]


@pytest.mark.parametrize(("precision", "bound"), [("fp16", 0.01), ("int8", 0.1)])
def test_exported_reduced_graph_runs_alone_at_any_t_close_to_the_host(
    tmp_path: Path, capsys, precision: str, bound: float
) -> None:
    out = tmp_path / f"ttt_{precision}.onnx"
    assert main(["export", NAME, "--precision", precision, "--out", str(out)]) == 0
    assert "state.npz" in capsys.readouterr().out
    with np.load(out.with_suffix(".state.npz")) as state:  # carried beside the new name
        assert state.files
    ort = get_backend("onnxrt")
    art = ort.load(out, get_model(NAME))
    assert art.meta["precision"] == precision and art.meta["form"] == "step"
    x = np.random.default_rng(1).standard_normal((7, 2, 32)).astype(np.float32)  # T=7: any T
    got, want = ort.run(art, {"x": x})["y"], _host(x)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert 0 < err <= bound, err  # reduced (not the fp32 graph), yet close


def test_onnxrt_precision_option_labels_rows_and_reports_parity() -> None:
    from neuroedge.api import deploy

    art, report = deploy(NAME, "onnxrt", options={"precision": "int8"})
    assert art.meta["precision"] == "int8" and report.variant == "int8"
    assert report.metrics["max_abs_err"].value > 0
    art, report = deploy(NAME, "onnxrt")
    assert art.meta["precision"] == "fp32" and report.variant == "default"


def test_unknown_precisions_are_refused_before_any_file_is_written(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.onnx"
    assert main(["export", NAME, "--precision", "int4", "--out", str(out)]) == 2
    assert "precision 'int4': expected one of fp32, fp16, int8" in capsys.readouterr().err
    assert main(["export", NAME, "--target", "nir", "--precision", "int8"]) == 2
    assert "'nir' exports are fp32" in capsys.readouterr().err
    assert main(["run", NAME, "--backend", "onnxrt", "--option", "precision=int4"]) == 2
    assert "option precision='int4': expected one of fp32, fp16, int8" in capsys.readouterr().err
    assert not out.exists()


def test_float_range_keeps_float32_so_specprune_exports_in_fp16(tmp_path: Path, capsys) -> None:
    # vla.specprune's position tables are Range over a float length: Range has no float16
    # form, so it runs in float32 between Casts (it was refused before).
    import json

    import onnx

    name, config = "vla.specprune", {"smoke": True}
    out = tmp_path / "v.onnx"
    assert (
        main(["export", name, "--config", "smoke=true", "--precision", "fp16", "--out", str(out)])
        == 0
    )
    assert "Traceback" not in capsys.readouterr().err
    record = {p.key: p.value for p in onnx.load(str(out)).metadata_props}["neuroedge.precision"]
    assert json.loads(record)["float32_ops"] >= 1
    spec, host, ort = get_model(name), get_backend("host"), get_backend("onnxrt")
    art = ort.load(out, spec)
    assert art.meta["precision"] == "fp16"
    model = host.compile(spec.build(config), spec)
    agreements = []
    for seed in range(5):
        x = spec.example(seed)
        got, want = ort.run(art, x), host.run(model, x)
        kept = want["scores"] != 0
        agreements.append(float(np.mean(kept == (got["scores"] != 0))))
        both = kept & (got["scores"] != 0)
        scale = float(np.abs(want["scores"]).max())
        assert float(np.abs(got["scores"] - want["scores"])[both].max()) <= 5e-2 * scale
        if agreements[-1] == 1.0:  # the same tokens kept: the actions follow closely
            err = float(np.abs(got["actions"] - want["actions"]).max())
            assert 0 < err <= 1e-2 * float(np.abs(want["actions"]).max()), (seed, err)
    # a score near the pruning cut can flip in float16 (seed 0: 4 of 128 tokens)
    assert np.mean(agreements) >= 0.95 and agreements.count(1.0) >= 3, agreements


def test_default_reduced_export_path_keeps_the_fp32_graph(tmp_path, monkeypatch) -> None:
    from neuroedge.api import export

    monkeypatch.chdir(tmp_path)
    fp32 = export(NAME, "onnx")
    int8 = export(NAME, "onnx", precision="int8")
    assert fp32.name == "model.onnx" and int8.name == "model.int8.onnx" and fp32.is_file()


def test_precision_bench_command_reports_errors_without_a_traceback(capsys) -> None:
    from neuroedge.bench.precision import main as precision_main

    assert precision_main(["--repeats", "0"]) == 2
    assert "repeats (0) must be >= 1" in capsys.readouterr().err
    assert precision_main(["--model", "causal.cadre"]) == 2
    assert "causal.cadre has no ONNX export" in capsys.readouterr().err
    assert precision_main(["--model", NAME, "--config", "bogus=1"]) == 2
    assert "does not read the config key 'bogus'" in capsys.readouterr().err
