"""Detection targets, loss, decoding and COCO evaluation for the BiSNet detection head.

Head: CenterNet (Zhou et al. 2019, "Objects as Points"), chosen over SFOD's SSD priors because
it learns far faster from a few objects per frame on a CPU budget (one class, small grids, no
prior tuning, no anchor matching). Per cell of the stride-``s`` grid the head gives 5 channels:

* 0: centre heatmap logit. Target ``Y = exp(-(dx^2 / 2 sx^2 + dy^2 / 2 sy^2))`` around each
  box centre cell (the maximum over boxes), ``sx = max(w / (6 s), 0.5)`` (likewise ``sy``): an
  elliptical Gaussian as in TTFNet, so a 10x8-pixel car on a stride-4 grid spreads over its
  neighbouring cells instead of one. Loss: CenterNet's penalty-reduced focal loss
  ``-(1-p)^2 log p`` at centre cells and ``-(1-Y)^4 p^2 log(1-p)`` elsewhere, over the number
  of boxes.
* 1-2: centre offset within the cell (sigmoid), 3-4: ``log(w / s)``, ``log(h / s)``; L1 at the
  centre cells only (log sizes: relative errors, scale-free).

Decoding: sigmoid heatmap, local maxima by 3x3 max-pool (CenterNet's NMS replacement), the
``top_k`` peaks above ``min_score``. mAP@0.5 and COCO mAP@[.5:.95] come from pycocotools'
COCOeval.

Scoring (``sensor_map``): ground truth and detections both pass through
``neuroedge.events.generate.keep_boxes`` first, clipped to the sensor and dropped under 3 px,
the rule the generated ground truth was made with. Before, only the ground truth followed it,
so a correct detection of a car sliver at the sensor edge (whose box the ground truth drops)
counted as a false positive (2026-12-07 audit: STATNF + E2S map50 0.243 -> 0.263 with the
rule on both sides, LIF + histogram unchanged); Prophesee's Gen1 evaluation filters both sides
alike too.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

TARGET_CHANNELS = 6  # heatmap, dx, dy, log w/s, log h/s, centre mask


def make_targets(boxes: Sequence[np.ndarray], grid: int, stride: int) -> torch.Tensor:
    """(B, 6, grid, grid): [Gaussian heatmap, dx, dy, log w/s, log h/s, centre mask] per
    sample; ``boxes[b]`` is (n, 4) as x, y, w, h in pixels.

    A box whose centre lies off the grid (partly outside the sensor) is clamped to the
    nearest edge cell on either side, its offset target clipped to that cell's [0, 1] (the
    range of the head's sigmoid); a box with a NaN or infinite value raises ValueError."""
    target = torch.zeros(len(boxes), TARGET_CHANNELS, grid, grid)
    cells = torch.arange(grid, dtype=torch.float32)
    for b, table in enumerate(boxes):
        for k, (x, y, w, h) in enumerate(np.asarray(table, np.float64).reshape(-1, 4)):
            if not np.isfinite([x, y, w, h]).all():
                raise ValueError(
                    f"boxes[{b}][{k}] = {[x, y, w, h]} (x, y, w, h) has a non-finite value; "
                    "expected finite pixel coordinates"
                )
            cx, cy = (x + w / 2) / stride, (y + h / 2) / stride
            i, j = int(np.clip(np.floor(cy), 0, grid - 1)), int(np.clip(np.floor(cx), 0, grid - 1))
            sx, sy = max(w / (6 * stride), 0.5), max(h / (6 * stride), 0.5)
            bump = torch.exp(
                -(
                    (cells[None, :] - j) ** 2 / (2 * sx * sx)
                    + (cells[:, None] - i) ** 2 / (2 * sy * sy)
                )
            )
            target[b, 0] = torch.maximum(target[b, 0], bump)
            target[b, 1:, i, j] = torch.tensor(
                [
                    min(max(cx - j, 0.0), 1.0),
                    min(max(cy - i, 0.0), 1.0),
                    np.log(max(w, 1) / stride),
                    np.log(max(h, 1) / stride),
                    1.0,
                ]
            )
    return target


def detection_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Penalty-reduced focal loss on the heatmap + L1 on offsets and log sizes at centres."""
    centre = target[:, 5]
    prob = torch.sigmoid(pred[:, 0]).clamp(1e-4, 1 - 1e-4)
    pos = -((1 - prob) ** 2) * torch.log(prob) * centre
    neg = -((1 - target[:, 0]) ** 4) * prob**2 * torch.log(1 - prob) * (1 - centre)
    n_pos = centre.sum().clamp(min=1.0)
    box = F.l1_loss(torch.sigmoid(pred[:, 1:3]), target[:, 1:3], reduction="none").sum(
        1
    ) + F.l1_loss(pred[:, 3:5], target[:, 3:5], reduction="none").sum(1)
    return (pos.sum() + neg.sum() + (box * centre).sum()) / n_pos


def decode(
    pred: np.ndarray, stride: int, min_score: float = 0.01, top_k: int = 10
) -> list[np.ndarray]:
    """Per sample an (n, 5) array of x, y, w, h, score from (B, 5, G, G) head outputs."""
    t = torch.as_tensor(pred)
    score = torch.sigmoid(t[:, 0])
    peaks = score * (F.max_pool2d(score[:, None], 3, 1, 1)[:, 0] == score)
    grid = t.shape[-1]
    out = []
    for b in range(t.shape[0]):
        flat = peaks[b].flatten()
        keep = torch.nonzero(flat >= min_score).flatten()
        keep = keep[flat[keep].argsort(descending=True)][:top_k]
        i, j = keep // grid, keep % grid
        cx = (j + torch.sigmoid(t[b, 1, i, j])) * stride
        cy = (i + torch.sigmoid(t[b, 2, i, j])) * stride
        w, h = torch.exp(t[b, 3, i, j]) * stride, torch.exp(t[b, 4, i, j]) * stride
        out.append(torch.stack([cx - w / 2, cy - h / 2, w, h, flat[keep]], 1).double().numpy())
    return out


def coco_map(truth: Sequence[np.ndarray], found: Sequence[np.ndarray]) -> dict[str, float]:
    """``{"map50", "map"}`` from pycocotools for per-image ground truth (n, 4) and detections
    (n, 5) in x, y, w, h (+ score), one class."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if len(truth) != len(found):
        raise ValueError(f"{len(truth)} ground-truth images but {len(found)} detection lists")
    images = [{"id": i} for i in range(len(truth))]
    annotations = []
    for i, boxes in enumerate(truth):
        for box in np.asarray(boxes, np.float64).reshape(-1, 4):
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i,
                    "category_id": 1,
                    "bbox": [float(v) for v in box],
                    "iscrowd": 0,
                    "area": float(box[2] * box[3]),
                }
            )
    if not annotations:
        raise ValueError("no ground-truth boxes: mAP is undefined")
    results = [
        {
            "image_id": i,
            "category_id": 1,
            "bbox": [float(v) for v in box[:4]],
            "score": float(box[4]),
        }
        for i, boxes in enumerate(found)
        for box in boxes
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {
            "images": images,
            "annotations": annotations,
            "categories": [{"id": 1, "name": "car"}],
        }
        gt.createIndex()
        if not results:
            return {"map50": 0.0, "map": 0.0}
        evaluator = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return {
        "map50": max(float(evaluator.stats[1]), 0.0),
        "map": max(float(evaluator.stats[0]), 0.0),
    }


def sensor_map(
    truth: Sequence[np.ndarray], found: Sequence[np.ndarray], width: float, height: float
) -> dict[str, float]:
    """``coco_map`` on a ``width`` x ``height`` sensor, with ground truth and detections both
    clipped to the sensor and boxes under 3 px dropped (``keep_boxes``, one rule for both)."""
    from neuroedge.events.generate import keep_boxes

    return coco_map(
        [keep_boxes(t, width, height) for t in truth],
        [keep_boxes(f, width, height) for f in found],
    )
