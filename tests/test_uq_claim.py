"""uq.last_layer: the claim is not measured on fewer than 30 test rows (its Spearman and OOD
AUROC are read over them); a 12-row CSV (4 test rows) "held" with Spearman 1 and gap 0."""

from __future__ import annotations

from neuroedge.models.uq_last_layer import functional as F
from neuroedge.models.uq_last_layer.seed_claim import claim_over_seeds, claim_section
from neuroedge.types import Measurement, Report


def _rows(gap: float, test_rows: int) -> list[Report]:
    """One seed of one dataset ("d"), both tunings: Spearman 1, time ratio 700x."""
    rows = []
    for tuning in F.TUNINGS:
        for subset, auroc in (("last_layer", 0.7), ("full", 0.7 + gap)):
            metrics = {"ood_auroc": Measurement(auroc, "fraction")}
            rows.append(Report("uq.last_layer", "host", f"d/{tuning}/{subset}", metrics=metrics))
        compare = {
            "auroc_diff": Measurement(gap, "full-LL"),
            "spearman_var": Measurement(1.0, "rank corr"),
            "time_ratio": Measurement(700.0, "full/last-layer"),
            "test_rows": Measurement(test_rows, "rows", "counted"),
        }
        rows.append(Report("uq.last_layer", "host", f"d/{tuning}/compare", metrics=compare))
    return rows


def claim(test_rows: int, gap: float = 0.0) -> dict:
    return claim_over_seeds({s: _rows(gap, test_rows) for s in (3, 4)})


def test_claim_on_fewer_than_30_test_rows_is_not_measured():
    few = claim(4)
    for tuning in F.TUNINGS:
        cell = few["tunings"][tuning]["datasets"]["d"]
        assert cell["holds"] is None and cell["reason"] == "not measured (4 test rows < 30)"
        assert few["tunings"][tuning]["holds"] is None
    assert few["holds"] is None
    lines = "\n".join(claim_section(few))
    assert "- evidence: not all measured, none failed" in lines
    assert "| 700x (700x) | not measured (4 test rows < 30) |" in lines


def test_30_test_rows_are_enough_and_a_failing_gap_still_fails():
    assert claim(29)["holds"] is None
    assert claim(30)["holds"] is True
    assert claim(30, gap=0.2)["holds"] is False
