"""mAP of event.bivision's detector against an independent reference and hand-derived values,
and the one box rule (clip to the sensor, drop under 3 px) for ground truth and detections.

The earlier mAP tests only produced 1, 0 or > 0.99, so map50 read from COCOeval's mAP@[.5:.95]
slot, detections on images without ground truth left out, or every score set to 1 all passed
(2026-12-07 audit); the partial-AP cases here fail each of those."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from neuroedge.models.bivision.detection import coco_map, sensor_map

TRUTH = [np.array([[10.0, 10, 10, 10]]), np.array([[30.0, 30, 8, 6], [0, 0, 5, 5]])]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    return iw * ih / (a[2] * a[3] + b[2] * b[3] - iw * ih)


def _ap(truth, found, threshold: float) -> float:
    """COCO's AP of one class at one IoU threshold, written from its definition: per image,
    detections in falling score order each take the best-overlapping unmatched box with IoU
    >= threshold (else a false positive, also on an image without boxes); over all images in
    falling score order, precision made non-increasing from the right and read at the 101
    recall points 0, 0.01, ..., 1 (0 past the last recall reached)."""
    hits = []
    for t, f in zip(truth, found):
        t, f = np.asarray(t, float).reshape(-1, 4), np.asarray(f, float).reshape(-1, 5)
        free = np.ones(len(t), bool)
        for d in f[np.argsort(-f[:, 4], kind="stable")][:100]:
            best, j = max(((_iou(d, g), k) for k, g in enumerate(t) if free[k]), default=(0, -1))
            if best >= threshold:
                free[j] = False
            hits.append((d[4], best >= threshold))
    if not hits:
        return 0.0
    tp = np.array([h for _, h in hits])[np.argsort(-np.array([s for s, _ in hits]), kind="stable")]
    recall = np.cumsum(tp) / sum(len(np.asarray(t).reshape(-1, 4)) for t in truth)
    precision = np.maximum.accumulate((np.cumsum(tp) / np.arange(1, len(tp) + 1))[::-1])[::-1]
    at = np.searchsorted(recall, np.linspace(0, 1, 101), side="left")
    return float(np.mean([precision[i] if i < len(tp) else 0.0 for i in at]))


def _reference(truth, found) -> dict[str, float]:
    thresholds = np.linspace(0.5, 0.95, 10)
    return {
        "map50": _ap(truth, found, 0.5),
        "map": float(np.mean([_ap(truth, found, t) for t in thresholds])),
    }


def _scored(boxes, scores) -> np.ndarray:
    return np.c_[np.asarray(boxes, float).reshape(-1, 4), scores]


CASES = {
    # image 0: a duplicate above the true hit -> order TP, FP, TP, TP
    "duplicate": (
        TRUTH,
        [_scored([[10, 10, 10, 10], [10, 10, 10, 10]], [0.95, 0.9]), _scored(TRUTH[1], [0.8, 0.7])],
    ),
    # IoUs 0.5625 (image 0), 0.778 and 0.667 (image 1), one false positive at 0.65
    "shifted": (
        TRUTH,
        [
            _scored([[12, 11, 10, 10]], [0.9]),
            _scored([[31, 30, 8, 6], [1, 0, 5, 5], [20, 20, 5, 5]], [0.6, 0.7, 0.65]),
        ],
    ),
    # the top-scored detection is on an image without ground truth: a false positive
    "image without boxes": (
        [*TRUTH, np.zeros((0, 4))],
        [_scored(TRUTH[0], [0.5]), _scored(TRUTH[1], [0.4, 0.3]), _scored([[1, 1, 5, 5]], [0.99])],
    ),
}


def _random_cases(n: int) -> dict[str, tuple]:
    rng, cases = np.random.default_rng(0), {}
    for k in range(n):
        truth, found = [], []
        for _ in range(5):
            m = int(rng.integers(0, 4))
            t = np.c_[rng.uniform(0, 50, (m, 2)), rng.uniform(4, 20, (m, 2))]
            noise = np.c_[rng.uniform(0, 50, (3, 2)), rng.uniform(4, 20, (3, 2))]
            near = t + rng.normal(0, 1.5, t.shape)
            truth.append(t)
            found.append(_scored(np.r_[noise, near], rng.uniform(0, 1, 3 + m)))
        cases[f"random{k}"] = (truth, found)
    return cases


@pytest.mark.parametrize(("truth", "found"), [*CASES.values(), *_random_cases(8).values()])
def test_map_matches_an_independent_coco_reference(truth, found) -> None:
    got, want = coco_map(truth, found), _reference(truth, found)
    assert 0.0 < want["map50"] < 1.0  # partial AP
    assert got == pytest.approx(want, abs=1e-9)


def test_partial_ap_values_derived_by_hand() -> None:
    """101-point interpolated AP, derived on paper (3 true boxes in every case):

    duplicate: TP, FP, TP, TP -> precision 1 up to recall 1/3, then max(2/3, 3/4) = 3/4:
    (34 x 1 + 67 x 0.75) / 101 (recall points 0..0.33 and 0.34..1); every IoU is 1, so map
    equals map50.
    shifted: at IoU 0.5 and 0.55 TP, TP, FP, TP -> (67 + 34 x 0.75) / 101 = 92.5 / 101; at
    0.6 and 0.65 the 0.5625 hit misses -> FP, TP, FP, TP, precision 1/2 up to recall 2/3 ->
    33.5 / 101; at 0.7 and 0.75 only the 0.778 hit counts -> FP, FP, FP, TP -> 34 x 0.25 /
    101 = 8.5 / 101; 0 above. map = 2 (92.5 + 33.5 + 8.5) / 1010 = 269 / 1010.
    image without boxes: FP, TP, TP, TP -> precision 3/4 at every recall: 0.75."""
    assert coco_map(*CASES["duplicate"])["map50"] == pytest.approx(84.25 / 101)
    assert coco_map(*CASES["duplicate"])["map"] == pytest.approx(84.25 / 101)
    assert coco_map(*CASES["shifted"]) == pytest.approx({"map50": 92.5 / 101, "map": 269 / 1010})
    assert coco_map(*CASES["image without boxes"])["map50"] == pytest.approx(0.75)


def test_one_box_rule_clips_to_the_sensor_and_drops_slivers() -> None:
    from neuroedge.events.generate import MIN_BOX_PIXELS, keep_boxes

    boxes = np.array(
        [
            [-2.0, 5, 6, 4, 0.9],  # clipped on the left to 4 x 4: kept
            [29.5, 1, 5, 10, 0.8],  # 2.5 px left on the sensor: dropped
            [1.25, 2.5, 3.0, 30.0, 0.7],  # inside: kept bit for bit
            [np.nan, 1, 5, 5, 0.6],  # not finite: dropped
            [3, 30, 4, 4, 0.5],  # 2 px high after clipping: dropped
        ]
    )
    kept = keep_boxes(boxes, 32, 32)
    np.testing.assert_array_equal(kept, [[0, 5, 4, 4, 0.9], [1.25, 2.5, 3, 29.5, 0.7]])
    assert MIN_BOX_PIXELS == 3.0 and keep_boxes([], 32, 32).shape == (0, 4)
    assert boxes[0, 0] == -2.0  # the caller's array is left as it was


def test_a_detected_edge_sliver_is_not_a_false_positive() -> None:
    """A car leaving the sensor whose ground-truth box the generator dropped (under 3 px after
    clipping) and a detector that still sees it: before the rule applied to detections too,
    that detection counted as a false positive ranked above the true hit."""
    truth = [np.array([[4.0, 4, 10, 8]])]
    found = [_scored([[30.5, 10, 6, 8], [4, 4, 10, 8]], [0.9, 0.8])]
    assert coco_map(truth, found)["map50"] == pytest.approx(0.5)  # FP, TP: precision 1/2
    assert sensor_map(truth, found, 32, 32) == pytest.approx({"map50": 1.0, "map": 1.0})


def test_generated_truth_and_scored_detections_go_through_the_same_rule(
    tmp_path, monkeypatch
) -> None:
    from neuroedge.events import generate
    from neuroedge.models.bivision import train
    from neuroedge.models.bivision.data import EventSet

    calls: list[int] = []
    real = generate.keep_boxes
    monkeypatch.setattr(generate, "keep_boxes", lambda b, w, h: calls.append(w) or real(b, w, h))
    cfg = generate.GeneratorConfig(width=24, height=24, seed=1)
    generate.make_gen1_like(tmp_path, {"test": 2}, cfg, progress=False)
    assert calls == [24, 24]  # once per recording
    calls.clear()
    maps = torch.full((1, 5, 8, 8), -9.0)
    # corner cell, score sigmoid(9): centre (31.9995, 31.9995), 4 x 4 -> 2 px on the sensor
    maps[0, :, 7, 7] = torch.tensor([9.0, 9.0, 9.0, 0.0, 0.0])
    # cell (2, 2), score sigmoid(8): centre (10, 10), 8 x 8 -> the true box
    maps[0, :, 2, 2] = torch.tensor([8.0, 0.0, 0.0, np.log(2), np.log(2)])
    x = np.zeros((1, 5, 2, 32, 32), np.float32)
    data = EventSet(x, np.zeros(1), [np.array([[6.0, 6, 8, 8]])])
    metrics = train.task_metrics(None, maps.numpy(), data, "detection")
    assert calls == [32, 32]  # truth and detections, at the inputs' sensor size
    assert metrics == pytest.approx({"map50": 1.0, "map": 1.0})  # was 0.5: FP, TP
