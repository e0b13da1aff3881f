"""halluc.freq_attention: a checkpoint whose LM sizes or detector do not hold together is
refused with an ArtifactError naming the file and the field; the bench refuses too few
training tokens for the detector before training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.models.freq_halluc import experiment as X
from neuroedge.models.freq_halluc import lm
from neuroedge.models.freq_halluc import spec as S
from neuroedge.models.freq_halluc.detector import Detector

NET = {"d_model": 16, "heads": 4, "layers": 2}
WIDTH = 2 * NET["layers"] * NET["heads"]  # ctx and new energy per layer and head


def payload() -> dict:
    """An untrained but well-formed checkpoint (no training: only its shape matters here)."""
    task = lm.RecallTask()
    torch.manual_seed(0)
    model = lm.RecallLM(task.vocab, task.length, **NET)
    det = Detector(np.zeros(WIDTH), np.ones(WIDTH), np.full(WIDTH, 0.1), 0.0, 0.5)
    return {
        "state_dict": model.state_dict(),
        "task": task.as_dict(),
        "net": dict(NET),
        "detector": det.to_payload(),
    }


def saved(tmp_path: Path, **changes) -> str:
    p = payload()
    for key, value in changes.items():
        part, _, field = key.partition("__")
        p[part] = {**p[part], field: value}
    path = tmp_path / "ck.pt"
    save_checkpoint(path, p)
    return str(path)


def test_a_well_formed_checkpoint_loads(tmp_path) -> None:
    model, task, det, path = S.load({"checkpoint": saved(tmp_path)})
    assert len(det.mean) == WIDTH and det.threshold == 0.5 and path.endswith("ck.pt")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"detector__coef": torch.zeros(5)}, r"detector coef: shape \[5\], expected \[16\]"),
        ({"detector__mean": torch.zeros(8)}, r"detector mean: shape \[8\], expected \[16\]"),
        ({"detector__scale": torch.zeros(WIDTH)}, r"detector scale: 0\.0 at feature 0"),
        ({"detector__scale": -torch.ones(WIDTH)}, r"detector scale: -1\.0 at feature 0"),
        (
            {"detector__mean": [0.0] * 15 + [float("inf")]},
            "detector mean: not finite at feature 15",
        ),
        ({"detector__threshold": 7.0}, r"detector threshold: 7\.0, expected a probability"),
        ({"detector__intercept": float("inf")}, "detector intercept: inf is not finite"),
        ({"detector__intercept": torch.zeros(2)}, "detector intercept: expected a number"),
        ({"net__d_model": -16}, r"net d_model=-16: expected an integer in \[1, 4096\]"),
        ({"net__heads": 0}, r"net heads=0: expected an integer"),
        ({"net__layers": 2.0}, r"net layers=2\.0: expected an integer"),
    ],
)
def test_a_malformed_checkpoint_is_refused_naming_file_and_field(
    tmp_path, changes, message
) -> None:
    path = saved(tmp_path, **changes)
    with pytest.raises(ArtifactError, match=rf"ck\.pt: not a halluc\.freq_attention .*{message}"):
        S.load({"checkpoint": path})


def test_too_few_training_tokens_for_the_detector_is_refused_naming_both_keys() -> None:
    with pytest.raises(ConfigError, match=r"train_sequences=10 x queries=1 = 10 training tokens"):
        X.check_config({**X.DEFAULTS, "train_sequences": 10, "queries": 1})
    X.check_config({**X.DEFAULTS, "train_sequences": 20, "queries": 1})  # 20 rows: enough


def test_the_bench_refuses_too_few_training_tokens_before_training(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(lm, "train_lm", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(ConfigError, match="train_sequences=12 x queries=1"):
        X.bench(
            out_dir=str(tmp_path),
            config={"train_sequences": 12, "queries": 1, "seeds": [0], "workers": 1},
        )
    assert list(tmp_path.iterdir()) == []
