"""causal.cadre checkpoints: the architecture (hidden width) saved with the weights and built
from; old weights-only checkpoints still load; a contradicting config is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.checkpoints import save_checkpoint
from neuroedge.errors import ArtifactError, ConfigError
from neuroedge.models.cadre.module import CaDRe
from neuroedge.registry import get_model

TINY = {"steps": 2, "n": 32, "batch": 8, "jac_batch": 2, "hidden": 16}


def test_a_checkpoint_trained_at_another_width_builds_at_that_width(tmp_path: Path) -> None:
    spec = get_model("causal.cadre")
    out = tmp_path / "cadre.pt"
    spec.hook("train")(config=TINY, out=str(out))
    program = spec.build({"checkpoint": str(out)})
    assert program.meta["trained"] and program.meta["hidden"] == 16
    result = program.fn(**spec.example(0))
    assert result["graph"].shape == (4, 8, 8) and np.isfinite(result["graph"]).all()
    assert spec.build({"checkpoint": str(out), "hidden": 16}).meta["hidden"] == 16
    with pytest.raises(ConfigError, match=r"hidden=64 contradicts .* hidden=16"):
        spec.build({"checkpoint": str(out), "hidden": 64})


def test_old_weights_only_checkpoints_load_at_the_default_or_the_named_width(
    tmp_path: Path,
) -> None:
    spec = get_model("causal.cadre")
    default, narrow = tmp_path / "default.pt", tmp_path / "narrow.pt"
    save_checkpoint(default, {"state_dict": CaDRe(8, 2, 4).state_dict()})
    save_checkpoint(narrow, {"state_dict": CaDRe(8, 2, 4, 32).state_dict()})
    assert spec.build({"checkpoint": str(default)}).meta["hidden"] == 64
    program = spec.build({"checkpoint": str(narrow), "hidden": 32})
    assert program.meta["trained"] and program.meta["hidden"] == 32
    with pytest.raises(ArtifactError, match="do not fit CaDRe"):
        spec.build({"checkpoint": str(narrow)})


@pytest.mark.parametrize(
    "saved, match",
    [
        ({"dx": 8}, "lacks 'hidden'"),
        ({"hidden": "wide"}, r"hidden='wide': expected an integer in 1\.\.4096"),
        ({"hidden": 16, "dx": 5}, "dx=5, but causal.cadre is built with dx=8"),
    ],
)
def test_a_bad_saved_config_is_refused_naming_the_file(tmp_path: Path, saved, match) -> None:
    path = tmp_path / "bad.pt"
    state = CaDRe(8, 2, 4, 16).state_dict()
    save_checkpoint(path, {"state_dict": state, "config": saved})
    with pytest.raises(ArtifactError, match=match):
        get_model("causal.cadre").build({"checkpoint": str(path)})


def test_a_bad_hidden_and_smoke_builds() -> None:
    from neuroedge.models.cadre import spec as S
    from neuroedge.models.cadre import train as TR

    assert (S.HIDDEN, S.MAX_HIDDEN) == (TR.DEFAULTS["hidden"], TR.MAX_HIDDEN)
    spec = get_model("causal.cadre")
    with pytest.raises(ConfigError, match=r"hidden=0: expected an integer in 1\.\.4096"):
        spec.build({"smoke": True, "hidden": 0})
    program = spec.build({"smoke": True, "hidden": 8})
    assert not program.meta["trained"] and program.meta["hidden"] == 8
    x = torch.as_tensor(spec.example(0)["x"])
    assert program.fn(x.numpy(), spec.example(0)["domain"])["latents"].shape == (4, 2)
