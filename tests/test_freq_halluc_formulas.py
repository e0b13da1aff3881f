"""halluc.freq_attention formulas no other test pins: the decision threshold is the listed one
with the best validation macro-F1 (not a fixed 0.5), and each seed scores the detector on
contexts it was not fitted on."""

from __future__ import annotations

import dataclasses

import numpy as np
from neuroedge.models.freq_halluc import experiment as X
from neuroedge.models.freq_halluc.detector import VAL_FRACTION, evaluate, fit_detector
from neuroedge.types import Report


def macro_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean over the two classes of 2 TP / (2 TP + FP + FN), 0 for a class never seen nor
    predicted; written out here, not sklearn's."""
    out = []
    for cls in (True, False):
        tp = np.sum((pred == cls) & (y == cls))
        wrong = np.sum(pred != y)  # FP + FN of this class (two classes)
        out.append(2 * tp / (2 * tp + wrong) if 2 * tp + wrong else 0.0)
    return float(np.mean(out))


def tokens(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rare hallucinated tokens (8 %) shifted by 0.6 SD: p(hallucinated) rarely reaches 0.5,
    so the best macro-F1 threshold lies below it."""
    y = (rng.random(n) < 0.08).astype(int)
    return rng.normal(y[:, None] * 0.6, 1.0, (n, 3)), y


def test_the_threshold_is_the_listed_one_of_best_validation_macro_f1_not_0_5() -> None:
    from sklearn.model_selection import train_test_split

    rng = np.random.default_rng(0)
    x, y = tokens(rng, 2000)
    det = fit_detector(x, y, seed=0)
    # the documented protocol: a stratified 10 % (seeded) held out; thresholds 0, 0.1, ..., 1
    _, val = train_test_split(np.arange(len(y)), test_size=VAL_FRACTION, stratify=y, random_state=0)
    p = det.proba(x[val])
    grid = [i / 10 for i in range(11)]
    f1 = [macro_f1(y[val] == 1, p >= t) for t in grid]
    assert max(f1) > f1[5] + 0.01  # a case where 0.5 is clearly not the best
    assert det.threshold in grid and f1[grid.index(det.threshold)] == max(f1)  # 0.4 here
    # and on fresh tokens it beats the fixed 0.5 on macro-F1
    xt, yt = tokens(rng, 2000)
    fixed = dataclasses.replace(det, threshold=0.5)
    assert evaluate(det, xt, yt)["macro_f1"] > evaluate(fixed, xt, yt)["macro_f1"] + 0.02


def test_a_seed_scores_the_detector_on_contexts_other_than_its_training_ones(monkeypatch) -> None:
    cfg = X.check_config(
        {
            **X.DEFAULTS,
            "seed": 3,
            "steps": 1,
            "batch": 4,
            "d_model": 8,
            "heads": 1,
            "layers": 1,
            "train_sequences": 20,
            "test_sequences": 20,
        }
    )
    cfg["progress"] = False
    seen = {}

    def spy(model, task, train, test, seed):  # stands in for the fit and the scoring
        seen.update(train=train, test=test)
        return [], {}

    monkeypatch.setattr(X, "feature_rows", spy)
    # an LM one step in grounds no answer: no grounded tokens to average (not the point here)
    monkeypatch.setattr(X, "energy_row", lambda task, test: (Report(X.NAME, "host", "e"), {}))
    X.run_seed(cfg)
    train, test = (seen[k]["ids"] for k in ("train", "test"))
    ctx = 2 * cfg["pairs"] + 1  # BOS, key/value pairs: the context a query is answered from
    train_contexts = {tuple(row[:ctx]) for row in train}
    assert not any(tuple(row[:ctx]) in train_contexts for row in test)
