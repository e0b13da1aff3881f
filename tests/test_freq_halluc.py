"""halluc.freq_attention: the band features against direct formulas, the recall LM's labels and
teacher forcing, the detector, and the trained detector end to end (the claim on one seed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroedge.models.freq_halluc import functional as F
from neuroedge.models.freq_halluc import lm
from neuroedge.models.freq_halluc.detector import THRESHOLDS, evaluate, fit_detector


def direct_band(row: np.ndarray, cutoff: float, high: bool) -> float:
    """The band part of ``row`` summed bin by bin from the DFT definition; its L2 norm."""
    n = len(row)
    t = np.arange(n)
    out = np.zeros(n, complex)
    for k in range(n):
        f = min(k, n - k) / n  # |frequency| of bin k in cycles per sample
        if (f >= cutoff) == high:
            xk = np.sum(row * np.exp(-2j * np.pi * k * t / n))
            out += xk * np.exp(2j * np.pi * k * t / n) / n
    return float(np.linalg.norm(out.real))


@pytest.mark.parametrize("n", [1, 2, 9, 17, 30])
def test_band_energies_equal_the_direct_dft(n: int) -> None:
    rows = np.random.default_rng(n).random((3, n))
    for i, row in enumerate(rows):
        assert F.band_energy(rows, "high", 0.45)[i] == pytest.approx(direct_band(row, 0.45, True))
        assert F.band_energy(rows, "low", 0.05)[i] == pytest.approx(direct_band(row, 0.05, False))
        conv = np.convolve(np.pad(row, 1), [1, -2, 1], "valid")
        assert F.laplacian_energy(rows)[i] == pytest.approx(np.linalg.norm(conv))


def test_a_flat_row_has_no_high_band_and_an_alternating_one_is_all_high_band() -> None:
    flat, alternating = np.full(16, 1 / 16), np.tile([1 / 8, 0.0], 8)
    assert F.band_energy(flat, "high", 0.45) == pytest.approx(0, abs=1e-15)
    # alternating = mean + (1/16) cos(pi t): the Nyquist part has norm 1/16 * sqrt(16)
    assert F.band_energy(alternating, "high", 0.45) == pytest.approx(0.25)
    assert F.band_energy(alternating, "low", 0.05) == pytest.approx(np.linalg.norm(flat))


def causal_attention(rng: np.random.Generator, layers: int, heads: int, t: int) -> list:
    out = []
    for _ in range(layers):
        scores = rng.standard_normal((heads, t, t)) * 3
        scores[:, np.triu(np.ones((t, t), bool), 1)] = -np.inf
        e = np.exp(scores - scores.max(-1, keepdims=True))
        out.append(e / e.sum(-1, keepdims=True))
    return out


def test_features_split_each_row_at_the_context_and_stop_at_the_emitting_position() -> None:
    rng = np.random.default_rng(0)
    att = causal_attention(rng, 2, 3, 12)
    ctx_len, positions = 5, [4, 7, 11]
    feats = F.attention_features(att, ctx_len, positions)  # [1, 3, 2 * 2 * 3]
    names = F.columns("fourier_hf", 2, 3)
    assert feats.shape == (1, 3, len(names)) and names[0] == "ctx/L0H0"
    for j, p in enumerate(positions):
        for layer in range(2):
            for head in range(3):
                row = att[layer][head, p, : p + 1]
                c = layer * 3 + head
                assert feats[0, j, c] == pytest.approx(direct_band(row[:ctx_len], 0.45, True))
                new = direct_band(row[ctx_len:], 0.45, True) if p >= ctx_len else 0.0
                assert feats[0, j, 6 + c] == pytest.approx(new)
    lookback = F.attention_features(att, ctx_len, positions, "lookback")
    p = positions[1]
    expect = att[1][2, p, :ctx_len].sum() / att[1][2, p, : p + 1].sum()
    assert lookback[0, 1, 5] == pytest.approx(expect)


def test_hugging_face_style_tensors_give_the_numpy_features() -> None:
    att = causal_attention(np.random.default_rng(1), 2, 2, 10)
    as_tensors = tuple(torch.as_tensor(a, dtype=torch.float32)[None] for a in att)
    for feature in F.FEATURES:
        a = F.attention_features(att, 4, [5, 9], feature)
        b = F.attention_features(as_tensors, 4, [5, 9], feature)
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_labels_mark_a_pair_missing_from_the_context() -> None:
    task = lm.RecallTask(keys=4, values=4, pairs=2, queries=2)
    k, v = 0, task.keys  # key ids 0..3, value ids 4..7
    ctx = [task.bos, k + 1, v + 2, k + 3, v + 0, task.sep]
    ids = np.array(
        [
            ctx + [task.q, k + 1, v + 2, task.q, k + 3, v + 1],  # right; wrong value
            ctx + [task.q, k + 2, v + 2, task.q, k + 3, v + 0],  # absent key; right
        ]
    )
    assert ids.shape[1] == task.length
    np.testing.assert_array_equal(lm.unsupported(task, ids), [[False, True], [True, False]])


def test_sampled_sequences_answer_present_keys_from_the_context() -> None:
    task = lm.RecallTask()
    ids, present = lm.sample_sequences(task, np.random.default_rng(3), 200, 0.5)
    labels = lm.unsupported(task, ids)
    assert not labels[present].any() and labels[~present].all()
    assert 0.4 < present.mean() < 0.6


def test_teacher_forced_rows_are_the_rows_seen_while_generating() -> None:
    task = lm.RecallTask()
    torch.manual_seed(0)
    model = lm.RecallLM(task.vocab, task.length, 16, 2, 2).eval()
    ids, _ = lm.sample_sequences(task, np.random.default_rng(0), 3, 0.5)
    greedy = lm.generate(model, task, ids, 0.0, seed=0)
    pos = task.value_positions()
    changed = np.flatnonzero((greedy != ids).any(0))
    assert set(changed) <= set(pos)
    full = lm.attention_rows(model, greedy)
    with torch.no_grad():
        for p in pos - 1:
            logits, step = model(torch.as_tensor(greedy[:, : p + 1]))
            np.testing.assert_array_equal(
                greedy[:, p + 1], task.keys + logits[:, -1, task.keys : task.sep].argmax(-1)
            )
            for layer in range(2):
                np.testing.assert_allclose(full[layer][:, :, p, : p + 1], step[layer][:, :, -1])


def test_the_detector_separates_separable_tokens_and_picks_a_listed_threshold() -> None:
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.4
    x = rng.standard_normal((400, 5)) + 4.0 * y[:, None] * np.array([1, 0, 0, 0, 0])
    det = fit_detector(x, y.astype(int), seed=0)
    assert det.threshold in THRESHOLDS
    scores = evaluate(det, x, y.astype(int))
    assert scores["auroc"] > 0.99 and scores["macro_f1"] > 0.95
    shuffled = evaluate(det, x, rng.permutation(y).astype(int))
    assert shuffled["auroc"] < 0.65


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from neuroedge.models.freq_halluc.spec import train

    path = tmp_path_factory.mktemp("halluc") / "detector.pt"
    return path, train({"train_sequences": 300, "test_sequences": 300}, str(path))


def test_the_trained_detector_flags_answers_to_absent_keys(trained: tuple[Path, dict]) -> None:
    import neuroedge as ne
    from neuroedge.models.freq_halluc.spec import LENGTH, QUERIES

    path, scores = trained
    assert scores["auroc"] >= 0.8, scores  # on the model's own answers, held out
    task = lm.RecallTask()
    assert (task.length, task.queries) == (LENGTH, QUERIES)
    program = ne.model("halluc.freq_attention").build({"checkpoint": str(path)})
    ids, present = lm.sample_sequences(task, np.random.default_rng(99), 150, 0.5)
    out = program.fn(ids)
    from sklearn.metrics import roc_auc_score

    assert out["p_hallucinated"].shape == (150, QUERIES)
    assert roc_auc_score(~present.reshape(-1), out["p_hallucinated"].reshape(-1)) >= 0.8
    assert set(np.unique(out["hallucinated"])) <= {0, 1}


def test_bench_one_seed_meets_the_notes_claim(tmp_path: Path) -> None:
    from neuroedge.models.freq_halluc.experiment import bench

    doc = bench(str(tmp_path), config={"seed": 0, "train_sequences": 300, "test_sequences": 300})
    claim = doc["claim"]
    assert claim["seeds"] == [0] and claim["holds"], claim
    rows = {r["variant"]: r["metrics"] for r in doc["rows"]}
    assert set(rows) == {*F.FEATURES, "lm", "energy"}
    assert rows["lm"]["present_key_accuracy"]["value"] > 0.95
    assert rows["fourier_hf"]["auroc"]["value"] > rows["lookback"]["auroc"]["value"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["claim"]["auroc_hf"] == claim["auroc_hf"]
    assert (tmp_path / "detection.png").stat().st_size > 10_000
    assert "## Claim over seeds [0]: holds" in (tmp_path / "report.md").read_text()


def test_too_few_rows_a_text_cutoff_and_text_attentions_are_named() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"features: 10 rows; need at least 20"):
        fit_detector(rng.normal(size=(10, 4)), np.array([0, 1] * 5))
    att = causal_attention(rng, 1, 2, 8)
    with pytest.raises(ValueError, match=r"cutoff 'x': expected a frequency in \(0, 0.5\]"):
        F.attention_features(att, 3, [4], cutoff="x")
    with pytest.raises(ValueError, match=r"attentions layer 0: not an array of numbers"):
        F.attention_features(["ab"], 3, [4])
