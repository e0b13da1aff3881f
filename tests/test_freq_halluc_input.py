"""halluc.freq_attention: bad input is refused with a typed error naming the problem.

Attention weights are softmax of random scores under a causal mask; the LM is never trained.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from neuroedge.errors import ConfigError
from neuroedge.models.freq_halluc import experiment as X
from neuroedge.models.freq_halluc import lm
from neuroedge.models.freq_halluc.detector import Detector, evaluate, fit_detector
from neuroedge.models.freq_halluc.functional import FEATURES, as_layers, attention_features
from neuroedge.models.freq_halluc.spec import check_ids

LAYERS, HEADS, T, CTX = 2, 3, 8, 3


def causal_softmax(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Softmax over the last axis of random scores with a causal mask: rows sum to 1."""
    scores = np.random.default_rng(seed).normal(size=shape) * 2
    t = shape[-1]
    scores[..., np.triu(np.ones((t, t), bool), 1)] = -np.inf
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layers3(seed: int = 0) -> list[np.ndarray]:
    """LAYERS arrays [HEADS, T, T] (one sequence)."""
    return list(causal_softmax((LAYERS, HEADS, T, T), seed))


# functional: valid input
def test_valid_attentions_give_features_of_the_documented_shape():
    out = attention_features(layers3(), CTX, [2, 5, 7])
    assert out.shape == (1, 3, 2 * LAYERS * HEADS)
    assert np.isfinite(out).all() and (out >= 0).all()
    assert attention_features(layers3(), CTX, [2], "lookback").shape == (1, 1, LAYERS * HEADS)
    got = attention_features(layers3(), np.int64(CTX), np.array([2, 5, 7]))  # numpy ints
    np.testing.assert_array_equal(got, out)


@pytest.mark.parametrize("feature", FEATURES)
def test_hugging_face_tensor_tuple_gives_the_numpy_features(feature):
    arrays = layers3(seed=3)
    want = attention_features(arrays, CTX, [2, 4, 7], feature)
    hf32 = tuple(torch.tensor(a[None], dtype=torch.float32) for a in arrays)  # [1, H, T, T]
    got32 = attention_features(hf32, CTX, [2, 4, 7], feature)
    assert got32.shape == want.shape == (1, 3, want.shape[-1])
    np.testing.assert_allclose(got32, want, rtol=1e-5, atol=1e-6)
    hf64 = tuple(torch.tensor(a[None], requires_grad=True) for a in arrays)
    np.testing.assert_array_equal(attention_features(hf64, CTX, [2, 4, 7], feature), want)
    assert all(a.dtype == np.float64 and a.shape == (1, HEADS, T, T) for a in as_layers(hf32))


def test_a_batch_gives_each_sequence_its_own_features():
    batch = causal_softmax((LAYERS, 2, HEADS, T, T), seed=5)  # [L, batch, H, T, T]
    both = attention_features(list(batch), CTX, [3, 6])
    for b in range(2):
        one = attention_features([layer[b] for layer in batch], CTX, [3, 6])
        np.testing.assert_array_equal(both[b], one[0])


# functional: attention rows
def test_raw_scores_are_refused_naming_layer_sequence_head_and_row():
    a = layers3()
    a[1][2, 5, :6] = np.random.default_rng(1).normal(size=6)  # scores, some negative
    msg = r"layer 1, sequence 0, head 2, row 5 has a negative or non-finite weight: expected attention probabilities \(softmax output, causal\), not scores"  # noqa: E501
    with pytest.raises(ValueError, match=msg):
        attention_features(a, CTX, [5])


def test_rows_not_summing_to_one_name_the_sum_and_where():
    a = layers3()
    a[0][1, 4, :5] *= 2
    msg = r"attentions layer 0, sequence 0, head 1, row 4 sums to 2 over positions 0\.\.4"
    with pytest.raises(ValueError, match=msg):
        attention_features(a, CTX, [4])
    assert attention_features(a, CTX, [3, 7]).shape == (1, 2, 2 * LAYERS * HEADS)  # row 4 unused


def test_a_bad_row_in_a_later_sequence_names_that_sequence():
    batch = list(causal_softmax((LAYERS, 3, HEADS, T, T), seed=2))
    batch[1][2, 0, 6, :7] *= 0.5
    with pytest.raises(ValueError, match=r"layer 1, sequence 2, head 0, row 6 sums to 0\.5"):
        attention_features(batch, CTX, [6])


def test_full_bidirectional_softmax_is_not_causal_and_is_refused():
    s = np.exp(np.random.default_rng(4).normal(size=(HEADS, T, T)))
    s /= s.sum(-1, keepdims=True)  # rows sum to 1 over all T, not over 0..p
    with pytest.raises(ValueError, match=r"layer 0, sequence 0, head 0, row 4 sums to"):
        attention_features([s], CTX, [4])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -0.25])
def test_nan_inf_or_negative_weights_are_refused(bad):
    a = layers3()
    a[1][0, 3, 1] = bad
    with pytest.raises(ValueError, match=r"layer 1, sequence 0, head 0, row 3 has a negative"):
        attention_features(a, CTX, [3])


# functional: layer shapes
def test_layers_of_different_shapes_are_refused():
    a = layers3()
    a[1] = causal_softmax((HEADS, T - 2, T - 2))
    msg = r"attentions layer 1: shape \[1, 3, 6, 6\] differs from layer 0's \[1, 3, 8, 8\]"
    with pytest.raises(ValueError, match=msg):
        as_layers(a)
    a[1] = causal_softmax((HEADS + 1, T, T))
    with pytest.raises(ValueError, match=r"layer 1: shape \[1, 4, 8, 8\] differs"):
        attention_features(a, CTX, [4])


@pytest.mark.parametrize(
    "shape",
    [(HEADS, T, T - 1), (T, T), (HEADS, 1, 1), (1, 1, HEADS, T, T), (T,)],
    ids=["non-square", "2-D", "T=1", "5-D", "1-D"],
)
def test_a_layer_of_the_wrong_rank_or_shape_is_refused_with_its_shape(shape):
    bad = np.full(shape, 1.0 / shape[-1])
    want = rf"attentions layer 1: expected \[batch, heads, T, T\] or \[heads, T, T\] with T >= 2, got shape \[{', '.join(map(str, shape))}\]"  # noqa: E501
    with pytest.raises(ValueError, match=want):
        as_layers([layers3()[0], bad])


def test_a_bare_2d_array_is_refused_as_layer_0():
    with pytest.raises(ValueError, match=r"attentions layer 0: expected .* got shape \[8, 8\]"):
        attention_features(np.eye(T), CTX, [4])


@pytest.mark.parametrize("empty", [[], ()])
def test_no_layers_is_refused(empty):
    with pytest.raises(ValueError, match=r"attentions: no layers given"):
        attention_features(empty, CTX, [4])


# functional: arguments
@pytest.mark.parametrize("context_length", [0, T, T + 3, -1])
def test_context_length_out_of_range_is_refused(context_length):
    msg = rf"context_length {context_length}: expected 1 <= context_length < T = {T}"
    with pytest.raises(ValueError, match=msg):
        attention_features(layers3(), context_length, [T - 1])


@pytest.mark.parametrize("context_length", [3.0, "3", True, None])
def test_context_length_not_an_int_is_refused(context_length):
    with pytest.raises(ValueError, match=r"context_length .*: expected an integer"):
        attention_features(layers3(), context_length, [4])


@pytest.mark.parametrize("position", [CTX - 2, 0, T, -1])
def test_positions_outside_the_emitting_range_are_refused(position):
    msg = (
        rf"position {position}: the emitting positions must lie in "
        rf"\[context_length - 1, T - 1\] = \[{CTX - 1}, {T - 1}\]"
    )
    with pytest.raises(ValueError, match=msg):
        attention_features(layers3(), CTX, [CTX, position])


@pytest.mark.parametrize("positions", [[], [4.0, 5.0], [[4, 5]], [True]])
def test_empty_or_non_integer_positions_are_refused(positions):
    with pytest.raises(ValueError, match=r"positions .*: expected a non-empty list of integers"):
        attention_features(layers3(), CTX, positions)


@pytest.mark.parametrize("feature", ["fourier", "FOURIER_HF", "wavelet_hf", ""])
def test_an_unknown_feature_is_refused_listing_the_known_ones(feature):
    msg = rf"feature '{feature}' is not one of fourier_hf, fourier_lf, laplacian_hf, lookback"
    with pytest.raises(ValueError, match=msg):
        attention_features(layers3(), CTX, [4], feature)


@pytest.mark.parametrize("cutoff", [0, 0.0, -0.1, 0.51, 1.0, float("nan")])
def test_a_cutoff_outside_the_band_is_refused(cutoff):
    msg = rf"cutoff {cutoff!r}: expected a frequency in \(0, 0\.5\] cycles/sample"
    with pytest.raises(ValueError, match=msg):
        attention_features(layers3(), CTX, [4], "fourier_lf", cutoff)


def test_a_cutoff_inside_the_band_changes_the_features():
    a = layers3()
    assert np.isfinite(attention_features(a, CTX, [7], "fourier_hf", 0.5)).all()
    default = attention_features(a, CTX, [7], "fourier_hf")
    wider = attention_features(a, CTX, [7], "fourier_hf", 0.2)
    assert (wider >= default - 1e-12).all() and (wider > default + 1e-6).any()


# detector
def data(n: int = 40, width: int = 4, positives: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, np.int64)
    y[:positives] = 1
    return rng.normal(size=(n, width)) + y[:, None], y


def toy_detector(width: int = 4) -> Detector:
    return Detector(np.zeros(width), np.ones(width), np.ones(width), 0.0, 0.5)


def test_a_valid_fit_scores_its_own_kind_of_data():
    x, y = data()
    det = fit_detector(x, y, seed=0)
    scores = evaluate(det, *data(seed=1))
    assert 0.5 < scores["auroc"] <= 1 and det.threshold in np.round(np.linspace(0, 1, 11), 1)


@pytest.mark.parametrize("x", [np.zeros((3, 5)), np.zeros((3, 3)), np.zeros(4), np.zeros((0, 4))])
def test_proba_and_evaluate_refuse_the_wrong_feature_width(x):
    msg = rf"features: expected shape \[n >= 1, 4\], got \[{', '.join(map(str, x.shape))}\]"
    with pytest.raises(ValueError, match=msg):
        toy_detector().proba(x)
    with pytest.raises(ValueError, match=msg):
        evaluate(toy_detector(), x, np.zeros(len(x)))


def test_fit_refuses_features_that_are_not_a_table():
    with pytest.raises(
        ValueError, match=r"features: expected shape \[n >= 1, features\], got \[2, 3, 4\]"
    ):  # noqa: E501
        fit_detector(np.zeros((2, 3, 4)), np.array([0, 1]))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_feature_names_its_row(bad):
    x, y = data()
    x[7, 2] = bad
    msg = r"features row 7 column 2 \(0-based\) value .* is not finite"
    with pytest.raises(ValueError, match=msg):
        fit_detector(x, y)
    with pytest.raises(ValueError, match=msg):
        toy_detector().proba(x)
    with pytest.raises(ValueError, match=msg):
        evaluate(toy_detector(), x, y)


@pytest.mark.parametrize(
    ("dtype", "value", "shown"),
    [(np.int64, 2, "2"), (np.int64, -1, "-1"), (np.float64, 0.5, "0.5"), (float, np.nan, "nan")],
)
def test_labels_that_are_not_0_or_1_name_the_row_and_value(dtype, value, shown):
    x, y = data()
    y = y.astype(dtype)
    y[13] = value
    msg = rf"labels row 13: value (np\.\w+\()?{re.escape(shown)}\)? is not 0 or 1"
    with pytest.raises(ValueError, match=msg):
        fit_detector(x, y)
    with pytest.raises(ValueError, match=msg):
        evaluate(toy_detector(), x, y)


@pytest.mark.parametrize("cls", [0, 1])
def test_one_class_only_is_refused(cls):
    x, _ = data()
    y = np.full(len(x), cls)
    msg = rf"labels: all 40 rows are {cls}; a detector needs hallucinated \(1\) and grounded"
    with pytest.raises(ValueError, match=msg):
        fit_detector(x, y)
    with pytest.raises(ValueError, match=msg):
        evaluate(toy_detector(), x, y)


@pytest.mark.parametrize("shape", [(39,), (41,), (0,), (40, 1)])
def test_labels_of_the_wrong_length_or_shape_are_refused(shape):
    x, _ = data()
    y = (np.arange(int(np.prod(shape))) % 2).reshape(shape)
    msg = rf"labels: expected shape \[40\] \(one per feature row\), got \[{', '.join(map(str, shape))}\]"  # noqa: E501
    with pytest.raises(ValueError, match=msg):
        fit_detector(x, y)
    with pytest.raises(ValueError, match=msg):
        evaluate(toy_detector(), x, y)


@pytest.mark.parametrize("positives", [1, 39])
def test_fewer_than_two_of_a_class_is_refused(positives):
    x, y = data(positives=positives)
    with pytest.raises(ValueError, match=r"labels: need at least 2 tokens of each class"):
        fit_detector(x, y)


def test_two_of_a_class_is_enough():
    x, y = data(positives=2)
    assert fit_detector(x, y).coef.shape == (4,)


# spec.check_ids
TASK = lm.RecallTask()  # keys 0..31, values 32..63, SEP 64, Q 65, BOS 66; T = 30


def valid_ids(n: int = 4, seed: int = 0) -> np.ndarray:
    return lm.sample_sequences(TASK, np.random.default_rng(seed), n, 0.5)[0]


def test_sampled_sequences_pass_unchanged():
    ids = valid_ids(16)
    out = check_ids(ids, TASK)
    assert out.dtype == np.int64 and np.array_equal(out, ids)
    assert np.array_equal(check_ids(ids.astype(np.int32), TASK), ids)


@pytest.mark.parametrize(
    "shape", [(4, TASK.length - 1), (4, TASK.length + 1), (TASK.length,), (1, 4, TASK.length)]
)
def test_ids_of_the_wrong_shape_are_refused(shape):
    ids = np.zeros(shape, np.int64)
    msg = rf"ids: expected integer token ids \[batch, 30\] \(BOS, 8 key-value pairs, SEP, 4 turns Q k v\), got int64 \[{', '.join(map(str, shape))}\]"  # noqa: E501
    with pytest.raises(ValueError, match=msg):
        check_ids(ids, TASK)


def test_float_ids_are_refused_naming_the_dtype():
    with pytest.raises(ValueError, match=r"got float64 \[4, 30\]"):
        check_ids(valid_ids().astype(np.float64), TASK)


@pytest.mark.parametrize(
    ("position", "token", "what", "span"),
    [
        (0, 0, "BOS", "66..66"),
        (1, 40, "a key", "0..31"),
        (2, 5, "a value", "32..63"),
        (16, TASK.sep, "a value", "32..63"),
        (17, TASK.q, "SEP", "64..64"),
        (18, 3, "Q", "65..65"),
        (19, 33, "a key", "0..31"),
        (20, 7, "a value", "32..63"),
        (29, -1, "a value", "32..63"),
        (28, TASK.vocab, "a key", "0..31"),
    ],
)
def test_a_wrong_token_names_sequence_position_and_what_belongs_there(position, token, what, span):
    ids = valid_ids()
    ids[2, position] = token
    msg = rf"ids sequence 2, position {position}: token {token} is not {what} \(ids {span}\)"
    with pytest.raises(ValueError, match=msg):
        check_ids(ids, TASK)


def test_check_ids_follows_a_smaller_task():
    task = lm.RecallTask(keys=4, values=3, pairs=2, queries=1)
    ids = lm.sample_sequences(task, np.random.default_rng(0), 3, 0.5)[0]
    assert check_ids(ids, task).shape == (3, task.length)
    ids[1, task.value_positions()[0]] = 0  # a key where the answer belongs
    with pytest.raises(ValueError, match=r"sequence 1, position 8: token 0 is not a value"):
        check_ids(ids, task)


# experiment config
def test_the_defaults_pass():
    out = X.check_config(dict(X.DEFAULTS))
    assert out["steps"] == X.DEFAULTS["steps"] and out["lr"] == X.DEFAULTS["lr"]


@pytest.mark.parametrize(
    ("key", "value", "msg"),
    [
        ("steps", 2.5, r"steps=2\.5: expected an integer in 1\.\.10000000"),
        ("steps", 0, r"steps=0: expected an integer in 1\.\.10000000"),
        ("steps", True, r"steps=True: expected an integer"),
        ("lr", 0, r"lr=0: expected a finite number in \(0, 1\]"),
        ("lr", "fast", r"lr='fast': expected a finite number"),
        ("absent_fraction", 1.0, r"absent_fraction=1\.0: expected a fraction in \(0, 1\)"),
        ("absent_fraction", 0, r"absent_fraction=0: expected a finite number in \(0, 1\]"),
        ("pairs", 32, r"pairs < keys.*got RecallTask\(keys=32, values=32, pairs=32"),
        ("pairs", 40, r"pairs < keys.*pairs=40"),
        ("d_model", 66, r"d_model=66 is not a multiple of heads=4"),
        ("temperature", -1, r"temperature=-1: expected a finite number in \[0, 100\]"),
        ("queries", 0, r"queries=0: expected an integer in 1\.\."),
        ("train_sequences", 5, r"train_sequences=5: expected an integer in 10\.\."),
    ],
)
def test_a_bad_value_names_the_key_and_value(key, value, msg):
    with pytest.raises(ConfigError, match=msg):
        X.check_config({**X.DEFAULTS, key: value})


def test_bench_with_a_bad_value_fails_before_training_and_writes_nothing(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(lm, "train_lm", no_training)
    with pytest.raises(ConfigError, match=r"steps=0: expected an integer"):
        X.bench(out_dir=tmp_path, config={"steps": 0})
    assert list(tmp_path.iterdir()) == []


def test_train_with_a_bad_value_fails_before_training_and_writes_nothing(tmp_path, monkeypatch):
    from neuroedge.models.freq_halluc.spec import train

    monkeypatch.setattr(lm, "train_lm", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(ConfigError, match=r"d_model=65 is not a multiple of heads=4"):
        train({"d_model": 65}, out=str(tmp_path / "ck.pt"))
    assert list(tmp_path.iterdir()) == []
