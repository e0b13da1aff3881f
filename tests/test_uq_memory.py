"""uq.last_layer: a dataset whose full GLM (dense P x P GGN) would not fit is refused before
anything is trained, naming P and the memory estimate."""

from __future__ import annotations

import numpy as np
import pytest
from neuroedge.errors import ConfigError
from neuroedge.models.uq_last_layer import experiment
from neuroedge.models.uq_last_layer.data import DATASETS, _raw, check_datasets
from neuroedge.models.uq_last_layer.functional import make_mlp


def test_wide_csv_is_refused_before_training_naming_p_and_the_estimate(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((12, 3000))
    path = tmp_path / "wide.csv"
    np.savetxt(path, np.c_[x, np.arange(12) % 2], delimiter=",", fmt="%.3f")
    trained = []
    monkeypatch.setattr(experiment, "compare_dataset", lambda name, cfg: trained.append(name))
    config = {"datasets": [f"{path}:classification"], "rmt_sizes": []}
    with pytest.raises(ConfigError) as err:
        experiment.bench(str(tmp_path / "out"), config=config)
    text = str(err.value)
    assert "wide.csv:classification" in text and "3000 feature columns" in text
    assert "P=48,322 parameters" in text and "7 x 48,322^2 x 8 bytes = 121.8 GiB" in text
    assert "4 GiB cap" in text and "hidden_classification" in text
    assert trained == []


def test_parameter_count_is_the_networks(tmp_path):
    from neuroedge.models.uq_last_layer import memory

    net = make_mlp(30, 16, 2, 0)
    assert memory.full_parameter_count(30, 16, 2) == sum(p.numel() for p in net.parameters())


def test_builtin_shapes_match_the_loaders_and_the_defaults_fit():
    from neuroedge.models.uq_last_layer import memory

    for name in DATASETS:
        x, y, task = _raw(name, 0, 50)
        rows, d, outputs = memory.SHAPES[name]
        assert (rows or 50, d) == x.shape
        assert outputs == (1 if task == "regression" else int(y.max()) + 1)
    hidden = {"regression": 32, "classification": 16}
    assert len(check_datasets(list(DATASETS), hidden=hidden)) == len(DATASETS)
    with pytest.raises(ConfigError, match=r"'digits': 64 feature columns .* P=17,088,522"):
        check_datasets(["digits"], hidden={**hidden, "classification": 4096})
