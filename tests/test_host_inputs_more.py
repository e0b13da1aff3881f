"""User inputs of the host methods that crashed or gave silent nonsense: a text file named as
a checkpoint, a series with only its time column or with constant or overflowing columns, a
small update far outside the generator's range, tokens with no mean direction, and a history
exemplar whose symptom no sandbox gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.errors import ArtifactError, InputError


def test_a_text_file_named_as_a_checkpoint_is_refused(tmp_path: Path) -> None:
    from neuroedge.checkpoints import load_checkpoint

    for name, data in (("text.pt", b"hello\n"), ("a.pt", b"a")):  # KeyError / IndexError
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ArtifactError, match=f"{name}: not a readable checkpoint .*text"):
            load_checkpoint(tmp_path / name)


def _series(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def test_a_series_needs_varying_variables(tmp_path: Path) -> None:
    from neuroedge.models.cadre.bench import _user_series

    only_time = _series(tmp_path / "t.csv", "t", [str(i) for i in range(40)])
    with pytest.raises(InputError, match="no variable columns"):
        _user_series({"series": str(only_time), "time_column": "t"})
    rows = [f"{i},{i * 1e305},{-i * 2e305},{i % 7}" for i in range(40)]
    huge = _series(tmp_path / "h.csv", "a,b,c,d", rows)
    with pytest.raises(InputError, match=r"columns \['b', 'c'\] are constant or their spread"):
        _user_series({"series": str(huge)})
    flat = _series(tmp_path / "f.csv", "a,b", [f"{i},3" for i in range(40)])
    with pytest.raises(InputError, match=r"columns \['b'\]"):
        _user_series({"series": str(flat)})
    short = _series(tmp_path / "s.csv", "a,b", ["1,2"])
    with pytest.raises(InputError, match="s.csv: 1 time steps; the model's windows need"):
        _user_series({"series": str(short)})


def test_a_series_bench_starts_from_its_seed(tmp_path: Path) -> None:
    from neuroedge.models.cadre import train as TR
    from neuroedge.models.cadre.bench import _cadre, _user_series

    rows = [f"{i},{np.sin(i)},{np.cos(i / 3)}" for i in range(40)]
    data, domains, _ = _user_series({"series": str(_series(tmp_path / "x.csv", "a,b,c", rows))})
    cfg = {**TR.DEFAULTS, "seed": 3}
    first, second = (_cadre(data, domains, cfg).state_dict() for _ in range(2))
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_an_update_far_outside_the_generators_range_is_refused() -> None:
    from neuroedge.models.grad_transformer.spec import build

    program = build({"smoke": True})
    with pytest.raises(ValueError, match="delta_small: row 0 lies .* standard deviations"):
        program.fn(np.full((1, 9), 1e20))  # all NaN before
    rows = np.stack([np.full(9, 0.01), np.full(9, 1e16), np.full(9, 1e25)])
    with pytest.raises(ValueError, match=r"row 1 lies [0-9.]+e\+1[6-9] standard"):
        program.fn(rows)  # the first row over the bound, with its own size
    assert np.isfinite(program.fn(np.full((1, 9), 0.01))["delta_large"]).all()


def test_tokens_without_a_mean_direction_are_refused() -> None:
    from neuroedge.models.lora_meanfield.functional import cluster_direction

    with pytest.raises(ValueError, match="the tokens' mean is the zero vector"):
        cluster_direction(np.array([[1.0, 0.0], [-1.0, 0.0]]))  # 0/0: NaN drift before
    assert np.allclose(cluster_direction(np.array([[1.0, 1.0], [1.0, 0.0]])), [0.894, 0.447], 1e-3)


def test_a_history_symptom_must_be_a_sandbox_label(tmp_path: Path) -> None:
    from neuroedge.models.conrad.__main__ import load_history
    from neuroedge.models.conrad.protocol import ConradError

    row = {
        "issue": "first_items returns one item short",
        "path": "shop.py",
        "buggy": "def f(x):\n    return x[:-1]\n",
        "fixed": "def f(x):\n    return x\n",
    }
    good = tmp_path / "good.jsonl"
    lines = [{**row, "symptom": s} for s in ("one_item_short", "exception:KeyError")]
    good.write_text("\n".join(json.dumps(r) for r in lines))
    assert [e.symptom for e in load_history(good)] == ["one_item_short", "exception:KeyError"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**row, "symptom": "banana"}))
    with pytest.raises(ConradError, match=r"bad.jsonl:1: symptom 'banana' is not a label"):
        load_history(bad)
