"""Bench plumbing found by the 2026-12-05 audit: NaN parity, profile's example, the history
check, half-precision SOP sums and the timing arguments. Each failed on the code before."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.bench import history as H
from neuroedge.bench.energy import EnergyModel
from neuroedge.bench.latency import Latency, measure_side_by_side
from neuroedge.bench.parity import compare
from neuroedge.bench.runner import check_parity
from neuroedge.bench.sops import OpCounter
from neuroedge.errors import ArtifactError
from neuroedge.registry import get_model


def test_a_nan_output_is_an_infinite_error_not_a_pass() -> None:
    spec = get_model("snn.lif_convnet")
    ref = {"logits": np.ones(3), "spikes": np.array([1.0, 0.0])}
    got = {"logits": np.array([np.nan, 1.0, 1.0]), "spikes": np.array([1.0, 0.0])}
    metrics, notes = check_parity(spec, "onnxrt", "default", ref, got)
    assert metrics["max_abs_err"].value == math.inf
    assert metrics["within_tolerance"].value == 0.0
    assert any("exceeds" in n for n in notes)
    both_nan = compare({"y": np.array([np.nan])}, {"y": np.array([np.nan])})
    assert both_nan["max_abs_err"].value == math.inf  # a NaN reference passes nothing either


def test_silent_spike_trains_get_a_note() -> None:
    spec = get_model("snn.lif_convnet")
    zeros = {"spikes": np.zeros((4, 3))}
    _, notes = check_parity(spec, "onnxrt", "default", zeros, zeros)
    assert any("no spikes in spikes on either side" in n for n in notes)


def test_profile_uses_the_config_the_artifact_was_deployed_with() -> None:
    import neuroedge as ne

    config = {"d_model": 64, "heads": 4, "head_dim": 16, "smoke": True}
    art, _ = ne.deploy("ttt.linear_attention", config=config)
    assert ne.profile(art, repeats=3).metrics["latency_p50_ms"].value > 0


def test_a_refused_history_is_left_as_it_was(tmp_path: Path) -> None:
    for name, table in (("foreign.sqlite", "robots(id int)"), ("old.sqlite", "runs(id int)")):
        path = tmp_path / name
        with sqlite3.connect(path) as db:
            db.execute(f"create table {table}")
        with pytest.raises(ArtifactError, match=name):
            H.check(path)
        with sqlite3.connect(path) as db:
            tables = [r[0] for r in db.execute("select name from sqlite_master")]
        assert tables == [table.split("(")[0]]


def test_a_history_that_cannot_be_written_fails_the_check(tmp_path, monkeypatch) -> None:
    path = H.check(tmp_path / "h.sqlite")  # made writable first
    connect = sqlite3.connect
    monkeypatch.setattr(
        H.sqlite3, "connect", lambda p, *a, **k: connect(f"file:{p}?mode=ro", uri=True)
    )
    with pytest.raises(ArtifactError, match="h.sqlite: cannot be written"):
        H.check(path)
    monkeypatch.undo()
    assert H.runs(path) == []  # the trial row was rolled back


def test_half_precision_spike_counts_keep_growing() -> None:
    for dtype in (torch.bfloat16, torch.float16):
        lin = torch.nn.Linear(4, 4).to(dtype)
        with OpCounter(lin) as counter, torch.no_grad():
            for _ in range(3000):
                lin(torch.ones(1, 4, dtype=dtype))
        assert counter.totals(1).sops_per_sample == 3000 * 16


def test_timing_and_energy_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="block must be >= 1"):
        measure_side_by_side({"f": lambda: None}, repeats=3, block=0)
    assert Latency((0.0,)).metrics()["throughput_per_s"].value == math.inf
    with pytest.raises(ValueError, match="finite and >= 0"):
        EnergyModel(e_mac_pj=float("nan"))


OPTION_CASES = (
    ("onnxrt", {"provider": "CUDAExecutionProvider"}, "no option 'provider'; its options"),
    ("onnxrt", {"threads": "abc"}, "threads='abc': expected an integer >= 1"),
    ("onnxrt", {"threads": -3}, "threads=-3: expected an integer >= 1"),
    ("host", {"variant": "x"}, "backend 'host' has no option 'variant'; its options: none"),
    ("lava", {"varient": "fixed_pt"}, "no option 'varient'"),
    ("lava", {"config": "bogus"}, "config='bogus': expected 'hw' or 'sim'"),
    ("lava", {"chips": "abc"}, "chips='abc': expected an integer >= 1"),
    ("lava", {"input_scale": "abc"}, "input_scale='abc': expected a number"),
)


@pytest.mark.parametrize("backend", ["onnxrt", "host", "lava"])
def test_backend_options_are_checked_and_the_variant_is_reported(backend, require) -> None:
    import neuroedge as ne
    from neuroedge.errors import ConfigError

    if backend == "lava":
        require("lava")  # deploy probes first: without lava every case is "not available"
    for name, options, match in OPTION_CASES:
        if name != backend:
            continue
        with pytest.raises(ConfigError, match=match):
            ne.deploy("snn.lif_convnet", backend=backend, config={"smoke": True}, options=options)
    if backend == "lava":
        _, report = ne.deploy(
            "snn.lif_convnet", "lava", config={"smoke": True}, options={"variant": "fixed_pt"}
        )
        assert report.variant == "fixed_pt"


def test_lava_refuses_an_empty_time_axis(require) -> None:
    require("lava")
    import neuroedge as ne
    from neuroedge.registry import get_backend

    art, _ = ne.deploy("snn.lif_convnet", "lava", config={"smoke": True})
    with pytest.raises(ValueError, match=r"got shape \[0, 1, 1, 8, 8\]: axis 0 \(T\) is empty"):
        get_backend("lava").run(art, {"x": np.zeros((0, 1, 1, 8, 8), np.float32)})


def test_onnxrt_wrong_width_and_a_bad_seed_are_clear(tmp_path) -> None:
    import neuroedge as ne
    from neuroedge.models.bivision import spec as bivision
    from neuroedge.registry import get_backend

    config = {"smoke": True}
    art, _ = ne.deploy("ttt.linear_attention", "onnxrt", config=config)
    x = ne.registry.get_model("ttt.linear_attention").example_for(0, config)["x"]
    narrow = {"x": np.ascontiguousarray(x[..., :-1])}
    with pytest.raises(ValueError, match=r"axis 2 \(d_model\) is 31 but the built model fixed"):
        get_backend("onnxrt").run(art, narrow)  # compiled here: the width is known up front
    loaded = get_backend("onnxrt").load(art.path, art.spec)  # a bare .onnx: the graph says
    with pytest.raises(ValueError, match=r"do not fit the graph's"):
        get_backend("onnxrt").run(loaded, narrow)
    with pytest.raises(ValueError, match="seed='abc': expected an integer in 0..4294967295"):
        bivision.build({"smoke": True, "seed": "abc"})


def test_a_report_keeps_its_tables_columns_for_the_console(tmp_path: Path) -> None:
    from neuroedge.bench.report import text_table, write_report

    rows = [
        {
            "variant": "a",
            "backend": "host",
            "metrics": {"tokens": {"value": 3, "unit": "", "how": "m"}},
        }
    ]
    doc = {"model": "m", "created": "now", "machine": "here", "rows": rows}
    write_report(doc, tmp_path, columns=["tokens"])  # a bench that keeps no columns in doc
    assert doc["columns"] == ["tokens"]  # the console printed variant and backend only
    assert json.loads((tmp_path / "report.json").read_text())["columns"] == ["tokens"]
    header = text_table(doc, doc["columns"]).splitlines()[0].split()
    assert header == ["variant", "backend", "tokens"]
