"""Config values of vla.specprune and ttt.linear_attention that passed the up-front checks and
then crashed (or ran silently wrong): pruning counts, thresholds and layers, a TTT block far
longer than the sequence, the chunked form's ONNX export, and the random baseline's parity."""

from __future__ import annotations

from dataclasses import replace

import pytest
from neuroedge.errors import ExportRefused
from neuroedge.models.specprune.functional import PruneConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"k_global": -2}, "k_global=-2: expected an integer >= 0"),  # argsort[:-2] before
        ({"budget_coarse": 40.5}, "budget_coarse=40.5"),
        ({"tau": -3.0}, r"tau=-3.0: expected a number in \[-1, 1\]"),
        ({"beta": 5.0}, r"beta=5.0: expected a number in \[0, 1\]"),
        ({"v_t_threshold": -1.0}, "v_t_threshold=-1.0: expected a number > 0"),
        ({"dynamic_layers": (0, 1)}, "expected decoder layer indices >= 3"),  # crashed
        ({"dynamic_layers": (2, 4)}, "expected decoder layer indices >= 3"),  # FLOPs miscounted
        ({"dynamic_layers": (3, 3)}, "a layer is listed twice"),
    ],
)
def test_prune_config_refuses_values_that_crashed_or_ran_wrong(fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        replace(PruneConfig(), **fields)


def test_candidates_are_named_and_checked_against_the_policy() -> None:
    from neuroedge.models.specprune.bench_variants import candidate_configs

    with pytest.raises(ValueError, match=r"candidate 1: tau=2"):
        candidate_configs([{"budget_fine": 56}, {"tau": 2}], PruneConfig())
    (config,) = candidate_configs([{"k_local_coarse": 100}], PruneConfig()).values()
    with pytest.raises(ValueError, match="k_local_coarse=100: more than the policy's 64"):
        config.check_geometry(64, 8)  # topk out of range inside the export before
    (late,) = candidate_configs([{"dynamic_layers": [3, 9]}], PruneConfig()).values()
    with pytest.raises(ValueError, match=r"dynamic_layers \[9\]: the policy has decoder layers"):
        late.check_geometry(64, 8)
    assert PruneConfig().check_geometry(64) == PruneConfig()  # defaults: no depth needed


def test_the_random_baseline_matches_the_host_on_its_own_example() -> None:
    """Its example prior was a 0/1 mask: top-k over ties, broken differently by ORT."""
    import neuroedge as ne

    config = {"smoke": True, "method": "random"}
    _, report = ne.deploy("vla.specprune", backend="onnxrt", config=config, repeats=1)
    assert report.metrics["within_tolerance"].value == 1


def test_the_chunked_form_is_not_exported_with_a_baked_length(tmp_path) -> None:
    from neuroedge.models.ttt.export import export_parallel_onnx
    from neuroedge.models.ttt.module import TTTLayer

    layer = TTTLayer(16, 2, 8, "v6", 1).eval()
    with pytest.raises(ExportRefused, match="form 'chunked'"):  # ran only at multiples of 64
        export_parallel_onnx(layer, tmp_path / "c.onnx", form="chunked")
