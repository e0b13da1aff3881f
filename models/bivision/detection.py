"""Detection targets, loss, decoding and COCO evaluation for the BiSNet detection head.

Head (decision: anchor-free, CenterNet-style, instead of SFOD's SSD priors: one class, small
grids, no prior tuning): per cell of the stride-``s`` grid, channel 0 is the objectness logit
(target 1 in the cell holding a box centre, focal-weighted BCE), channels 1-2 the centre offset
within the cell (sigmoid, L1), channels 3-4 ``log(w / s)`` and ``log(h / s)`` (L1). Decoding
keeps local maxima of objectness (3x3 max-pool suppression, then IoU NMS at 0.5) above
``min_score``. mAP@0.5 and COCO mAP@[.5:.95] come from pycocotools' COCOeval.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def make_targets(boxes: Sequence[np.ndarray], grid: int, stride: int) -> torch.Tensor:
    """(B, 6, grid, grid): [positive mask, dx, dy, log w/s, log h/s, unused] per sample;
    ``boxes[b]`` is (n, 4) as x, y, w, h in pixels."""
    target = torch.zeros(len(boxes), 6, grid, grid)
    for b, table in enumerate(boxes):
        for x, y, w, h in np.asarray(table, np.float64).reshape(-1, 4):
            cx, cy = (x + w / 2) / stride, (y + h / 2) / stride
            i, j = min(int(cy), grid - 1), min(int(cx), grid - 1)
            target[b, :5, i, j] = torch.tensor([1.0, cx - j, cy - i, np.log(max(w, 1) / stride),
                                                np.log(max(h, 1) / stride)])
    return target


def detection_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Focal BCE on objectness (alpha 0.9 for the rare positives, gamma 2) + L1 on boxes."""
    pos = target[:, 0]
    logit = pred[:, 0]
    prob = torch.sigmoid(logit)
    bce = F.binary_cross_entropy_with_logits(logit, pos, reduction="none")
    weight = torch.where(pos > 0, 0.9 * (1 - prob) ** 2, 0.1 * prob ** 2)
    n_pos = pos.sum().clamp(min=1.0)
    obj = (weight * bce).sum() / n_pos
    offsets = torch.sigmoid(pred[:, 1:3])
    box = (F.l1_loss(offsets, target[:, 1:3], reduction="none").sum(1)
           + F.l1_loss(pred[:, 3:5], target[:, 3:5], reduction="none").sum(1))
    return obj + (box * pos).sum() / n_pos


def decode(pred: np.ndarray, stride: int, min_score: float = 0.05,
           top_k: int = 20) -> list[np.ndarray]:
    """Per sample an (n, 5) array of x, y, w, h, score from (B, 5, G, G) head outputs."""
    t = torch.as_tensor(pred)
    score = torch.sigmoid(t[:, 0])
    peaks = score * (F.max_pool2d(score[:, None], 3, 1, 1)[:, 0] == score)
    out = []
    for b in range(t.shape[0]):
        flat = peaks[b].flatten()
        keep = torch.nonzero(flat >= min_score).flatten()
        keep = keep[flat[keep].argsort(descending=True)][:top_k]
        grid = t.shape[-1]
        i, j = keep // grid, keep % grid
        cx = (j + torch.sigmoid(t[b, 1, i, j])) * stride
        cy = (i + torch.sigmoid(t[b, 2, i, j])) * stride
        w, h = torch.exp(t[b, 3, i, j]) * stride, torch.exp(t[b, 4, i, j]) * stride
        boxes = torch.stack([cx - w / 2, cy - h / 2, w, h, flat[keep]], 1)
        out.append(_nms(boxes.numpy()))
    return out


def _nms(boxes: np.ndarray, iou: float = 0.5) -> np.ndarray:
    kept: list[np.ndarray] = []
    for box in boxes:  # already sorted by score
        if all(box_iou(box[:4], k[:4]) < iou for k in kept):
            kept.append(box)
    return np.array(kept, np.float64).reshape(-1, 5)


def box_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two x, y, w, h boxes."""
    ix = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = a[2] * a[3] + b[2] * b[3] - inter
    return float(inter / union) if union > 0 else 0.0


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
            annotations.append({"id": len(annotations) + 1, "image_id": i, "category_id": 1,
                                "bbox": [float(v) for v in box], "iscrowd": 0,
                                "area": float(box[2] * box[3])})
    if not annotations:
        raise ValueError("no ground-truth boxes: mAP is undefined")
    results = [{"image_id": i, "category_id": 1, "bbox": [float(v) for v in box[:4]],
                "score": float(box[4])} for i, boxes in enumerate(found) for box in boxes]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = {"images": images, "annotations": annotations,
                      "categories": [{"id": 1, "name": "car"}]}
        gt.createIndex()
        if not results:
            return {"map50": 0.0, "map": 0.0}
        evaluator = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return {"map50": max(float(evaluator.stats[1]), 0.0), "map": max(float(evaluator.stats[0]),
                                                                      0.0)}
