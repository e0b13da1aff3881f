"""The token-level hallucination detector: logistic regression on attention features.

As in the authors' code: scikit-learn ``LogisticRegression`` on the training tokens less a
stratified 10% (seeded) on which the decision threshold is chosen as the one of {0, 0.1, ...,
1} with the best macro-F1. A choice made here, not the authors' (they fit on the raw
features): the features are standardised by the training tokens' means and standard
deviations first. Label 1 = hallucinated (the positive class; AUROC is the same either way).
The fitted detector is plain arrays, so a checkpoint holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

VAL_FRACTION = 0.1
MIN_ROWS = 20  # a stratified 10% then holds at least one token of each class
THRESHOLDS = np.round(np.linspace(0, 1, 11), 1)


@dataclass(frozen=True)
class Detector:
    mean: np.ndarray  # [F] feature means of the training tokens
    scale: np.ndarray  # [F] their standard deviations (1 where constant)
    coef: np.ndarray  # [F]
    intercept: float
    threshold: float

    def proba(self, x: np.ndarray) -> np.ndarray:
        """p(hallucinated) per row of ``x`` [n, F]."""
        x = check_features(x, len(self.mean))
        z = ((x - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.proba(x) >= self.threshold

    def to_payload(self) -> dict[str, Any]:
        import torch

        arrays = {k: torch.as_tensor(getattr(self, k)) for k in ("mean", "scale", "coef")}
        return {**arrays, "intercept": self.intercept, "threshold": self.threshold}

    @classmethod
    def from_payload(cls, payload: dict[str, Any], width: int | None = None) -> Detector:
        """``to_payload``'s dict back; ValueError naming the field that is missing, not a
        vector of ``width`` (when given; else mean's length) finite values, a scale not > 0, or
        a threshold outside [0, 1]: a stored detector is read, so it is checked as input."""
        if not isinstance(payload, dict):
            raise ValueError(f"detector: expected a dict, got the {type(payload).__name__}")
        missing = [
            k for k in ("mean", "scale", "coef", "intercept", "threshold") if k not in payload
        ]
        if missing:
            raise ValueError(f"detector: no {', '.join(missing)}")
        arrays = {k: np.asarray(payload[k], np.float64) for k in ("mean", "scale", "coef")}
        want = len(arrays["mean"]) if width is None and arrays["mean"].ndim == 1 else width
        for key, a in arrays.items():
            if a.ndim != 1 or len(a) == 0 or (want is not None and len(a) != want):
                raise ValueError(
                    f"detector {key}: shape {list(a.shape)}, expected [{want or 'features'}] "
                    "(one value per feature: 2 x layers x heads)"
                )
            if not np.isfinite(a).all():
                raise ValueError(f"detector {key}: not finite at feature {_first_bad(a)}")
        if (arrays["scale"] <= 0).any():
            raise ValueError(
                f"detector scale: {arrays['scale'].min()} at feature "
                f"{int(np.argmin(arrays['scale']))}; scales are standard deviations, > 0"
            )
        scalars = {k: np.asarray(payload[k], np.float64) for k in ("intercept", "threshold")}
        for key, a in scalars.items():
            if a.shape != ():
                raise ValueError(f"detector {key}: expected a number, got shape {list(a.shape)}")
        intercept, threshold = float(scalars["intercept"]), float(scalars["threshold"])
        if not np.isfinite(intercept):
            raise ValueError(f"detector intercept: {intercept} is not finite")
        if not 0 <= threshold <= 1:
            raise ValueError(f"detector threshold: {threshold}, expected a probability in [0, 1]")
        return cls(**arrays, intercept=intercept, threshold=threshold)


def _first_bad(a: np.ndarray) -> int:
    return int(np.flatnonzero(~np.isfinite(a))[0])


def check_features(x: Any, width: int | None = None) -> np.ndarray:
    """``x`` as float64 [n, F] (F = ``width`` when given), finite; ValueError naming the row."""
    from neuroedge.shapes import check_finite

    arr = np.asarray(x, np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or (width is not None and arr.shape[1] != width):
        want = f"[n >= 1, {width}]" if width is not None else "[n >= 1, features]"
        raise ValueError(f"features: expected shape {want}, got {list(arr.shape)}")
    return check_finite(arr, "features")


def check_labels(y: Any, n: int) -> np.ndarray:
    """``y`` as bool [n] from 0/1 labels with both classes present."""
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise ValueError(
            f"labels: expected shape [{n}] (one per feature row), got {list(arr.shape)}"
        )
    bad = np.flatnonzero((arr != 0) & (arr != 1))
    if bad.size:
        raise ValueError(f"labels row {bad[0]}: value {arr[bad[0]]!r} is not 0 or 1")
    if arr.min() == arr.max():
        raise ValueError(
            f"labels: all {n} rows are {int(arr[0])}; a detector needs hallucinated (1) and "
            "grounded (0) tokens"
        )
    return arr.astype(bool)


def fit_detector(x: Any, y: Any, seed: int = 0) -> Detector:
    """Fit on ``x`` [n, F] and labels ``y`` (1 = hallucinated) as described above."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.model_selection import train_test_split

    x = check_features(x)
    y = check_labels(y, len(x))
    if min(y.sum(), (~y).sum()) < 2:
        raise ValueError("labels: need at least 2 tokens of each class to hold some out")
    if len(x) < MIN_ROWS:
        raise ValueError(
            f"features: {len(x)} rows; need at least {MIN_ROWS} ({VAL_FRACTION:.0%} of them, "
            "one per class at least, are held out to choose the threshold)"
        )
    fit_i, val_i = train_test_split(
        np.arange(len(x)), test_size=VAL_FRACTION, stratify=y, random_state=seed
    )
    mean = x[fit_i].mean(0)
    scale = x[fit_i].std(0)
    scale[scale == 0] = 1.0
    clf = LogisticRegression(max_iter=1000).fit((x[fit_i] - mean) / scale, y[fit_i])
    det = Detector(mean, scale, clf.coef_[0].astype(np.float64), float(clf.intercept_[0]), 0.5)
    p_val = det.proba(x[val_i])
    scores = [f1_score(y[val_i], p_val >= t, average="macro", zero_division=0) for t in THRESHOLDS]
    return Detector(mean, scale, det.coef, det.intercept, float(THRESHOLDS[int(np.argmax(scores))]))


def evaluate(det: Detector, x: Any, y: Any) -> dict[str, float]:
    """AUROC of p(hallucinated), and macro precision / recall / F1 and accuracy at the
    detector's threshold, on held-out tokens."""
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score

    x = check_features(x, len(det.mean))
    y = check_labels(y, len(x))
    p = det.proba(x)
    pred = p >= det.threshold
    prec, rec, f1, _ = precision_recall_fscore_support(y, pred, average="macro", zero_division=0)
    return {
        "auroc": float(roc_auc_score(y, p)),
        "macro_f1": float(f1),
        "macro_precision": float(prec),
        "macro_recall": float(rec),
        "accuracy": float(accuracy_score(y, pred)),
    }
